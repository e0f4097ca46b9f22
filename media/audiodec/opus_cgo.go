//go:build cgo

package audiodec

/*
#cgo pkg-config: opusfile
#include <opusfile.h>

static int prep_opus_channels(OggOpusFile *of, int li) { return op_channel_count(of, li); }
*/
import "C"

import (
	"bufio"
	"fmt"
	"io"
	"runtime"
	"unsafe"
)

// Ogg Opus decodes through libopusfile where cgo is on, as MP3 does
// through libmpg123: one ffmpeg process a file cost more than decoding a
// speech clip (Multilingual LibriSpeech and other corpora ship Opus). It
// gives libopus's samples at 48 kHz, the pre-skip and end trimming of
// the granule positions applied and the header's output gain, as ffmpeg's
// libopus decoder does (TestOpusLikeFFmpeg). Files of more than two
// channels stay ffmpeg's, whose channel order prep's mixing expects.

// opusInProcess: Opus decodes in process in cgo builds.
const opusInProcess = true

// opusSource is an Ogg Opus file, its bytes pinned for libopusfile,
// which reads them in place while it decodes.
type opusSource struct {
	data     []byte
	pin      runtime.Pinner
	of       *C.OggOpusFile
	channels int
	frames   int64
}

// isOpus reports whether head starts an Ogg stream whose first packet is
// an Opus identification header.
func isOpus(head []byte) bool {
	return len(head) >= 36 && string(head[:4]) == "OggS" && string(head[28:36]) == "OpusHead"
}

// newOpus reads the rest of r and opens it with libopusfile; a nil source
// for what ffmpeg decodes better (more than two channels).
func newOpus(r *bufio.Reader) (source, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	s := &opusSource{data: b}
	s.pin.Pin(&b[0]) // not empty: isOpus saw 36 bytes
	var e C.int
	s.of = C.op_open_memory((*C.uchar)(unsafe.Pointer(&b[0])), C.size_t(len(b)), &e)
	if s.of == nil {
		s.pin.Unpin()
		return nil, fmt.Errorf("damaged Opus file: libopusfile refused its headers (%s); re-encode or remove it", opusError(e))
	}
	s.channels = int(C.prep_opus_channels(s.of, -1))
	if s.channels > 2 {
		s.close()
		return nil, nil
	}
	s.frames = int64(C.op_pcm_total(s.of, -1))
	if s.frames < 0 {
		s.frames = -1
	}
	return s, nil
}

func (*opusSource) name() Decoder { return "opus" }

func (s *opusSource) format() (int, int, int64) { return 48000, s.channels, s.frames }

func (s *opusSource) read(dst []float32) (int, error) {
	n := len(dst) / s.channels * s.channels
	if n == 0 {
		return 0, nil
	}
	var li C.int
	got := C.op_read_float(s.of, (*C.float)(unsafe.Pointer(&dst[0])), C.int(n), &li)
	switch {
	case got == 0:
		return 0, io.EOF
	case got < 0:
		return 0, fmt.Errorf("damaged Opus file: %s; re-encode or remove it", opusError(got))
	case int(C.prep_opus_channels(s.of, li)) != s.channels:
		// A chained file whose streams differ in channels.
		return 0, errUseFFmpeg
	}
	return int(got) * s.channels, nil
}

func (s *opusSource) close() {
	if s.of != nil {
		C.op_free(s.of)
		s.of = nil
	}
	s.pin.Unpin()
	s.data = nil
}

// opusError words libopusfile's error codes.
func opusError(e C.int) string {
	switch e {
	case C.OP_HOLE:
		return "a page is missing (a hole in the data)"
	case C.OP_EREAD, C.OP_EOF:
		return "the data ends early"
	case C.OP_EBADHEADER, C.OP_ENOTFORMAT, C.OP_EVERSION:
		return "bad Opus headers"
	case C.OP_EBADPACKET, C.OP_EBADLINK, C.OP_EBADTIMESTAMP:
		return "a bad packet or timestamp"
	case C.OP_EFAULT:
		return "out of memory"
	}
	return fmt.Sprintf("libopusfile error %d", int(e))
}
