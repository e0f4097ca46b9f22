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

// libFLAC is a FLAC stream decoded by libFLAC a frame at a time.
type libFLAC struct {
	flacFrames
	f     *C.prep_flac
	r     io.Reader
	h     cgo.Handle // of this libFLAC, for prepFlacRead
	rerr  error      // the reader's error other than io.EOF
	chans [][]int32  // the frame's channels, in the C decoder's memory
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
	f, err := newFLACFrames(int(s.f.rate), int(s.f.channels), int(s.f.bits), uint64(s.f.total))
	if err != nil {
		s.close()
		return nil, err
	}
	s.flacFrames = f
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

func (s *libFLAC) read(dst []float32) (int, error) {
	for len(s.pending) == 0 {
		switch C.prep_flac_next(s.f) {
		case 0:
			return 0, s.end()
		case -1:
			return 0, s.failure(fmt.Sprintf("damaged FLAC frame after sample %d", s.done))
		}
		n, ch := int(s.f.blocksize), int(s.f.frame_channels)
		planar := unsafe.Slice((*int32)(unsafe.Pointer(s.f.planar)), n*ch)
		s.chans = s.chans[:0]
		for c := range ch {
			s.chans = append(s.chans, planar[c*n:(c+1)*n])
		}
		if err := s.add(s.chans); err != nil {
			return 0, err
		}
	}
	return s.take(dst), nil
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
