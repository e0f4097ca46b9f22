// Package audiodec decodes audio files to float32 PCM at a chosen sample
// rate and channel count. WAV, FLAC, Ogg Vorbis, MP3 (Layer III,
// through libmpg123 in cgo builds) and Ogg Opus (libopusfile, cgo builds)
// decode in process; anything else (aac, a video's audio) through ffmpeg
// at the file's own rate. Mixing and resampling are prep's own (package pcm) whatever the
// decoder, so a dataset's samples do not depend on ffmpeg's version, and
// a file decoded in process costs no process start: for short clips that
// start costs more than the decode (ffmpeg takes about 0.1 s to start
// here, sox 5 ms).
package audiodec

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/prep-dev/prep/formats/wav"
	"github.com/prep-dev/prep/media/ffmpeg"
	"github.com/prep-dev/prep/media/pcm"
)

// Options choose the PCM that Decode returns.
type Options struct {
	Rate     int     // samples per second per channel; 0 means DefaultRate
	Channels int     // 0 means 1
	Duration float64 // seconds; 0 keeps the whole stream, else trim or pad with silence to exactly Rate×Duration frames
	// MaxSamples bounds the samples (frames × Channels) the result may
	// hold; 0: no bound. A file over it is a *TooLongError, found from
	// its header where that tells the length, else as it decodes, and
	// before the memory is taken either way: a 36 KB FLAC that declares
	// 1 Hz is hours of audio once resampled to 16 kHz.
	MaxSamples int64
}

// TooLongError is a file whose decoded samples would pass
// Options.MaxSamples.
type TooLongError struct {
	Samples  int64 // the result's samples, or those reached when Partial
	Max      int64 // Options.MaxSamples
	Rate     int   // the result's rate and channels
	Channels int
	FileRate int // the rate the file declares, resampled to Rate
	// Partial: the file gives no length (or asks for none), and decoding
	// stopped when it passed Max; the whole would be longer still.
	Partial bool
}

func (e *TooLongError) Error() string {
	more := ""
	if e.Partial {
		more = "more than "
	}
	return fmt.Sprintf("decodes to %s%d samples (%s%.1f s at %d Hz × %d channels, from the file's %d Hz), over the limit of %d",
		more, e.Samples, more, float64(e.Samples)/float64(e.Channels)/float64(e.Rate), e.Rate, e.Channels, e.FileRate, e.Max)
}

// DefaultRate is the sample rate Decode uses when Options.Rate is 0.
const DefaultRate = 16000

func (o Options) withDefaults() (Options, error) {
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.Channels == 0 {
		o.Channels = 1
	}
	if o.Rate < 0 || o.Channels < 0 || o.Channels > pcm.MaxChannels || o.Duration < 0 || o.MaxSamples < 0 || math.IsNaN(o.Duration) || math.IsInf(o.Duration, 0) {
		return o, fmt.Errorf("audio: rate %d, channels %d and duration %v must be positive (or 0 for the default), channels at most %d",
			o.Rate, o.Channels, o.Duration, pcm.MaxChannels)
	}
	return o, nil
}

// Decoder names which decoder Decode used: "wav", "flac", "vorbis",
// "mp3", "opus" or "ffmpeg".
type Decoder string

// source is a decoded stream: its format, then its samples in order.
type source interface {
	name() Decoder
	format() (rate, channels int, frames int64) // frames -1: unknown
	// read fills dst with whole interleaved frames; io.EOF after the last.
	read(dst []float32) (int, error)
	// close frees what the decoder holds outside Go's heap (libFLAC's).
	close()
}

// Decode reads the audio of the file at path and returns opt.Channels
// interleaved channels at opt.Rate, nominally in [-1, 1].
func Decode(ctx context.Context, path string, opt Options) ([]float32, Decoder, error) {
	return decode(ctx, path, opt, func(dst, src []float32) []float32 { return append(dst, src...) })
}

// DecodeS16 is Decode to 16-bit samples, each pcm.S16 of Decode's: half
// the memory of a long file's float samples while it is decoded.
func DecodeS16(ctx context.Context, path string, opt Options) ([]int16, Decoder, error) {
	return decode(ctx, path, opt, pcm.AppendS16)
}

// sample is the type of the samples Decode and DecodeS16 return.
type sample interface{ float32 | int16 }

