package convert

import (
	"errors"
	"fmt"
	"os"

	"github.com/prep-dev/prep/formats/ffmpeg"
)

// withLocalFile calls fn with a path to in's bytes: in.Path when the input
// is a local file, else a temporary copy of in.Data (ffmpeg needs a file
// it can seek in: an mp4's index is often at its end), removed afterwards.
func withLocalFile(in *Input, fn func(path string) error) error {
	if in.Path != "" {
		return fn(in.Path)
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

// mediaError names in's key, not a temporary file, in an error from
// ffmpeg, so the reasons recorded for skipped inputs are the same on every
// machine. A missing ffmpeg stays fatal (ffmpeg's error says so itself).
func mediaError(in *Input, err error) error {
	var fe *ffmpeg.Error
	if errors.As(err, &fe) {
		fe.Path = in.Key
	}
	return err
}
