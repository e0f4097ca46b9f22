//go:build cgo

package audiodec

/*
#cgo LDFLAGS: -lFLAC
#include <stdlib.h>
#include "flac_cgo.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"io"
	"runtime/cgo"
	"unsafe"
)

// FLAC decodes through libFLAC where cgo is on: on the 51 FLAC clips of
// scripts/benchaudio.py, github.com/mewkiz/flac (newGoFLAC, the decoder
// without cgo) was two thirds of a convert's CPU and prep ran at 0.59x
// sox. FLAC is lossless, so both give the same samples
// (TestFLACDecodersAgree).
func newFLAC(r io.Reader) (source, error) { return newLibFLAC(r) }

// LibFLACAvailable reports whether FLAC decodes through libFLAC (cgo).
func LibFLACAvailable() bool { return true }

// libFLAC is a FLAC stream decoded by libFLAC a frame at a time; a frame's
// samples wait in pending until read takes them.
type libFLAC struct {
	f        *C.prep_flac
	r        io.Reader
	h        cgo.Handle // of this libFLAC, for prepFlacRead
	rerr     error      // the reader's error other than io.EOF
	channels int
	scale    float32 // 1 / 2^(bits-1)
	frames   int64   // announced; 0 in the header means unknown
	done     int64   // frames decoded
	pending  []float32
}

func newLibFLAC(r io.Reader) (source, error) {
	s := &libFLAC{r: r}
	s.h = cgo.NewHandle(s)
	s.f = C.prep_flac_new(C.uintptr_t(s.h))
	if s.f == nil {
		s.h.Delete()
		return nil, errors.New("libFLAC: out of memory")
	}
	if s.rerr != nil || s.f.error != 0 || s.f.got_info == 0 {
		err := s.failure("damaged FLAC header")
		s.close()
		return nil, err
	}
	rate, ch, bits := int(s.f.rate), int(s.f.channels), int(s.f.bits)
	if ch == 0 || rate == 0 || bits < 4 || bits > 32 {
		s.close()
		return nil, fmt.Errorf("damaged FLAC header: %d channels at %d Hz, %d bits; re-encode or remove the file", ch, rate, bits)
	}
	s.channels = ch
	s.scale = float32(1 / float64(uint64(1)<<(bits-1)))
	s.frames = int64(s.f.total)
	return s, nil
}

// failure describes why libFLAC stopped, what prefixing it.
func (s *libFLAC) failure(what string) error {
	switch {
	case s.rerr != nil:
		return fmt.Errorf("%s: %w", what, s.rerr)
	case s.f.oom != 0:
		return fmt.Errorf("%s: libFLAC: out of memory", what)
	case s.f.error != 0:
		status := C.GoString(C.prep_flac_error_string(s.f.error))
		return fmt.Errorf("%s: libFLAC: %s; re-encode or remove the file", what, status)
	case s.f.got_info == 0:
		return fmt.Errorf("%s: no STREAMINFO; re-encode or remove the file", what)
	}
	state := C.GoString(C.FLAC__stream_decoder_get_resolved_state_string(s.f.dec))
	return fmt.Errorf("%s: libFLAC: %s; re-encode or remove the file", what, state)
}

func (*libFLAC) name() Decoder { return "flac" }

func (s *libFLAC) format() (int, int, int64) {
	frames := s.frames
	if frames == 0 {
		frames = -1
	}
	return int(s.f.rate), s.channels, frames
}

func (s *libFLAC) read(dst []float32) (int, error) {
	for len(s.pending) == 0 {
		switch C.prep_flac_next(s.f) {
		case 0:
			if s.frames > 0 && s.done < s.frames {
				return 0, fmt.Errorf("FLAC cut off: %d of the %d frames its header announces; copy the file again or remove it", s.done, s.frames)
			}
			return 0, io.EOF
		case -1:
			return 0, s.failure(fmt.Sprintf("damaged FLAC frame after sample %d", s.done))
		}
		if ch := int(s.f.frame_channels); ch != s.channels {
			return 0, fmt.Errorf("damaged FLAC frame after sample %d: %d channels, the header says %d", s.done, ch, s.channels)
		}
		n := int(s.f.blocksize)
		planar := unsafe.Slice((*int32)(unsafe.Pointer(s.f.planar)), n*s.channels)
		s.pending = s.pending[:0]
		for i := range n {
			for c := range s.channels {
				s.pending = append(s.pending, float32(planar[c*n+i])*s.scale)
			}
		}
		s.done += int64(n)
	}
	n := copy(dst[:len(dst)/s.channels*s.channels], s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

// close frees libFLAC's decoder.
func (s *libFLAC) close() {
	if s.f != nil {
		C.prep_flac_free(s.f)
		s.f = nil
		s.h.Delete()
	}
}

// prepFlacRead fills libFLAC's buffer from the Go reader of the stream
// whose handle is h: 0 with bytes read, 1 at the end, 2 on an error.
//
//export prepFlacRead
func prepFlacRead(h C.uintptr_t, buf *C.uchar, n *C.size_t) C.int {
	s := cgo.Handle(h).Value().(*libFLAC)
	b := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(*n))
	k, err := s.r.Read(b)
	for k == 0 && err == nil {
		k, err = s.r.Read(b)
	}
	*n = C.size_t(k)
	switch {
	case k > 0:
		return 0
	case err == io.EOF:
		return 1
	}
	s.rerr = err
	return 2
}
