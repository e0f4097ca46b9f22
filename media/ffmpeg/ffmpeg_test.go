package ffmpeg

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const (
	videoDir = "../../testdata/video"
	audioDir = "../../testdata/audio"
)

// ffmpegOut runs ffmpeg with args and returns its stdout.
func ffmpegOut(t testing.TB, args ...string) []byte {
	t.Helper()
	var out, stderr bytes.Buffer
	cmd := exec.Command("ffmpeg", append([]string{"-nostdin", "-v", "error"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ffmpeg %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out.Bytes()
}

// generate writes a file made by ffmpeg from args (ending in the output
// name) into a temporary directory and returns its path.
func generate(t testing.TB, name string, args ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	ffmpegOut(t, append(append([]string{"-y"}, args...), path)...)
	return path
}

func TestProbe(t *testing.T) {
	tests := []struct {
		file          string
		typ, codec    string
		w, h          int
		fps           float64
		frames        int
		rate, chans   int
		durMin, durMx float64
	}{
		{file: "video/testsrc.mp4", typ: "video", codec: "h264", w: 64, h: 48, fps: 25, frames: 50, durMin: 2, durMx: 2},
		{file: "video/testsrc.mkv", typ: "video", codec: "mpeg4", w: 64, h: 48, fps: 30, frames: 30, durMin: 1, durMx: 1.05},
		{file: "video/testsrc.webm", typ: "video", codec: "vp8", w: 64, h: 48, fps: 24, frames: 36, durMin: 1.5, durMx: 1.55},
		{file: "video/testsrc.avi", typ: "video", codec: "mpeg4", w: 64, h: 48, fps: 10, frames: 20, durMin: 2, durMx: 2},
		{file: "audio/sine.wav", typ: "audio", codec: "pcm_s16le", rate: 22050, chans: 2, durMin: 1, durMx: 1},
		{file: "audio/sine.flac", typ: "audio", codec: "flac", rate: 16000, chans: 1, durMin: 1, durMx: 1},
		{file: "audio/sine.mp3", typ: "audio", codec: "mp3", rate: 44100, chans: 1, durMin: 1, durMx: 1.1},
		{file: "audio/sine.ogg", typ: "audio", codec: "vorbis", rate: 32000, chans: 2, durMin: 1, durMx: 1.1},
		{file: "audio/sine.opus", typ: "audio", codec: "opus", rate: 48000, chans: 1, durMin: 1, durMx: 1.1},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			info, err := Probe(context.Background(), filepath.Join("../../testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(info.Streams) != 1 {
				t.Fatalf("%d streams, want 1: %+v", len(info.Streams), info)
			}
			s := info.Streams[0]
			if s.Type != tt.typ || s.Codec != tt.codec || s.Width != tt.w || s.Height != tt.h ||
				s.FPS != tt.fps || s.Frames != tt.frames || s.SampleRate != tt.rate || s.Channels != tt.chans {
				t.Errorf("stream %+v, want %+v", s, tt)
			}
			if s.Duration < tt.durMin || s.Duration > tt.durMx {
				t.Errorf("duration %v, want %v..%v", s.Duration, tt.durMin, tt.durMx)
			}
			if _, ok := info.Video(); ok != (tt.typ == "video") {
				t.Errorf("Video() found = %v", ok)
			}
		})
	}
}

// collect runs Frames and keeps the indices and a copy of every frame.
func collect(t *testing.T, path string, opt FrameOptions) (w, h int, idx []int, frames [][]byte) {
	t.Helper()
	w, h, err := Frames(context.Background(), path, opt, func(f Frame) error {
		if len(f.RGB) != f.Width*f.Height*3 {
			t.Errorf("frame %d: %d bytes for %dx%d", f.Index, len(f.RGB), f.Width, f.Height)
		}
		idx = append(idx, f.Index)
		frames = append(frames, bytes.Clone(f.RGB))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return w, h, idx, frames
}

func TestFramesCounts(t *testing.T) {
	seq := func(n, step int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = i * step
		}
		return s
	}
	tests := []struct {
		file string
		opt  FrameOptions
		want []int // frame indices
	}{
		{"testsrc.mp4", FrameOptions{}, seq(50, 1)},         // 2 s at 25 fps
		{"testsrc.mkv", FrameOptions{}, seq(30, 1)},         // 1 s at 30 fps
		{"testsrc.webm", FrameOptions{}, seq(36, 1)},        // 1.5 s at 24 fps
		{"testsrc.avi", FrameOptions{}, seq(20, 1)},         // 2 s at 10 fps
		{"testsrc.mp4", FrameOptions{FPS: 10}, seq(20, 1)},  // 2 s at 10 fps
		{"testsrc.mkv", FrameOptions{FPS: 7.5}, seq(8, 1)},  // ceil(1 s × 7.5)
		{"testsrc.avi", FrameOptions{FPS: 20}, seq(40, 1)},  // frames repeated up to 20 fps
		{"testsrc.mp4", FrameOptions{Every: 5}, seq(10, 5)}, // 0, 5, ..., 45
		{"testsrc.webm", FrameOptions{Every: 7}, seq(6, 7)}, // 0, 7, ..., 35
		{"testsrc.mp4", FrameOptions{Every: 1}, seq(50, 1)}, // 1 keeps all
		{"testsrc.mp4", FrameOptions{FPS: 10, Every: 3}, seq(7, 3)},
		{"testsrc.mp4", FrameOptions{MaxFrames: 7}, seq(7, 1)},
		{"testsrc.mp4", FrameOptions{MaxFrames: 500}, seq(50, 1)},
		{"testsrc.mkv", FrameOptions{Every: 4, MaxFrames: 3}, seq(3, 4)},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%+v", tt.file, tt.opt), func(t *testing.T) {
			t.Parallel()
			w, h, idx, _ := collect(t, filepath.Join(videoDir, tt.file), tt.opt)
			if w != 64 || h != 48 {
				t.Errorf("%dx%d, want 64x48", w, h)
			}
			if !slices.Equal(idx, tt.want) {
				t.Errorf("frames %v, want %v", idx, tt.want)
			}
		})
	}
}

// TestFramesPixels compares frames with what ffmpeg writes for the same
// frame on its own, byte for byte.
func TestFramesPixels(t *testing.T) {
	for _, file := range []string{"testsrc.mp4", "testsrc.mkv", "testsrc.webm", "testsrc.avi"} {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(videoDir, file)
			_, _, idx, frames := collect(t, path, FrameOptions{Every: 3})
			for _, n := range []int{0, 9} {
				want := ffmpegOut(t, "-i", path, "-vf", fmt.Sprintf(`select=eq(n\,%d),%s,format=rgb24`, n, ScaleFilter(0)), "-vsync", "passthrough",
					"-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "rgb24", "-")
				got := frames[slices.Index(idx, n)]
				if sha256.Sum256(got) != sha256.Sum256(want) {
					t.Errorf("frame %d differs from ffmpeg's own rgb24 output", n)
				}
			}
			// testsrc2 moves: consecutive kept frames differ.
			for i := 1; i < len(frames); i++ {
				if bytes.Equal(frames[i], frames[i-1]) {
					t.Errorf("frames %d and %d are identical", idx[i-1], idx[i])
				}
			}
		})
	}
}

