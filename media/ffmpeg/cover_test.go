package ffmpeg

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// coverArgs make a 1 s sine with a 32x32 PNG cover picture, the
// attached_pic stream music .m4a files carry, and with extra, more
// inputs and maps before the output name.
func coverArgs(extra ...string) []string {
	args := []string{"-f", "lavfi", "-i", "sine=f=440:d=1", "-f", "lavfi", "-i", "color=red:s=32x32:d=1"}
	args = append(args, extra...)
	return append(args, "-map", "0:a", "-map", "1:v", "-frames:v:0", "1", "-c:a", "aac", "-c:v:0", "png", "-disposition:v:0", "attached_pic")
}

// TestCoverPicture checks that a cover picture is no video: Frames finds
// no video stream in an audio file that has one, the real video in a
// file that has both, and Probe marks it.
func TestCoverPicture(t *testing.T) {
	audioOnly := generate(t, "song.m4a", coverArgs()...)
	// The cover first, then a 64x48 video: its frames, not the cover's.
	both := generate(t, "clip.mp4", append(coverArgs("-f", "lavfi", "-i", "testsrc=s=64x48:r=10:d=1"), "-map", "2:v", "-c:v:1", "libx264")...)

	_, _, err := Frames(context.Background(), audioOnly, FrameOptions{}, func(Frame) error {
		t.Error("a frame from the cover picture")
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "matches no streams") {
		t.Errorf("%s: error %v, want no video stream", filepath.Base(audioOnly), err)
	}
	info, err := Probe(context.Background(), audioOnly)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := info.Video(); ok {
		t.Errorf("Video() = %+v in an audio file with a cover", v)
	}
	if len(info.Streams) != 2 || !info.Streams[1].AttachedPic || info.Streams[1].Type != "video" || info.Streams[0].AttachedPic {
		t.Errorf("streams %+v, want audio and an attached picture", info.Streams)
	}

	w, h, idx, _ := collect(t, both, FrameOptions{})
	if w != 64 || h != 48 || len(idx) != 10 {
		t.Errorf("%s: %d frames of %dx%d, want the video's 10 of 64x48", filepath.Base(both), len(idx), w, h)
	}
	if info, err := Probe(context.Background(), both); err != nil {
		t.Fatal(err)
	} else if v, ok := info.Video(); !ok || v.Width != 64 {
		t.Errorf("Video() = %+v, want the 64x48 stream", v)
	}
}

// TestFramesMaxBytes checks that frames over MaxFrameBytes are refused
// from the first frame's header, and that frames at the bound pass.
func TestFramesMaxBytes(t *testing.T) {
	path := filepath.Join(videoDir, "testsrc.mp4") // 64x48
	for _, opt := range []FrameOptions{
		{MaxFrameBytes: 64*48*3 - 1},
		{MaxFrameBytes: 64*48*3 - 1, Buffer: func(n int) []byte { t.Errorf("Buffer(%d) over the bound", n); return make([]byte, n) }},
	} {
		calls := 0
		_, _, err := Frames(context.Background(), path, opt, func(Frame) error { calls++; return nil })
		var tl *FrameTooLargeError
		if !errors.As(err, &tl) || tl.Bytes() != 9216 || tl.Max != opt.MaxFrameBytes || !strings.Contains(err.Error(), "64x48 are 9216 bytes") || calls != 0 {
			t.Errorf("error %v after %d frames, want a FrameTooLargeError before any", err, calls)
		}
	}
	if _, _, idx, _ := collect(t, path, FrameOptions{MaxFrameBytes: 64 * 48 * 3}); len(idx) != 50 {
		t.Errorf("%d frames at the bound, want 50", len(idx))
	}
}
