package audiodec

import (
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

// flacSource decodes FLAC frames one at a time; a frame's samples wait in
// pending until read takes them.
type flacSource struct {
	s        *flac.Stream
	channels int
	scale    float32 // 1 / 2^(bits-1)
	frames   int64   // announced; 0 in the header means unknown
	done     int64   // frames decoded
	pending  []float32
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
	if info.NChannels == 0 || info.SampleRate == 0 || info.BitsPerSample < 4 || info.BitsPerSample > 32 {
		return nil, fmt.Errorf("damaged FLAC header: %d channels at %d Hz, %d bits; re-encode or remove the file",
			info.NChannels, info.SampleRate, info.BitsPerSample)
	}
	return &flacSource{s: s, channels: int(info.NChannels),
		scale:  float32(1 / float64(uint64(1)<<(info.BitsPerSample-1))),
		frames: int64(info.NSamples)}, nil
}

func (*flacSource) name() Decoder { return "flac" }
func (*flacSource) close()        {}

func (f *flacSource) format() (int, int, int64) {
	frames := f.frames
	if frames == 0 {
		frames = -1
	}
	return int(f.s.Info.SampleRate), f.channels, frames
}

func (f *flacSource) read(dst []float32) (int, error) {
	for len(f.pending) == 0 {
		fr, err := f.s.ParseNext()
		if err == io.EOF {
			if f.frames > 0 && f.done < f.frames {
				return 0, fmt.Errorf("FLAC cut off: %d of the %d frames its header announces; copy the file again or remove it", f.done, f.frames)
			}
			return 0, io.EOF
		}
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return 0, fmt.Errorf("FLAC cut off after %d of %d frames; copy the file again or remove it", f.done, f.frames)
			}
			return 0, fmt.Errorf("damaged FLAC frame after sample %d: %w; re-encode or remove the file", f.done, err)
		}
		if len(fr.Subframes) != f.channels {
			return 0, fmt.Errorf("damaged FLAC frame after sample %d: %d channels, the header says %d", f.done, len(fr.Subframes), f.channels)
		}
		n := len(fr.Subframes[0].Samples)
		f.pending = f.pending[:0]
		for i := range n {
			for _, sf := range fr.Subframes {
				f.pending = append(f.pending, float32(sf.Samples[i])*f.scale)
			}
		}
		f.done += int64(n)
	}
	n := copy(dst[:len(dst)/f.channels*f.channels], f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// vorbisSource decodes Ogg Vorbis.
type vorbisSource struct{ r *oggvorbis.Reader }

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

func newVorbis(r io.Reader) (source, error) {
	v, err := oggvorbis.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("damaged Ogg Vorbis header: %w; re-encode or remove the file", err)
	}
	if v.Channels() < 1 || v.SampleRate() < 1 {
		return nil, fmt.Errorf("damaged Ogg Vorbis header: %d channels at %d Hz; re-encode or remove the file", v.Channels(), v.SampleRate())
	}
	return vorbisSource{v}, nil
}

func (vorbisSource) name() Decoder               { return "vorbis" }
func (vorbisSource) close()                      {}
func (s vorbisSource) format() (int, int, int64) { return s.r.SampleRate(), s.r.Channels(), -1 }

func (s vorbisSource) read(dst []float32) (int, error) {
	n, err := s.r.Read(dst)
	switch {
	case err == io.EOF:
		return n, err
	case errors.Is(err, io.ErrUnexpectedEOF):
		return n, fmt.Errorf("Ogg Vorbis cut off after %d samples; copy the file again or remove it", s.r.Position())
	case err != nil:
		return n, fmt.Errorf("damaged Ogg Vorbis data after %d samples: %w; re-encode or remove the file", s.r.Position(), err)
	}
	return n, nil
}
