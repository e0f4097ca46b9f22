package ffmpeg

import (
	"context"
	"io"
	"os/exec"
	"testing"
)

// BenchmarkFramesVsFFmpeg decodes a 10 s 320×240 h264 clip through
// Frames and, as the baseline, through plain
// `ffmpeg -i FILE -f rawvideo -pix_fmt rgb24 -` piped to io.Discard
// through a frame-sized buffer.
// Both include ffmpeg's start, which dominates short clips.
func BenchmarkFramesVsFFmpeg(b *testing.B) {
	path := generate(b, "bench.mp4", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=10",
		"-c:v", "libx264", "-pix_fmt", "yuv420p")
	const frameBytes = 320 * 240 * 3
	b.Run("Frames", func(b *testing.B) {
		b.SetBytes(250 * frameBytes)
		frames := 0
		for b.Loop() {
			_, _, err := Frames(context.Background(), path, FrameOptions{}, func(Frame) error {
				frames++
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(frames)/b.Elapsed().Seconds(), "frames/s")
	})
	b.Run("ffmpeg", func(b *testing.B) {
		b.SetBytes(250 * frameBytes)
		var bytes int64
		buf := make([]byte, frameBytes)
		for b.Loop() {
			cmd := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", "rgb24", "-")
			out, err := cmd.StdoutPipe()
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			// The struct hides io.Discard's ReadFrom, which would read the
			// pipe 8 KiB at a time; Frames reads whole frames.
			n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, out, buf)
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				b.Fatal(err)
			}
			bytes += n
		}
		b.ReportMetric(float64(bytes/frameBytes)/b.Elapsed().Seconds(), "frames/s")
	})
}
