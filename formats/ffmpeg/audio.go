package ffmpeg

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
)

// AudioOptions choose the PCM that Audio returns.
type AudioOptions struct {
	Rate     int     // samples per second per channel; 0 means 16000
	Channels int     // 0 means 1 (ffmpeg downmixes or upmixes)
	Duration float64 // seconds; 0 keeps the whole stream, else trim or pad with silence to exactly Rate×Duration frames
}

// DefaultRate is the sample rate Audio uses when AudioOptions.Rate is 0.
const DefaultRate = 16000

// Audio decodes the first audio stream of the file at path (any format
// ffmpeg reads: wav, flac, mp3, ogg vorbis, opus, the audio of a video,
// ...), resampled to opt.Rate and mixed to opt.Channels, as interleaved
// float32 samples, nominally in [-1, 1].
func Audio(ctx context.Context, path string, opt AudioOptions) ([]float32, error) {
	opt, err := opt.withDefaults()
	if err != nil {
		return nil, err
	}
	cmd, stderr, err := command(ctx, "ffmpeg", audioArgs(path, opt)...)
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("ffmpeg %s: %w", path, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("ffmpeg %s: %w", path, err)
	}
	pcm, n, readErr := readPCM(bufio.NewReaderSize(stdout, 64<<10), opt)
	waitErr := cmd.Wait()
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("ffmpeg %s: %w", path, ctx.Err())
	case waitErr != nil:
		return nil, runError(path, stderr, waitErr)
	case readErr != nil:
		return nil, &Error{Path: path, Reason: readErr.Error(), Err: readErr}
	case n == 0:
		r := reason(stderr.b, path)
		if r == "" {
			r = "no audio samples decoded"
		}
		return nil, &Error{Path: path, Reason: r}
	}
	return pcm, nil
}

func (o AudioOptions) withDefaults() (AudioOptions, error) {
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.Channels == 0 {
		o.Channels = 1
	}
	if o.Rate < 0 || o.Channels < 0 || o.Duration < 0 || math.IsNaN(o.Duration) || math.IsInf(o.Duration, 0) {
		return o, fmt.Errorf("ffmpeg audio: rate %d, channels %d and duration %v must be positive (or 0 for the default)", o.Rate, o.Channels, o.Duration)
	}
	return o, nil
}

// audioArgs is ffmpeg's command line for Audio.
func audioArgs(path string, opt AudioOptions) []string {
	args := []string{"-nostdin", "-v", "error", "-i", fileURL(path),
		"-map", "0:a:0", "-vn", "-sn", "-dn"}
	if opt.Duration > 0 {
		args = append(args, "-t", strconv.FormatFloat(opt.Duration, 'g', -1, 64))
	}
	return append(args, "-ac", strconv.Itoa(opt.Channels), "-ar", strconv.Itoa(opt.Rate),
		"-f", "f32le", "-")
}

// audioChunk is the samples in one chunk of a stream of unknown length.
const audioChunk = 1 << 20

// readPCM reads ffmpeg's little-endian float32 stream to its end. With a
// duration it fills exactly Rate×Duration frames, leaving zeros (silence)
// where the stream ends early and dropping what it has beyond. n is the
// number of samples ffmpeg delivered.
func readPCM(r io.Reader, opt AudioOptions) (pcm []float32, n int, err error) {
	want := -1
	if opt.Duration > 0 {
		want = int(math.Round(float64(opt.Rate)*opt.Duration)) * opt.Channels
		pcm = make([]float32, want)
	}
	// Without a duration the length is unknown: samples go into chunks,
	// joined once at the end, so the peak is twice the samples where
	// growing one slice by append reached three times.
	var chunks [][]float32
	var buf [32 << 10]byte
	have := 0 // bytes in buf
	for {
		m, err := r.Read(buf[have:])
		have += m
		whole := have / 4 * 4
		for i := 0; i < whole; i += 4 {
			v := math.Float32frombits(binary.LittleEndian.Uint32(buf[i:]))
			switch {
			case want < 0:
				if len(pcm) == cap(pcm) {
					chunks = append(chunks, pcm)
					pcm = make([]float32, 0, audioChunk)
				}
				pcm = append(pcm, v)
			case n < want:
				pcm[n] = v
			}
			n++
		}
		have = copy(buf[:], buf[whole:have])
		if err == io.EOF {
			if have != 0 {
				return nil, n, fmt.Errorf("audio stream ends inside a sample (%d stray bytes)", have)
			}
			if len(chunks) > 0 {
				pcm = slices.Concat(append(chunks, pcm)...)
			}
			return pcm, n, nil
		}
		if err != nil {
			return nil, n, err
		}
	}
}
