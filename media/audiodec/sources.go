package audiodec

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/jfreymuth/oggvorbis"
	"github.com/mewkiz/flac"
	"github.com/prep-dev/prep/formats/wav"
)

// wavSource is a WAVE stream.
type wavSource struct{ r *wav.Reader }

func newWAV(r io.Reader) (source, error) {
	w, err := wav.NewReader(r)
	if err != nil {
		return nil, err
	}
	return wavSource{w}, nil
}

func (wavSource) name() Decoder                     { return "wav" }
func (wavSource) close()                            {}
func (s wavSource) format() (int, int, int64)       { return s.r.Rate, s.r.Channels, s.r.Frames }
func (s wavSource) read(dst []float32) (int, error) { return s.r.Read(dst) }

// flacFrames is what the two FLAC decoders share: the stream's format
// from its STREAMINFO, and the last frame's samples, interleaved and
// scaled, waiting in pending until read takes them.
type flacFrames struct {
	rate, channels int
	scale          float32 // 1 / 2^(bits-1)
	frames         int64   // announced; 0 in the header means unknown
	done           int64   // frames decoded
	pending        []float32
}

func newFLACFrames(rate, channels, bits int, total uint64) (flacFrames, error) {
	if channels == 0 || rate == 0 || bits < 4 || bits > 32 {
		return flacFrames{}, fmt.Errorf("damaged FLAC header: %d channels at %d Hz, %d bits; re-encode or remove the file",
			channels, rate, bits)
	}
	return flacFrames{rate: rate, channels: channels,
		scale:  float32(1 / float64(uint64(1)<<(bits-1))),
		frames: int64(total)}, nil
}

func (*flacFrames) name() Decoder { return "flac" }

func (f *flacFrames) format() (int, int, int64) {
	frames := f.frames
	if frames == 0 {
		frames = -1
	}
	return f.rate, f.channels, frames
}

// add makes a frame's samples, one slice a channel, the pending ones.
func (f *flacFrames) add(chans [][]int32) error {
	if len(chans) != f.channels {
		return fmt.Errorf("damaged FLAC frame after sample %d: %d channels, the header says %d", f.done, len(chans), f.channels)
	}
	n := len(chans[0])
	f.pending = f.pending[:0]
	for i := range n {
		for _, c := range chans {
			f.pending = append(f.pending, float32(c[i])*f.scale)
		}
	}
	f.done += int64(n)
	return nil
}

// end is read's error at the end of the stream: io.EOF, unless frames the
// header announced are missing.
func (f *flacFrames) end() error {
	if f.frames > 0 && f.done < f.frames {
		return fmt.Errorf("FLAC cut off: %d of the %d frames its header announces; copy the file again or remove it", f.done, f.frames)
	}
	return io.EOF
}

// take moves pending samples to dst, whole frames of them.
func (f *flacFrames) take(dst []float32) int {
	n := copy(dst[:len(dst)/f.channels*f.channels], f.pending)
	f.pending = f.pending[n:]
	return n
}

// flacSource is a FLAC stream decoded by github.com/mewkiz/flac a frame
// at a time.
type flacSource struct {
	flacFrames
	s     *flac.Stream
	chans [][]int32
}

// newGoFLAC opens a FLAC stream with the pure-Go decoder: the one of
// builds without cgo, and the reference libFLAC's samples are checked
// against.
func newGoFLAC(r io.Reader) (source, error) {
	s, err := flac.New(r)
	if err != nil {
		return nil, fmt.Errorf("damaged FLAC header: %w; re-encode or remove the file", err)
	}
	info := s.Info
	f, err := newFLACFrames(int(info.SampleRate), int(info.NChannels), int(info.BitsPerSample), info.NSamples)
	if err != nil {
		return nil, err
	}
	return &flacSource{flacFrames: f, s: s}, nil
}

func (*flacSource) close() {}