// TestFramesBuffer reads frames into the caller's buffers: the same bytes
// as into Frames' own, each frame in the buffer Buffer gave for it.
func TestFramesBuffer(t *testing.T) {
	path := filepath.Join(videoDir, "testsrc.mkv")
	opt := FrameOptions{Every: 2, ShortSide: 32}
	_, _, wantIdx, want := collect(t, path, opt)
	var given, got [][]byte
	opt.Buffer = func(n int) []byte {
		b := make([]byte, n, n+7)
		given = append(given, b)
		return b
	}
	_, _, err := Frames(context.Background(), path, opt, func(f Frame) error {
		if len(given) == 0 || &f.RGB[0] != &given[len(given)-1][0] || len(f.RGB) != f.Width*f.Height*3 {
			t.Fatalf("frame %d is not in the last buffer Buffer gave", f.Index)
		}
		got = append(got, f.RGB) // kept without a copy: the buffer is ours
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(wantIdx) || !slices.EqualFunc(got, want, bytes.Equal) {
		t.Errorf("%d frames through Buffer, %d without; or their bytes differ", len(got), len(wantIdx))
	}
}

// TestFramesExactPixels decodes a lossless RGB video made from known
// frames, so every byte must come back whatever ffmpeg's conversions do.
func TestFramesExactPixels(t *testing.T) {
	const w, h, n = 40, 30, 6
	var raw []byte
	for f := range n {
		for y := range h {
			for x := range w {
				raw = append(raw, byte(x*6+f), byte(y*8), byte(x^y*f))
			}
		}
	}
	src := filepath.Join(t.TempDir(), "frames.rgb")
	if err := os.WriteFile(src, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	path := generate(t, "lossless.mkv", "-f", "rawvideo", "-pix_fmt", "rgb24", "-video_size", "40x30",
		"-framerate", "5", "-i", src, "-c:v", "ffv1", "-pix_fmt", "bgr0")
	gw, gh, idx, frames := collect(t, path, FrameOptions{})
	if gw != w || gh != h || len(idx) != n {
		t.Fatalf("%dx%d, %d frames; want %dx%d, %d frames", gw, gh, len(idx), w, h, n)
	}
	if got := bytes.Join(frames, nil); !bytes.Equal(got, raw) {
		t.Error("decoded frames differ from the RGB they were encoded from")
	}
}

func TestFramesErrors(t *testing.T) {
	tests := []struct {
		path string
		want string
	}{
		{filepath.Join(videoDir, "corrupt.mp4"), "[mov,mp4,m4a,3gp,3g2,mj2] moov atom not found; Invalid data found when processing input"},
		{filepath.Join(videoDir, "missing.mp4"), "No such file or directory"},
		{filepath.Join(audioDir, "sine.flac"), "matches no streams"},
		{"../../testdata/README.md", "Invalid data found when processing input"},
	}
	for _, tt := range tests {
		calls := 0
		_, _, err := Frames(context.Background(), tt.path, FrameOptions{}, func(Frame) error { calls++; return nil })
		var fe *Error
		if !errors.As(err, &fe) {
			t.Fatalf("%s: error %v (%T), want *Error", tt.path, err, err)
		}
		if !strings.Contains(fe.Reason, tt.want) || strings.Contains(fe.Reason, "\n") || strings.Contains(fe.Reason, "0x") {
			t.Errorf("%s: reason %q, want one line with %q and no pointers", tt.path, fe.Reason, tt.want)
		}
		if !strings.Contains(err.Error(), "ffmpeg "+tt.path+": ") {
			t.Errorf("error %q does not name the file", err)
		}
		if calls != 0 {
			t.Errorf("%s: %d frames delivered", tt.path, calls)
		}
	}
	if _, _, err := Frames(context.Background(), "x.mp4", FrameOptions{Every: -1}, nil); err == nil {
		t.Error("negative Every accepted")
	}
}

// TestFramesTruncated: a video cut off with its index intact decodes in
// part and ffmpeg exits 0; Frames must still report it, with the count of
// frames it got, unless MaxFrames stopped the run before the damage.
func TestFramesTruncated(t *testing.T) {
	tests := []struct {
		file   string
		opt    FrameOptions
		frames int    // delivered to the callback
		want   string // in the reason; "" for no error
	}{
		{"truncated.mp4", FrameOptions{}, 17, "video cut off or damaged: 17 frames decoded, then ffmpeg reported: [mov,mp4,m4a,3gp,3g2,mj2] stream 0, offset 0xe9e: partial file"},
		{"truncated.mkv", FrameOptions{}, 23, "video cut off or damaged: 23 frames decoded, then ffmpeg reported: [matroska,webm] File ended prematurely"},
		{"truncated.mkv", FrameOptions{Every: 5}, 5, "video cut off or damaged: 5 frames decoded"},
		{"truncated.mkv", FrameOptions{MaxFrames: 10}, 10, ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%+v", tt.file, tt.opt), func(t *testing.T) {
			calls := 0
			_, _, err := Frames(context.Background(), filepath.Join(videoDir, tt.file), tt.opt, func(Frame) error { calls++; return nil })
			if calls != tt.frames {
				t.Errorf("%d frames delivered, want %d", calls, tt.frames)
			}
			if tt.want == "" {
				if err != nil {
					t.Fatalf("error %v, want none: the run stopped before the damage", err)
				}
				return
			}
			var fe *Error
			if !errors.As(err, &fe) || !errors.Is(err, ErrIncomplete) {
				t.Fatalf("error %v (%T), want an *Error marked ErrIncomplete", err, err)
			}
			if !strings.Contains(fe.Reason, tt.want) || strings.Contains(fe.Reason, "\n") || strings.Contains(fe.Reason, " @ 0x") {
				t.Errorf("reason %q, want one line with %q and no pointers", fe.Reason, tt.want)
			}
		})
	}
}

func TestNoFFmpeg(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	ctx := context.Background()
	path := filepath.Join(videoDir, "testsrc.mp4")
	_, _, errFrames := Frames(ctx, path, FrameOptions{}, func(Frame) error { return nil })
	errAudio := Audio(ctx, path, AudioOptions{}, func(io.Reader) error { return nil })
	_, errProbe := Probe(ctx, path)
	want := `ffmpeg not found on PATH: install it with "apt-get install ffmpeg" (or make deps)`
	for _, err := range []error{errFrames, errAudio} {
		if !errors.Is(err, ErrNoFFmpeg) || err.Error() != want {
			t.Errorf("error %q, want ErrNoFFmpeg: %q", err, want)
		}
	}
	if !errors.Is(errProbe, ErrNoFFmpeg) || !strings.HasPrefix(errProbe.Error(), "ffprobe not found on PATH") {
		t.Errorf("Probe: %v, want ErrNoFFmpeg naming ffprobe", errProbe)
	}
	var f interface{ Fatal() bool }
	if !errors.As(errFrames, &f) || !f.Fatal() {
		t.Error("a missing ffmpeg is not marked fatal")
	}
}

func TestFramesCallbackError(t *testing.T) {
	stop := errors.New("stop here")
	calls := 0
	w, h, err := Frames(context.Background(), filepath.Join(videoDir, "testsrc.mp4"), FrameOptions{},
		func(f Frame) error {
			calls++
			if f.Index == 4 {
				return stop
			}
			return nil
		})
	if err != stop || calls != 5 || w != 64 || h != 48 {
		t.Errorf("err %v after %d calls (%dx%d), want %v after 5", err, calls, w, h, stop)
	}
}

// audioHeader runs Audio and returns the WAVE header fields it streams
// and the number of data bytes.
func audioHeader(t *testing.T, path string, opt AudioOptions) (rate, channels, bits int, data int, err error) {
	t.Helper()
	err = Audio(context.Background(), path, opt, func(r io.Reader) error {
		b, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		i := bytes.Index(b, []byte("data"))
		if len(b) < 44 || string(b[:4]) != "RIFF" || i < 0 {
			return fmt.Errorf("not a WAVE stream: % x", b[:min(len(b), 16)])
		}
		le := binary.LittleEndian
		channels, rate, bits = int(le.Uint16(b[22:])), int(le.Uint32(b[24:])), int(le.Uint16(b[34:]))
		if size := le.Uint32(b[i+4:]); size != math.MaxUint32 {
			return fmt.Errorf("data chunk size %d, want 0xFFFFFFFF (to the end)", size)
		}
		data = len(b) - i - 8
		return nil
	})
	return
}

func TestAudio(t *testing.T) {
	tests := []struct {
		file          string
		opt           AudioOptions
		rate, ch, min int // min: data bytes at least
	}{
		{"sine.ogg", AudioOptions{}, 32000, 2, 4 * 2 * 31000},
		{"sine.opus", AudioOptions{}, 48000, 1, 4 * 47000},
		{"sine.mp3", AudioOptions{Channels: 2}, 44100, 2, 4 * 2 * 44000},
		{"sine.ogg", AudioOptions{Duration: 0.5}, 32000, 2, 4 * 2 * 15000},
	}
	for _, tt := range tests {
		rate, ch, bits, n, err := audioHeader(t, filepath.Join(audioDir, tt.file), tt.opt)
		if err != nil || rate != tt.rate || ch != tt.ch || bits != 32 || n < tt.min || n%(4*ch) != 0 {
			t.Errorf("%s %+v: %d Hz × %d, %d bits, %d bytes, %v; want %d Hz × %d, 32 bits, ≥ %d bytes",
				tt.file, tt.opt, rate, ch, bits, n, err, tt.rate, tt.ch, tt.min)
		}
		if tt.opt.Duration > 0 && n > 4*2*16000 { // ffmpeg's -t is a packet or so short with vorbis
			t.Errorf("%s: %d bytes for %v s, want at most %d", tt.file, n, tt.opt.Duration, 4*2*16000)
		}
	}
}

func TestAudioStopEarly(t *testing.T) {
	// fn may stop reading: ffmpeg is stopped, no error.
	err := Audio(context.Background(), filepath.Join(audioDir, "sine.ogg"), AudioOptions{}, func(r io.Reader) error {
		_, err := io.ReadFull(r, make([]byte, 100))
		return err
	})
	if err != nil {
		t.Errorf("stopped after 100 bytes: %v", err)
	}
}

func TestAudioErrors(t *testing.T) {
	tests := []struct{ path, want string }{
		{filepath.Join(audioDir, "truncated.wav"), "[wav] no 'data' tag found; Invalid data found when processing input"},
		{filepath.Join(videoDir, "testsrc.mp4"), "matches no streams"},
	}
	for _, tt := range tests {
		_, _, _, _, err := audioHeader(t, tt.path, AudioOptions{})
		var fe *Error
		if !errors.As(err, &fe) || !strings.Contains(fe.Reason, tt.want) || strings.Contains(fe.Reason, "\n") {
			t.Errorf("%s: error %v, want one line with %q", tt.path, err, tt.want)
		}
	}
}

func TestReason(t *testing.T) {
	stderr := "[mov,mp4,m4a,3gp,3g2,mj2 @ 0x5571661518c0] moov atom not found\n" +
		"file:/tmp/x 1.mp4: Invalid data found when processing input\n" +
		"file:/tmp/x 1.mp4: Invalid data found when processing input\n\n"
	got := reason([]byte(stderr), "/tmp/x 1.mp4")
	want := "[mov,mp4,m4a,3gp,3g2,mj2] moov atom not found; Invalid data found when processing input"
	if got != want {
		t.Errorf("reason %q, want %q", got, want)
	}
}

func TestMain(m *testing.M) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		// The tests need the real programs; say how to get them.
		os.Stderr.WriteString(ErrNoFFmpeg.Error() + "\n")
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// TestFramesOldFFmpeg runs Frames against an ffmpeg that, like 4.x,
// does not know -fps_mode: a script in front of the real program.
func TestFramesOldFFmpeg(t *testing.T) {
	real, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := "#!/bin/sh\nfor a; do [ \"$a\" = -fps_mode ] && { echo \"Unrecognized option 'fps_mode'.\" >&2; exit 1; }; done\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "ffmpeg"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	t.Cleanup(func() { legacyVsync.Store(false) })
	_, _, idx, _ := collect(t, filepath.Join(videoDir, "testsrc.mp4"), FrameOptions{Every: 5})
	if !slices.Equal(idx, []int{0, 5, 10, 15, 20, 25, 30, 35, 40, 45}) || !legacyVsync.Load() {
		t.Errorf("frames %v (legacy %v), want every 5th of 50 through -vsync", idx, legacyVsync.Load())
	}
}
