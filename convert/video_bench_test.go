package convert

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/prep-dev/prep/augment"
	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/formats/hdf5"
	"github.com/prep-dev/prep/media/ffmpeg"
)

// BenchmarkVideoEndToEnd converts a 10 s 320×240 h264 clip through the
// whole pipeline — the video handler (ffmpeg decode + per-clip
// augmentation) and the HDF5 shard writer — and, in the same iteration,
// decodes the same file with plain `ffmpeg -f rawvideo -pix_fmt rgb24 -`
// alone. It reports both frames/s and their ratio, x-of-ffmpeg.
func BenchmarkVideoEndToEnd(b *testing.B) {
	src := b.TempDir()
	path := filepath.Join(src, "bench.mp4")
	if out, err := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=10",
		"-c:v", "libx264", "-pix_fmt", "yuv420p", path).CombinedOutput(); err != nil {
		b.Fatalf("ffmpeg: %v\n%s", err, out)
	}
	recipe, err := augment.Parse("resize=256,crop=224:random,hflip=0.5")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	l, err := ListSource(ctx, cloudsrc.Dir{Root: src}, func(string) bool { return true })
	if err != nil {
		b.Fatal(err)
	}
	handler := NewVideoHandler(VideoOptions{Clip: 1}, recipe)
	const frameBytes = 320 * 240 * 3
	buf := make([]byte, frameBytes)
	var prep, raw time.Duration
	var frames, rawFrames int64
	b.SetBytes(250 * frameBytes)
	for b.Loop() {
		dst := b.TempDir()
		sink, err := cloudsrc.NewLocalSink(dst)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		m, _, err := Run(ctx, l, Options{
			Sink: sink, Format: hdf5.Format{}, Handler: func(string) Handler { return handler },
			Seed: 1, Copies: 1, ItemsPerShard: 1, Version: "bench",
		})
		if err != nil {
			b.Fatal(err)
		}
		prep += time.Since(start)
		frames += int64(m.Samples)
		os.RemoveAll(dst)

		start = time.Now()
		cmd := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-i", path, "-vf", ffmpeg.ScaleFilter(0)+",format=rgb24",
			"-f", "rawvideo", "-pix_fmt", "rgb24", "-")
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, out, buf)
		if werr := cmd.Wait(); err == nil {
			err = werr
		}
		if err != nil {
			b.Fatal(err)
		}
		raw += time.Since(start)
		rawFrames += n / frameBytes
	}
	fps, rawFPS := float64(frames)/prep.Seconds(), float64(rawFrames)/raw.Seconds()
	b.ReportMetric(fps, "frames/s")
	b.ReportMetric(rawFPS, "ffmpeg-frames/s")
	b.ReportMetric(fps/rawFPS, "x-of-ffmpeg")
}