// decode is Decode and DecodeS16: conv appends float samples to a slice
// of T.
func decode[T sample](ctx context.Context, path string, opt Options, conv func([]T, []float32) []T) ([]T, Decoder, error) {
	opt, err := opt.withDefaults()
	if err != nil {
		return nil, "", err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	src, dec, err := inProcess(bufio.NewReaderSize(f, 64<<10))
	if src != nil {
		defer src.close()
	}
	fo := ffmpeg.AudioOptions{}
	if src != nil {
		if _, ch, _ := src.format(); !pcm.Mixable(ch, opt.Channels) {
			// 5.1 to stereo and the like: ffmpeg knows the matrices.
			src, fo.Channels = nil, opt.Channels
		}
	}
	switch {
	case errors.Is(err, wav.ErrUnsupported) || err == nil && src == nil:
		// an encoding this package does not decode (μ-law, ADPCM, ...)
	case err != nil:
		return nil, dec, err
	default:
		var size int64
		if fi, err := f.Stat(); err == nil {
			size = fi.Size()
		}
		out, err := convert(src, opt, conv, size)
		if !errors.Is(err, errUseFFmpeg) {
			return out, dec, err
		}
	}
	f.Close()
	var out []T
	if opt.Duration > 0 {
		// Enough beyond the end for the resampling filter's taps.
		fo.Duration = opt.Duration + 1
	}
	read := func(r io.Reader) error {
		w, err := wav.NewReader(r)
		if err != nil {
			return err
		}
		if !pcm.Mixable(w.Channels, opt.Channels) {
			return errRemix
		}
		out, err = convert(wavSource{w}, opt, conv, 0)
		return err
	}
	err = ffmpeg.Audio(ctx, path, fo, read)
	if errors.Is(err, errRemix) {
		// A layout only ffmpeg mixes, seen in its stream's header.
		fo.Channels = opt.Channels
		err = ffmpeg.Audio(ctx, path, fo, read)
	}
	if err != nil {
		return nil, "ffmpeg", err
	}
	return out, "ffmpeg", nil
}

// inProcess opens r with the decoder its first bytes call for: a nil
// source when none of this package's does.
func inProcess(r *bufio.Reader) (src source, dec Decoder, err error) {
	head, _ := r.Peek(64)
	magic := head[:min(4, len(head))]
	defer func() {
		if p := recover(); p != nil {
			src, err = nil, decoderPanic(dec, p)
		}
	}()
	switch {
	case bytes.Equal(magic, []byte("RIFF")):
		src, err = newWAV(r)
		dec = "wav"
	case bytes.Equal(magic, []byte("fLaC")):
		// The decoder parses the first metadata block whatever its type,
		// and a VORBIS_COMMENT there sizes a slice from its own header:
		// 30 bytes asked for 55 GB (found by FuzzInProcess). FLAC puts
		// STREAMINFO (type 0, 34 bytes) first; anything else is ffmpeg's.
		if len(head) < 8 || head[4]&0x7f != 0 || head[5] != 0 || head[6] != 0 || head[7] != 34 {
			return nil, "", nil
		}
		dec = "flac"
		src, err = newFLAC(r)
	case opusInProcess && isOpus(head):
		if src, err = newOpus(r); src == nil && err == nil {
			return nil, "", nil // more than two channels: ffmpeg's
		}
		dec = "opus"
	case isVorbis(head):
		if whole, _ := r.Peek(r.Size()); !vorbisSetupOK(whole) {
			return nil, "", nil // ffmpeg's libvorbis reads it with care
		}
		dec = "vorbis"
		src, err = newVorbis(r)
	case mp3InProcess:
		info, ok := sniffMP3(r)
		if !ok {
			return nil, "", nil
		}
		dec = "mp3"
		src, err = newMP3(r, info)
	}
	return src, dec, err
}

// decoderPanic is the error for a decoder that panicked: the FLAC and
// Vorbis decoders are others' code reading untrusted bytes, and one file
// must not end the run.
func decoderPanic(dec Decoder, p any) error {
	return fmt.Errorf("damaged file: the %s decoder failed on it (%v); re-encode or remove it", dec, p)
}

// errRemix asks Decode to run ffmpeg again, mixing the channels itself.
var errRemix = errors.New("channels need ffmpeg's downmix")

// errUseFFmpeg is an in-process source's word that the file is ffmpeg's to
// decode after all (a chained Ogg file): Decode starts over with ffmpeg.
var errUseFFmpeg = errors.New("decode with ffmpeg")

// block is how many frames convert reads at a time.
const block = 4096

// maxFrames is the most frames convert believes a header: beyond it,
// OutFrames could overflow (2^40 × a 2^20 Hz rate is 2^60).
const maxFrames = 1 << 40

// maxIdle is how many reads in a row may give no sample before convert
// gives up on a source.
const maxIdle = 1 << 16

// convert reads src, a file of fileSize bytes (0: a stream), to its end
// (or to opt.Duration) and returns it mixed and resampled. A known length
// sizes the result once; otherwise it grows in chunks joined at the end,
// so the peak is twice the samples, not the three times of append's
// doubling.
func convert[T sample](src source, opt Options, conv func([]T, []float32) []T, fileSize int64) (_ []T, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = decoderPanic(src.name(), p)
		}
	}()
	rate, channels, frames := src.format()
	c, err := pcm.NewConverter(rate, channels, opt.Rate, opt.Channels)
	if err != nil {
		return nil, err
	}
	want := -1
	if opt.Duration > 0 {
		want = int(math.Round(float64(opt.Rate)*opt.Duration)) * opt.Channels
	}
	tooLong := func(samples int64, partial bool) error {
		return &TooLongError{Samples: samples, Max: opt.MaxSamples, Rate: opt.Rate, Channels: opt.Channels,
			FileRate: rate, Partial: partial}
	}
	if max := opt.MaxSamples; max > 0 {
		switch {
		case want >= 0:
			if int64(want) > max {
				return nil, tooLong(int64(want), false)
			}
		case frames > maxFrames:
			// Past any sane length: estimated in floating point, which
			// cannot overflow.
			if est := float64(frames) * float64(opt.Rate) / float64(rate) * float64(opt.Channels); est > float64(max) {
				return nil, tooLong(int64(min(est, 1<<62)), false)
			}
		case frames >= 0:
			// The header's length resampled, before a byte of it is
			// decoded; out×channels > max, without the overflow.
			if out := c.OutFrames(frames); out > max/int64(opt.Channels) {
				return nil, tooLong(out*int64(opt.Channels), false)
			}
		}
	}
	acc := collector[T]{limit: want, conv: conv}
	switch {
	case want >= 0:
		acc.cur = make([]T, 0, want)
	case frames >= 0 && frames <= maxFrames && fileSize > 0:
		// The header's length, believed as far as the file's size allows
		// (a 100-byte file claimed 4 GB): past 64 samples out per byte in,
		// far beyond FLAC's ratios on sound, the result grows in chunks.
		acc.cur = make([]T, 0, min(c.OutFrames(frames)*int64(opt.Channels), 64*fileSize))
	}
	// Upsampling multiplies each read: from a file at 1 Hz a block of
	// 4096 frames would come out 65 million frames long at 16 kHz, so a
	// read takes at most the input that makes a block of output.
	blk := block
	if rate < opt.Rate {
		blk = max(1, block*rate/opt.Rate)
	}
	in := make([]float32, blk*channels)
	var tmp []float32
	decoded := false
	idle := 0 // reads in a row that gave nothing
	for want < 0 || acc.len() < want {
		n, err := src.read(in)
		if n > 0 {
			decoded, idle = true, 0
			var werr error
			if tmp, werr = c.Write(tmp[:0], in[:n]); werr != nil {
				return nil, werr
			}
			if opt.MaxSamples > 0 && want < 0 && int64(acc.len()+len(tmp)) > opt.MaxSamples {
				return nil, tooLong(int64(acc.len()+len(tmp)), true)
			}
			acc.add(tmp)
		} else if err == nil {
			if idle++; idle == maxIdle {
				// A damaged Vorbis stream could keep its decoder busy on
				// nothing for good.
				return nil, fmt.Errorf("damaged file: the %s decoder made no progress after %d reads; re-encode or remove it", src.name(), idle)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if !decoded {
		return nil, errors.New("no audio samples decoded")
	}
	tmp = c.Flush(tmp[:0])
	if opt.MaxSamples > 0 && want < 0 && int64(acc.len()+len(tmp)) > opt.MaxSamples {
		return nil, tooLong(int64(acc.len()+len(tmp)), false)
	}
	acc.add(tmp)
	out := acc.join()
	if want >= 0 {
		if len(out) > want {
			out = out[:want:want]
		}
		for len(out) < want { // silence after the end
			out = append(out, 0)
		}
	}
	return out, nil
}

// collector gathers samples, converted by conv, at most limit of them (-1:
// no limit): into cur while it has room, else into chunks of a fixed size.
type collector[T sample] struct {
	chunks [][]T
	cur    []T
	n      int
	limit  int
	conv   func([]T, []float32) []T
}

const chunk = 1 << 20

func (a *collector[T]) len() int { return a.n }

func (a *collector[T]) add(s []float32) {
	if a.limit >= 0 && len(s) > a.limit-a.n {
		s = s[:a.limit-a.n]
	}
	a.n += len(s)
	for len(s) > 0 {
		if len(a.cur) == cap(a.cur) {
			if len(a.cur) > 0 {
				a.chunks = append(a.chunks, a.cur)
			}
			a.cur = make([]T, 0, chunk)
		}
		k := min(len(s), cap(a.cur)-len(a.cur))
		a.cur = a.conv(a.cur, s[:k])
		s = s[k:]
	}
}

func (a *collector[T]) join() []T {
	if len(a.chunks) == 0 {
		return a.cur
	}
	out := make([]T, 0, a.n)
	for _, c := range a.chunks {
		out = append(out, c...)
	}
	return append(out, a.cur...)
}
