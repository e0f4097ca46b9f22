package ffmpeg

import (
	"context"
	"io"
	"os/exec"
	"testing"
	"time"
)

// BenchmarkFramesVsFFmpeg decodes a 10 s 320×240 h264 clip through
// Frames and, as the baseline, through plain
// `ffmpeg -i FILE -f rawvideo -pix_fmt rgb24 -` piped to io.Discard
// through a frame-sized buffer. Every iteration runs both, so the ratio
// x-of-ffmpeg (Frames' frames/s over ffmpeg's) comes from one run on one
// machine state. Both include ffmpeg's start, which dominates short clips.
func BenchmarkFramesVsFFmpeg(b *testing.B) {
	path := generate(b, "bench.mp4", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=10",
		"-c:v", "libx264", "-pix_fmt", "yuv420p")
	const frameBytes = 320 * 240 * 3
	b.SetBytes(250 * frameBytes)
	var prep, raw time.Duration
	var prepFrames, rawFrames int64
	buf := make([]byte, frameBytes)
	for b.Loop() {
		start := time.Now()
		_, _, err := Frames(context.Background(), path, FrameOptions{}, func(Frame) error {
			prepFrames++
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		prep += time.Since(start)

		start = time.Now()
		n, err := ffmpegRawvideo(path, buf)
		if err != nil {
			b.Fatal(err)
		}
		raw += time.Since(start)
		rawFrames += n / frameBytes
	}
	reportVsFFmpeg(b, prepFrames, prep, rawFrames, raw)
}

// ffmpegRawvideo is the baseline of the video benchmarks: plain
// `ffmpeg -i FILE -f rawvideo -pix_fmt rgb24 -` read into buf until EOF.
// It returns the bytes read.
func ffmpegRawvideo(path string, buf []byte) (int64, error) {
	cmd := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-i", path, "-vf", ScaleFilter(0)+",format=rgb24",
		"-f", "rawvideo", "-pix_fmt", "rgb24", "-")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	// The struct hides io.Discard's ReadFrom, which would read the pipe
	// 8 KiB at a time; Frames reads whole frames.
	n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, out, buf)
	if werr := cmd.Wait(); err == nil {
		err = werr
	}
	return n, err
}

// reportVsFFmpeg reports frames/s of the code under test, of ffmpeg
// alone, and their ratio x-of-ffmpeg.
func reportVsFFmpeg(b *testing.B, frames int64, d time.Duration, rawFrames int64, raw time.Duration) {
	fps := float64(frames) / d.Seconds()
	rawFPS := float64(rawFrames) / raw.Seconds()
	b.ReportMetric(fps, "frames/s")
	b.ReportMetric(rawFPS, "ffmpeg-frames/s")
	b.ReportMetric(fps/rawFPS, "x-of-ffmpeg")
}