func (f *flacSource) read(dst []float32) (int, error) {
	for len(f.pending) == 0 {
		fr, err := f.s.ParseNext()
		if err == io.EOF {
			return 0, f.end()
		}
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return 0, fmt.Errorf("FLAC cut off after %d of %d frames; copy the file again or remove it", f.done, f.frames)
			}
			return 0, fmt.Errorf("damaged FLAC frame after sample %d: %w; re-encode or remove the file", f.done, err)
		}
		f.chans = f.chans[:0]
		for _, sf := range fr.Subframes {
			f.chans = append(f.chans, sf.Samples)
		}
		if err := f.add(f.chans); err != nil {
			return 0, err
		}
	}
	return f.take(dst), nil
}

// oggLink reads an Ogg file up to the end of its first logical stream:
// the page that ends it (flagged end of stream) is the last, so a chained
// file's next stream waits in r. oggvorbis, given the whole file, reads
// on past that page within one Read and fails on the next stream's
// headers.
type oggLink struct {
	r    *bufio.Reader
	left int  // bytes of the current page not yet read
	last bool // the current page ends the stream
}

func (l *oggLink) Read(p []byte) (int, error) {
	if l.left == 0 {
		if l.last {
			return 0, io.EOF
		}
		// A page: 27 bytes of header, a segment table, the segments.
		h, err := l.r.Peek(27)
		if err == nil && string(h[:4]) == "OggS" {
			if seg, err := l.r.Peek(27 + int(h[26])); err == nil {
				l.left, l.last = len(seg), h[5]&4 != 0
				for _, s := range seg[27:] {
					l.left += int(s)
				}
			}
		}
		if l.left == 0 {
			return l.r.Read(p) // not a whole page header: the decoder judges it
		}
	}
	k, err := l.r.Read(p[:min(len(p), l.left)])
	l.left -= k
	return k, err
}

// vorbisSource decodes Ogg Vorbis.
type vorbisSource struct {
	r  *oggvorbis.Reader
	in *bufio.Reader // the file, after the pages r has read
}

// isVorbis reports whether an Ogg stream's first packet is a Vorbis
// identification header (Opus and FLAC in Ogg go to ffmpeg).
func isVorbis(head []byte) bool {
	// The first page: 27 bytes of header, the segment table, the packet.
	if len(head) < 27 || string(head[:4]) != "OggS" {
		return false
	}
	body := 27 + int(head[26])
	return len(head) >= body+7 && string(head[body:body+7]) == "\x01vorbis"
}

func newVorbis(r *bufio.Reader) (source, error) {
	v, err := oggvorbis.NewReader(&oggLink{r: r})
	if err != nil {
		return nil, fmt.Errorf("damaged Ogg Vorbis header: %w; re-encode or remove the file", err)
	}
	if v.Channels() < 1 || v.SampleRate() < 1 {
		return nil, fmt.Errorf("damaged Ogg Vorbis header: %d channels at %d Hz; re-encode or remove the file", v.Channels(), v.SampleRate())
	}
	return vorbisSource{v, r}, nil
}

func (vorbisSource) name() Decoder               { return "vorbis" }
func (vorbisSource) close()                      {}
func (s vorbisSource) format() (int, int, int64) { return s.r.SampleRate(), s.r.Channels(), -1 }

func (s vorbisSource) read(dst []float32) (int, error) {
	n, err := s.r.Read(dst)
	switch {
	case err == io.EOF:
		if next, _ := s.in.Peek(4); string(next) == "OggS" {
			// A chained file (cat a.ogg b.ogg): more logical streams
			// after the first's end, which oggvorbis does not read.
			// ffmpeg decodes them all, new rates and channels too; its
			// output is the reference, so it decodes the whole file.
			return 0, fmt.Errorf("chained Ogg: %w", errUseFFmpeg)
		}
		return n, err
	case errors.Is(err, io.ErrUnexpectedEOF):
		return n, fmt.Errorf("Ogg Vorbis cut off after %d samples; copy the file again or remove it", s.r.Position())
	case err != nil:
		return n, fmt.Errorf("damaged Ogg Vorbis data after %d samples: %w; re-encode or remove the file", s.r.Position(), err)
	}
	return n, nil
}
