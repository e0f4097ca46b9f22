package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prep-dev/prep/formats/manifest"
	"github.com/prep-dev/prep/internal/testenv"
)

// ffmpegTo runs ffmpeg with args, the output file last.
func ffmpegTo(t *testing.T, args ...string) {
	t.Helper()
	testenv.NeedCommand(t, "ffmpeg", "ffmpeg")
	cmd := exec.Command("ffmpeg", append([]string{"-nostdin", "-v", "error", "-y"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg %v: %v\n%s", args, err, out)
	}
}

// TestMediaBoundsCLI converts what a tester found: a FLAC of a few KB
// declaring 1 Hz (3 GB of samples at 16 kHz: prep ran out of memory and
// left its lock in DST) is skipped under the default --max-sample-bytes
// with the limit and the fix; music in .m4a with a cover picture is
// audio, and in .mp4 no video.
func TestMediaBoundsCLI(t *testing.T) {
	src := t.TempDir()
	dir := filepath.Join(src, "a")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	raw := filepath.Join(t.TempDir(), "silence.raw")
	if err := os.WriteFile(raw, make([]byte, 2*100_000), 0o644); err != nil {
		t.Fatal(err)
	}
	ffmpegTo(t, "-f", "s16le", "-ar", "1", "-ac", "1", "-i", raw, "-c:a", "flac", filepath.Join(dir, "slow.flac"))
	cover := []string{"-f", "lavfi", "-i", "sine=f=440:d=1:r=16000", "-f", "lavfi", "-i", "color=red:s=32x32:d=1",
		"-map", "0:a", "-map", "1:v", "-frames:v", "1", "-c:a", "aac", "-c:v", "png", "-disposition:v:0", "attached_pic"}
	ffmpegTo(t, append(cover, filepath.Join(dir, "song.m4a"))...)
	ffmpegTo(t, append(cover, filepath.Join(dir, "song.mp4"))...)
	sine, err := os.ReadFile("../../testdata/audio/sine.flac")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sine.flac"), sine, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args    []string
		skipped map[string]string
		samples int
	}{
		{nil, map[string]string{
			"a/slow.flac": "audio decodes to 2.98 GiB (100000.0 s at 16000 Hz × 1 channels of int16, from the file's 1 Hz), over --max-sample-bytes 1.00 GiB: raise --max-sample-bytes, or cut each file to a length with --duration",
			"a/song.mp4":  "ffmpeg: no video stream (streams: audio, cover picture); to convert its audio, give it an audio file's extension (.m4a for MP4 audio)",
		}, 2},
		{[]string{"--sample-format", "f32", "--max-sample-bytes", "100000"}, map[string]string{
			"a/slow.flac": "audio decodes to 5.96 GiB (100000.0 s at 16000 Hz × 1 channels of float32, from the file's 1 Hz), over --max-sample-bytes 97.7 KiB",
			"a/song.mp4":  "ffmpeg: no video stream",
		}, 2},
		// The same at a duration: every sample is 1 s, the 1 Hz file too.
		{[]string{"--duration", "1"}, map[string]string{"a/song.mp4": "ffmpeg: no video stream"}, 3},
	}
	for _, tt := range tests {
		dst := t.TempDir()
		stdout, stderr, code := prepRun(t, append(append([]string{"convert", src, dst, "--format", "wav"}, anySkipped...), tt.args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tt.args, code, stderr)
		}
		m, err := manifest.Read(dst)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, s := range m.Skipped {
			keys = append(keys, s.Key)
			if want, ok := tt.skipped[s.Key]; !ok || !strings.HasPrefix(s.Reason, want) {
				t.Errorf("%v: %s skipped for %q, want %q", tt.args, s.Key, s.Reason, want)
			}
			if !strings.Contains(stdout, s.Key+": "+s.Reason) {
				t.Errorf("%v: the summary lacks %s:\n%s", tt.args, s.Key, stdout)
			}
		}
		if len(keys) != len(tt.skipped) || m.Samples != tt.samples {
			t.Errorf("%v: %d samples, skipped %v; want %d, %d skipped", tt.args, m.Samples, keys, tt.samples, len(tt.skipped))
		}
		if left, _ := filepath.Glob(filepath.Join(dst, ".prep-lock*")); len(left) != 0 {
			t.Errorf("%v: lock files left: %v", tt.args, left)
		}
	}
}
