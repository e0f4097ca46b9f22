package wav

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Reader streams a WAVE file's samples as float32, whatever their
// encoding: 8-, 16-, 24- and 32-bit PCM and 32- and 64-bit IEEE float,
// plain or WAVE_FORMAT_EXTENSIBLE. A data chunk whose size is 0xFFFFFFFF
// (as ffmpeg writes to a pipe) runs to the end of the stream.
type Reader struct {
	Rate     int
	Channels int
	// Frames is the number of frames the data chunk holds, or -1 when
	// the stream does not say.
	Frames int64

	r      io.Reader
	tag    uint16
	bytes  int   // per sample
	left   int64 // data bytes still to read; -1: to the end
	buf    []byte
	carry  int // bytes of a partial frame at the start of buf
	frameB int
}

// streamSize marks a data chunk of unknown length.
const streamSize = math.MaxUint32

// NewReader reads r's header up to the first sample.
func NewReader(r io.Reader) (*Reader, error) {
	f, n, err := readHeader(r)
	if err != nil {
		return nil, err
	}
	switch {
	case f.tag == formatPCM && (f.bits == 8 || f.bits == 16 || f.bits == 24 || f.bits == 32),
		f.tag == formatIEEEFloat && (f.bits == 32 || f.bits == 64):
	default:
		return nil, fmt.Errorf("%w: format %d with %d bits per sample; convert it to PCM or IEEE float", ErrUnsupported, f.tag, f.bits)
	}
	w := &Reader{Rate: f.rate, Channels: f.channels, r: r, tag: f.tag, bytes: f.bits / 8}
	w.frameB = w.bytes * w.Channels
	w.left, w.Frames = n, n/int64(w.frameB)
	if n == streamSize {
		w.left, w.Frames = -1, -1
	} else if n%int64(w.frameB) != 0 {
		return nil, fmt.Errorf("wav data of %d bytes is not whole frames of %d bytes", n, w.frameB)
	}
	w.buf = make([]byte, 0, 64<<10/w.frameB*w.frameB+w.frameB)
	return w, nil
}

// ErrUnsupported is a WAVE encoding Reader does not decode (μ-law,
// ADPCM, ...).
var ErrUnsupported = errors.New("wav encoding not supported")

// ErrTruncated is a data chunk that ends before its size says.
var ErrTruncated = errors.New("wav cut off: the file ends before the audio data its header announces")

// Read fills dst with whole frames of interleaved samples, nominally in
// [-1, 1], and returns how many samples it wrote; io.EOF after the last.
// A data chunk that ends early is ErrTruncated.
func (w *Reader) Read(dst []float32) (int, error) {
	maxFrames := len(dst) / w.Channels
	if maxFrames == 0 {
		return 0, fmt.Errorf("wav: a buffer of %d samples holds no frame of %d channels", len(dst), w.Channels)
	}
	if w.left == 0 {
		return 0, io.EOF // whole frames: nothing can be carried here
	}
	want := min(maxFrames*w.frameB, cap(w.buf))
	if w.left >= 0 {
		want = int(min(int64(want), w.left+int64(w.carry)))
	}
	b := w.buf[:want]
	n, err := io.ReadAtLeast(w.r, b[w.carry:], 1)
	n += w.carry
	if w.left >= 0 {
		w.left -= int64(n - w.carry)
	}
	whole := n / w.frameB * w.frameB
	out := w.decode(dst, b[:whole])
	w.carry = copy(w.buf[:cap(w.buf)], b[whole:n])
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		if w.left > 0 || w.carry != 0 {
			return out, ErrTruncated
		}
		if out == 0 {
			return 0, io.EOF
		}
		return out, nil
	case err != nil:
		return out, err
	}
	return out, nil
}

// decode converts whole frames of b into dst.
func (w *Reader) decode(dst []float32, b []byte) int {
	le := binary.LittleEndian
	n := len(b) / w.bytes
	switch {
	case w.tag == formatIEEEFloat && w.bytes == 4:
		for i := range n {
			dst[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
	case w.tag == formatIEEEFloat:
		for i := range n {
			dst[i] = float32(math.Float64frombits(le.Uint64(b[8*i:])))
		}
	case w.bytes == 1: // unsigned, 128 is zero
		for i := range n {
			dst[i] = float32(int(b[i])-128) / 128
		}
	case w.bytes == 2:
		for i := range n {
			dst[i] = float32(int16(le.Uint16(b[2*i:]))) / 32768
		}
	case w.bytes == 3:
		for i := range n {
			v := int32(uint32(b[3*i])<<8|uint32(b[3*i+1])<<16|uint32(b[3*i+2])<<24) >> 8
			dst[i] = float32(v) / (1 << 23)
		}
	default:
		for i := range n {
			dst[i] = float32(float64(int32(le.Uint32(b[4*i:]))) / (1 << 31))
		}
	}
	return n
}
