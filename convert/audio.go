package convert

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"unsafe"

	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/media/audiodec"
	"github.com/prep-dev/prep/media/pcm"
)

// AudioOptions choose the PCM that audio samples hold.
type AudioOptions struct {
	Rate     int     // Hz; 0 means 16000
	Channels int     // 0 means 1: ffmpeg mixes the file's channels down (or up)
	Duration float64 // seconds; 0 keeps each file whole, else trim or pad with silence to exactly Rate×Duration frames
	// SampleFormat is "f32" (float32 in [-1, 1], the default) or "s16"
	// (int16, as 16-bit WAV holds).
	SampleFormat string
	// MaxSampleBytes skips a file whose sample would hold more bytes
	// (--max-sample-bytes), found before its samples are decoded where
	// the header gives the length; 0: no bound.
	MaxSampleBytes int64
}

// NewAudioHandler decodes audio files (WAV, FLAC, Ogg Vorbis and MP3 in
// process, .opus and anything else ffmpeg reads through ffmpeg; see
// package audiodec), applies aug (nil: no augmentation) and makes one sample per
// file: a (T,) tensor for mono, (T, C) for C > 1 channels, of float32 or
// int16, and its Rate. The key is the input's key.
func NewAudioHandler(opt AudioOptions, aug AudioAugmenter) Handler {
	do := audiodec.Options{Rate: opt.Rate, Channels: opt.Channels, Duration: opt.Duration}
	if do.Rate == 0 {
		do.Rate = audiodec.DefaultRate
	}
	if do.Channels == 0 {
		do.Channels = 1
	}
	bytesPer := 4
	if opt.SampleFormat == "s16" {
		bytesPer = 2
	}
	if opt.MaxSampleBytes > 0 {
		do.MaxSamples = max(1, opt.MaxSampleBytes/int64(bytesPer))
	}
	if a, ok := aug.(interface{ HasAudioOps() bool }); ok && !a.HasAudioOps() {
		aug = nil // an image-only recipe: nothing to do to the samples
	}
	return pathFunc(func(ctx context.Context, in *Input, _ int, rng *rand.Rand) ([]formats.Sample, error) {
		if opt.SampleFormat != "" && opt.SampleFormat != "f32" && opt.SampleFormat != "s16" {
			return nil, Fatal(fmt.Errorf("audio sample format %q is not supported: use s16 or f32", opt.SampleFormat))
		}
		var t formats.Tensor
		var params map[string]any
		if opt.SampleFormat == "s16" && aug == nil {
			// Straight to 16 bits: a long file's float samples are never
			// held whole (a one-hour 16 kHz file: 115 MB, not 230).
			pcm, err := decodeAudio(ctx, in, do, audiodec.DecodeS16)
			if err != nil {
				return nil, tooLong(err, bytesPer, opt.MaxSampleBytes)
			}
			t = int16Tensor(pcm, do.Channels)
		} else {
			pcm, err := decodeAudio(ctx, in, do, audiodec.Decode)
			if err != nil {
				return nil, tooLong(err, bytesPer, opt.MaxSampleBytes)
			}
			if aug != nil {
				params = aug.ApplyAudio(pcm, do.Channels, do.Rate, rng)
			}
			if opt.SampleFormat == "s16" {
				t = s16Tensor(pcm, do.Channels)
			} else {
				t = f32Tensor(pcm, do.Channels)
			}
		}
		return []formats.Sample{{
			Key:    in.Key,
			Source: in.Source,
			Label:  in.Label,
			Fields: []formats.Field{{Name: formats.DataField, Tensor: t}},
			Rate:   do.Rate,
			Params: params,
		}}, nil
	})
}

// decodeAudio decodes in's audio with dec (audiodec.Decode or DecodeS16),
// from its path or a temporary copy of its bytes.
func decodeAudio[T any](ctx context.Context, in *Input, opt audiodec.Options,
	dec func(context.Context, string, audiodec.Options) ([]T, audiodec.Decoder, error)) ([]T, error) {
	var pcm []T
	err := withLocalFile(in, func(path string) (err error) {
		pcm, _, err = dec(ctx, path, opt)
		return err
	})
	if err != nil {
		return nil, mediaError(err)
	}
	return pcm, nil
}

// tooLong words audiodec's *TooLongError in the sample's bytes, with the
// flags that let the file through; other errors stay as they are.
func tooLong(err error, bytesPer int, maxBytes int64) error {
	var tl *audiodec.TooLongError
	if !errors.As(err, &tl) {
		return err
	}
	more := ""
	if tl.Partial {
		more = "more than "
	}
	kind := map[int]string{2: "int16", 4: "float32"}[bytesPer]
	return &reworded{err: err, msg: fmt.Sprintf(
		"audio decodes to %s%s (%s%.1f s at %d Hz × %d channels of %s, from the file's %d Hz), over --max-sample-bytes %s: raise --max-sample-bytes, or cut each file to a length with --duration",
		more, ByteSize(tl.Samples*int64(bytesPer)), more, float64(tl.Samples)/float64(tl.Channels)/float64(tl.Rate),
		tl.Rate, tl.Channels, kind, tl.FileRate, ByteSize(maxBytes))}
}

// pcmShape is the shape of interleaved pcm: (T,) for mono, else (T, C).
func pcmShape(samples, channels int) []int {
	if channels == 1 {
		return []int{samples}
	}
	return []int{samples / channels, channels}
}

// f32Tensor stores pcm as little-endian float32 in pcm's own memory (on a
// little-endian CPU, where the bytes already are): a long file's samples
// are not held twice.
func f32Tensor(pcm []float32, channels int) formats.Tensor {
	b := pcmBytes(pcm)
	if !littleEndian {
		for i, v := range pcm {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
	}
	return formats.Tensor{DType: formats.Float32, Shape: pcmShape(len(pcm), channels), Data: b}
}

// s16Tensor converts samples to little-endian int16 (pcm.S16) in place,
// into the first half of their memory: sample i's two bytes land at 2i,
// below the samples not yet read.
func s16Tensor(samples []float32, channels int) formats.Tensor {
	b := pcmBytes(samples)
	for i, v := range samples {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(pcm.S16(v)))
	}
	n := 2 * len(samples)
	return formats.Tensor{DType: formats.Int16, Shape: pcmShape(len(samples), channels), Data: b[:n:n]}
}

// int16Tensor stores pcm as little-endian int16 in pcm's own memory (on a
// little-endian CPU, where the bytes already are).
func int16Tensor(pcm []int16, channels int) formats.Tensor {
	var b []byte
	if len(pcm) > 0 {
		b = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(pcm))), 2*len(pcm))
	}
	if !littleEndian {
		for i, v := range pcm {
			binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
		}
	}
	return formats.Tensor{DType: formats.Int16, Shape: pcmShape(len(pcm), channels), Data: b}
}

// pcmBytes is pcm's memory as bytes.
func pcmBytes(pcm []float32) []byte {
	if len(pcm) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(pcm))), 4*len(pcm))
}

// littleEndian reports the CPU's byte order.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()
