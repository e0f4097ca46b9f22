package ffmpeg

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// AudioOptions choose what Audio asks ffmpeg for.
type AudioOptions struct {
	// Channels mixes the stream to this many channels with ffmpeg's own
	// downmix matrices; 0 keeps the file's channels.
	Channels int
	// Duration stops decoding after this many seconds; 0 decodes all.
	Duration float64
}

// Audio decodes the first audio stream of the file at path (any format
// ffmpeg reads: mp3, ogg vorbis, opus, aac, the audio of a video, ...) at
// its own sample rate and streams it to fn as a WAVE file of 32-bit float
// samples whose data chunk runs to the end of the stream. fn may stop
// reading early: ffmpeg is then stopped, and that is no error.
//
// When fn fails after ffmpeg failed, ffmpeg's error is returned: a file it
// cannot read gives an empty stream, which fn can only call too short.
// A stream fn read to its end whose decode ffmpeg logged errors about is
// ErrIncomplete, as for video.
func Audio(ctx context.Context, path string, opt AudioOptions, fn func(io.Reader) error) error {
	if opt.Channels < 0 || opt.Duration < 0 {
		return fmt.Errorf("ffmpeg audio: channels %d and duration %v must not be negative", opt.Channels, opt.Duration)
	}
	run, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd, stderr, err := command(run, "ffmpeg", audioArgs(path, opt)...)
	if err != nil {
		return err
	}
	stdout, err := start(cmd, path)
	if err != nil {
		return err
	}
	r := &eofReader{r: bufio.NewReaderSize(stdout, 64<<10)}
	fnErr := fn(r)
	if !r.eof {
		cancel() // fn is done before the end: stop ffmpeg
	}
	waitErr := cmd.Wait()
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("ffmpeg %s: %w", path, ctx.Err())
	case waitErr != nil && r.eof:
		return runError(path, stderr, waitErr)
	case fnErr != nil:
		if len(stderr.b) > 0 && r.n == 0 {
			return runError(path, stderr, fnErr)
		}
		return fnErr
	case r.eof && len(stderr.b) > 0:
		return &Error{Path: path, Err: ErrIncomplete,
			Reason: "audio cut off or damaged: ffmpeg reported: " + reason(stderr.b, path)}
	}
	return nil
}

// audioArgs is ffmpeg's command line for Audio.
func audioArgs(path string, opt AudioOptions) []string {
	args := []string{"-nostdin", "-v", "error", "-i", fileURL(path),
		"-map", "0:a:0", "-vn", "-sn", "-dn"}
	if opt.Duration > 0 {
		args = append(args, "-t", strconv.FormatFloat(opt.Duration, 'g', -1, 64))
	}
	if opt.Channels > 0 {
		args = append(args, "-ac", strconv.Itoa(opt.Channels))
	}
	return append(args, "-c:a", "pcm_f32le", "-f", "wav", "-")
}

// eofReader records whether its reader reached the end, and how many
// bytes came.
type eofReader struct {
	r   io.Reader
	n   int64
	eof bool
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	e.n += int64(n)
	if errors.Is(err, io.EOF) {
		e.eof = true
	}
	return n, err
}
