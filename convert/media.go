package convert

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/prep-dev/prep/media/ffmpeg"
)

// withLocalFile calls fn with a path to in's bytes: in.Path when the input
// is a local file, else a temporary copy of in.Data (ffmpeg needs a file
// it can seek in: an mp4's index is often at its end), removed afterwards.
func withLocalFile(in *Input, fn func(path string) error) error {
	if in.Path != "" {
		if fi, err := os.Stat(in.Path); err == nil && fi.Size() == 0 {
			return errEmpty
		}
		return fn(in.Path)
	}
	if len(in.Data) == 0 {
		return errEmpty
	}
	f, err := os.CreateTemp("", "prep-media-*"+ext(in.Key))
	if err != nil {
		return Fatal(fmt.Errorf("write %s to a temporary file for ffmpeg: %w (set TMPDIR to a writable directory with space)", in.Key, err))
	}
	defer os.Remove(f.Name())
	_, err = f.Write(in.Data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Fatal(fmt.Errorf("write %s to a temporary file for ffmpeg: %w (set TMPDIR to a writable directory with space)", in.Key, err))
	}
	return fn(f.Name())
}

// errEmpty is a media input of 0 bytes, said as images say it (ffmpeg's
// words for it vary by format and name no cause).
var errEmpty = errors.New("empty file (0 bytes)")

// mediaError drops the file's name from an error of ffmpeg: the pipeline
// records a skipped input under its key already, and a temporary copy's
// name would make the reason differ from machine to machine. A missing
// ffmpeg stays fatal (ffmpeg's error says so itself).
func mediaError(err error) error {
	var fe *ffmpeg.Error
	if errors.As(err, &fe) {
		fe.Path = ""
	}
	return err
}

// whyNoFrames explains a failed ffmpeg run on a video: when ffprobe finds
// no video stream in the file, it says so and names the streams there
// are, in place of ffmpeg's "matches no streams"; otherwise err stays.
func whyNoFrames(ctx context.Context, path string, err error) error {
	var fe *ffmpeg.Error
	if !errors.As(err, &fe) {
		return err
	}
	info, perr := ffmpeg.Probe(ctx, path)
	if perr != nil {
		return err
	}
	if _, ok := info.Video(); ok {
		return err
	}
	var types []string
	fix := ""
	for _, s := range info.Streams {
		switch {
		case s.AttachedPic:
			types = append(types, "cover picture")
		case s.Type == "audio":
			fix = "; to convert its audio, give it an audio file's extension (.m4a for MP4 audio)"
			fallthrough
		default:
			types = append(types, s.Type)
		}
	}
	if len(types) == 0 {
		types = []string{"none"}
	}
	return &ffmpeg.Error{Path: fe.Path, Reason: "no video stream (streams: " + strings.Join(types, ", ") + ")" + fix, Err: err}
}

// reworded is err said in words that name its fix (a flag, say), still
// matching err for errors.Is and errors.As.
type reworded struct {
	msg string
	err error
}

func (e *reworded) Error() string { return e.msg }
func (e *reworded) Unwrap() error { return e.err }

// ByteSize writes n bytes for a person: "1.50 GiB", "12.0 MiB".
func ByteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
