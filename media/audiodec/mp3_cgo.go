//go:build cgo

package audiodec

/*
#cgo LDFLAGS: -lmpg123
#include <stdlib.h>
#include <mpg123.h>

// prep_mp3_new makes a libmpg123 handle that decodes fed bytes to
// float32 at the stream's own rate and channels, gapless (the LAME/Info
// header's encoder delay and padding cut off, as ffmpeg does), and
// prints nothing.
static mpg123_handle *prep_mp3_new(int *err) {
	mpg123_handle *h = mpg123_new(NULL, err);
	if (h == NULL) return NULL;
	const long *rates;
	size_t n;
	mpg123_rates(&rates, &n);
	if ((*err = mpg123_param(h, MPG123_FLAGS, MPG123_GAPLESS | MPG123_QUIET | MPG123_FORCE_FLOAT, 0)) != MPG123_OK ||
	    (*err = mpg123_format_none(h)) != MPG123_OK) goto fail;
	for (size_t i = 0; i < n; i++)
		if ((*err = mpg123_format(h, rates[i], MPG123_MONO | MPG123_STEREO, MPG123_ENC_FLOAT_32)) != MPG123_OK) goto fail;
	if ((*err = mpg123_open_feed(h)) != MPG123_OK) goto fail;
	return h;
fail:
	mpg123_delete(h);
	return NULL;
}
*/
import "C"

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sync"
	"unsafe"
)

// MP3 decodes through libmpg123 where cgo is on: one ffmpeg process per
// file cost about 40 ms, more than decoding a speech clip. Its samples
// are ffmpeg's within float rounding, and as many (TestMP3LikeFFmpeg).
const mp3InProcess = true

// MPG123Available reports whether MP3 decodes in process (cgo builds).
func MPG123Available() bool { return true }

// mpg123Init is libmpg123's global set-up, required before 1.27.
var mpg123Init = sync.OnceValue(func() C.int { return C.mpg123_init() })

// mp3Source is an MP3 stream fed to libmpg123 as it is read.
type mp3Source struct {
	h        *C.mpg123_handle
	r        io.Reader
	buf      []byte // input read from r
	feed     []byte // input not yet given to libmpg123
	tail     []byte // the input's last bytes, up to tailSize
	eof      bool   // r is at its end
	rate     int
	channels int
	frames   int64 // the gapless length the Info header gives; -1: unknown
	done     int64 // frames decoded
}

func newMP3(r *bufio.Reader, info mp3Info) (source, error) {
	if e := mpg123Init(); e != C.MPG123_OK {
		return nil, fmt.Errorf("libmpg123: %s", C.GoString(C.mpg123_plain_strerror(e)))
	}
	var e C.int
	h := C.prep_mp3_new(&e)
	if h == nil {
		return nil, fmt.Errorf("libmpg123: %s", C.GoString(C.mpg123_plain_strerror(e)))
	}
	s := &mp3Source{h: h, r: r, buf: make([]byte, 16<<10), frames: -1}
	// Feed bytes until libmpg123 has read the first frame's format.
	for {
		var done C.size_t
		ret := s.decode(nil, &done)
		switch ret {
		case C.MPG123_NEW_FORMAT:
			var rate C.long
			var ch, enc C.int
			C.mpg123_getformat(h, &rate, &ch, &enc)
			s.rate, s.channels = int(rate), int(ch)
			if info.frames > 0 {
				if n := int64(C.mpg123_length(h)); n >= 0 {
					s.frames = n
				}
			}
			return s, nil
		case C.MPG123_NEED_MORE:
			if err := s.fill(); err != nil {
				s.close()
				if err == io.EOF {
					return nil, errors.New("MP3 cut off before its first whole audio frame; copy the file again or remove it")
				}
				return nil, err
			}
		case C.MPG123_OK:
		default:
			err := s.failure("damaged MP3 header", ret)
			s.close()
			return nil, err
		}
	}
}

// decode runs mpg123_decode with the pending input and dst (nil: none)
// as the output, its length rounded down to whole frames.
func (s *mp3Source) decode(dst []float32, done *C.size_t) C.int {
	var in *C.uchar
	if len(s.feed) > 0 {
		in = (*C.uchar)(unsafe.Pointer(&s.feed[0]))
	}
	var out unsafe.Pointer
	size := 0
	if s.channels > 0 && len(dst) >= s.channels {
		out = unsafe.Pointer(&dst[0])
		size = len(dst) / s.channels * s.channels * 4
	}
	// libmpg123 copies the input into its own buffers.
	ret := C.mpg123_decode(s.h, in, C.size_t(len(s.feed)), out, C.size_t(size), done)
	s.feed = nil
	return ret
}

// fill reads the next input for libmpg123; io.EOF at the end.
func (s *mp3Source) fill() error {
	if s.eof {
		return io.EOF
	}
	n, err := io.ReadFull(s.r, s.buf)
	s.feed = s.buf[:n]
	if n >= tailSize {
		s.tail = append(s.tail[:0], s.feed[n-tailSize:]...)
	} else {
		s.tail = append(s.tail, s.feed...)
		s.tail = s.tail[max(0, len(s.tail)-tailSize):]
	}
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		s.eof = true
		if n == 0 {
			return io.EOF
		}
	case err != nil:
		return fmt.Errorf("reading the MP3: %w", err)
	}
	return nil
}

// failure describes libmpg123's error ret, what prefixing it.
func (s *mp3Source) failure(what string, ret C.int) error {
	msg := C.GoString(C.mpg123_plain_strerror(ret))
	if ret == C.MPG123_ERR {
		msg = C.GoString(C.mpg123_strerror(s.h))
	}
	return fmt.Errorf("%s: libmpg123: %s; re-encode or remove the file", what, msg)
}

func (*mp3Source) name() Decoder { return "mp3" }

func (s *mp3Source) format() (int, int, int64) { return s.rate, s.channels, s.frames }

func (s *mp3Source) read(dst []float32) (int, error) {
	for idle := 0; ; idle++ {
		if idle == maxIdle {
			return 0, fmt.Errorf("damaged MP3: libmpg123 made no progress after sample %d; re-encode or remove the file", s.done)
		}
		var done C.size_t
		ret := s.decode(dst, &done)
		n := int(done) / 4
		s.done += int64(n / s.channels)
		switch ret {
		case C.MPG123_NEW_FORMAT:
			var rate C.long
			var ch, enc C.int
			C.mpg123_getformat(s.h, &rate, &ch, &enc)
			if int(rate) != s.rate || int(ch) != s.channels {
				// A stream whose rate or channels change midway (joined
				// files): ffmpeg's output is the reference.
				return 0, fmt.Errorf("MP3 changes from %d Hz × %d to %d Hz × %d: %w", s.rate, s.channels, rate, ch, errUseFFmpeg)
			}
		case C.MPG123_OK, C.MPG123_DONE:
		case C.MPG123_NEED_MORE:
			if n > 0 {
				return n, nil
			}
			if err := s.fill(); err == io.EOF {
				return 0, s.end()
			} else if err != nil {
				return 0, err
			}
			continue
		default:
			return 0, s.failure(fmt.Sprintf("damaged MP3 after sample %d", s.done), ret)
		}
		if n > 0 {
			return n, nil
		}
		if ret == C.MPG123_DONE {
			return 0, s.end()
		}
	}
}

// tailSize is how many of the input's last bytes mp3Source keeps: more
// than the largest Layer III frame (1,441 bytes).
const tailSize = 4096

// end is read's error at the end of the stream: io.EOF, unless samples
// the Info header announces are missing, or the bytes libmpg123 was left
// with are a frame's start without its end (a file cut off in a copy;
// ffmpeg decodes such a frame, padding it, and says nothing).
func (s *mp3Source) end() error {
	if s.frames > 0 && s.done < s.frames {
		return fmt.Errorf("MP3 cut off: %d of the %d samples its Info header announces; copy the file again or remove it", s.done, s.frames)
	}
	var fill C.long
	var dfill C.double
	if C.mpg123_getstate(s.h, C.MPG123_BUFFERFILL, &fill, &dfill) == C.MPG123_OK && fill > 0 && int(fill) <= len(s.tail) {
		left := s.tail[len(s.tail)-int(fill):]
		if h, ok := parseMPEGHeader(left); ok && h.layer == 3 && h.rate == s.rate && h.size > len(left) {
			return fmt.Errorf("MP3 cut off: its last frame has %d of its %d bytes; copy the file again or remove it", len(left), h.size)
		}
	}
	return io.EOF
}

// close frees libmpg123's handle.
func (s *mp3Source) close() {
	if s.h != nil {
		C.mpg123_delete(s.h)
		s.h = nil
	}
}
