package convert

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/manifest"
	"github.com/prep-dev/prep/formats/tarshard"
	"github.com/prep-dev/prep/internal/testenv"
)

// makeMedia runs ffmpeg with args, the output name last, in dir.
func makeMedia(t *testing.T, dir string, args ...string) string {
	t.Helper()
	testenv.NeedCommand(t, "ffmpeg", "ffmpeg")
	out := filepath.Join(dir, args[len(args)-1])
	ffmpegRun(t, append(append([]string{"-y"}, args[:len(args)-1]...), out)...)
	return out
}

// convertMediaDir converts the files of src (ImageFolder layout) with h into
// tar shards and returns the manifest and the destination.
func convertMediaDir(t *testing.T, src string, h Handler) (*manifest.Manifest, string) {
	t.Helper()
	dst := t.TempDir()
	sink, err := cloudsrc.NewLocalSink(dst)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := ListSource(ctx, cloudsrc.Dir{Root: src}, func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := Run(ctx, l, Options{
		Sink: sink, Format: tarshard.WAV(), Handler: func(string) Handler { return h }, Seed: 1, Copies: 1,
		Order: OrderSorted, ItemsPerShard: 100, Workers: 2, IOWorkers: 2, Version: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dst, ".prep-lock*")); len(left) != 0 {
		t.Errorf("lock files left behind: %v", left)
	}
	return m, dst
}

// TestAudioMaxSampleBytes converts, beside a 1 s sine, files whose
// samples would pass --max-sample-bytes: FLAC and WAV at 1 Hz, a few KB
// each that resample to gigabytes at 16 kHz (the FLAC ran prep out of
// memory). They are skipped with a reason that names the limit and the
// fix, the run ends as usual, and the sine is converted.
func TestAudioMaxSampleBytes(t *testing.T) {
	src := t.TempDir()
	dir := filepath.Join(src, "a")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	raw := filepath.Join(t.TempDir(), "silence.raw")
	if err := os.WriteFile(raw, make([]byte, 2*100_000), 0o644); err != nil {
		t.Fatal(err)
	}
	in1Hz := []string{"-f", "s16le", "-ar", "1", "-ac", "1", "-i", raw}
	makeMedia(t, dir, append(in1Hz, "-c:a", "flac", "slow.flac")...)
	makeMedia(t, dir, append(in1Hz, "-c:a", "pcm_s16le", "slow.wav")...)
	// Ogg Vorbis gives no length: found while decoding.
	makeMedia(t, dir, "-f", "lavfi", "-i", "anullsrc=r=8000:cl=mono", "-t", "200", "-c:a", "libvorbis", "long.ogg")
	sine, err := os.ReadFile("../testdata/audio/sine.flac")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sine.flac"), sine, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		format string
		max    int64
		size   string // the 1 Hz files' samples
	}{
		{"f32", 1 << 20, "5.96 GiB"},
		{"s16", 1 << 20, "2.98 GiB"},
		{"s16", 32000, "2.98 GiB"}, // the sine's 16000 samples just fit
	} {
		m, _ := convertMediaDir(t, src, NewAudioHandler(AudioOptions{SampleFormat: tt.format, MaxSampleBytes: tt.max}, nil))
		var keys []string
		for _, s := range m.Skipped {
			keys = append(keys, s.Key)
			t.Logf("%s: %s", s.Key, s.Reason)
			for _, want := range []string{"over --max-sample-bytes " + ByteSize(tt.max), "raise --max-sample-bytes", "--duration", "from the file's"} {
				if !strings.Contains(s.Reason, want) {
					t.Errorf("%s %s: reason %q lacks %q", tt.format, s.Key, s.Reason, want)
				}
			}
			if s.Key != "a/long.ogg" && !strings.Contains(s.Reason, "decodes to "+tt.size) {
				t.Errorf("%s %s: reason %q, want it to say %s", tt.format, s.Key, s.Reason, tt.size)
			}
		}
		if want := []string{"a/long.ogg", "a/slow.flac", "a/slow.wav"}; !slices.Equal(keys, want) || m.Samples != 1 {
			t.Errorf("%s: skipped %v and %d samples, want %v skipped and the sine", tt.format, keys, m.Samples, want)
		}
	}
}

// TestAudioCoverPicture: music in an MP4 container with a cover picture
// is audio: the audio handler makes its sample, the video handler skips
// it saying it holds no video, where it used to make a one-frame video
// of the cover.
func TestAudioCoverPicture(t *testing.T) {
	dir := t.TempDir()
	args := []string{"-f", "lavfi", "-i", "sine=f=440:d=1:r=16000", "-f", "lavfi", "-i", "color=red:s=32x32:d=1",
		"-map", "0:a", "-map", "1:v", "-frames:v", "1", "-c:a", "aac", "-c:v", "png", "-disposition:v:0", "attached_pic"}
	for _, name := range []string{"song.m4a", "song.mp4"} {
		path := makeMedia(t, dir, append(args, name)...)
		in := &Input{Key: name, Path: path}
		s, err := NewAudioHandler(AudioOptions{}, nil).Samples(context.Background(), in, 0, rand.New(rand.NewPCG(1, 2)))
		if err != nil || len(s) != 1 || s[0].Fields[0].Tensor.DType != formats.Float32 || s[0].Rate != 16000 {
			t.Fatalf("%s as audio: %v, %v", name, s, err)
		}
		// AAC pads the start: about a second, give or take a frame.
		if n := s[0].Fields[0].Tensor.Shape[0]; n < 15000 || n > 17100 {
			t.Errorf("%s as audio: %d samples, want about 16000", name, n)
		}
		_, err = NewVideoHandler(VideoOptions{}, nil).Samples(context.Background(), in, 0, rand.New(rand.NewPCG(1, 2)))
		want := "no video stream (streams: audio, cover picture); to convert its audio, give it an audio file's extension (.m4a for MP4 audio)"
		if err == nil || !strings.Contains(err.Error(), want) || IsFatal(err) {
			t.Errorf("%s as video: error %v, want one with %q, not fatal", name, err, want)
		}
	}
}

// TestVideoMaxSampleBytes: a video whose samples, a frame or a clip of
// frames, would pass --max-sample-bytes is refused at its first frame
// with the limit and the fix; at the limit it converts.
func TestVideoMaxSampleBytes(t *testing.T) {
	const frame = 64 * 48 * 3 // testsrc.mp4: 50 frames
	tests := []struct {
		opt     VideoOptions
		samples int
		err     string
	}{
		{VideoOptions{MaxSampleBytes: frame}, 50, ""},
		{VideoOptions{MaxSampleBytes: frame - 1}, 0, "video frames of 64x48 are 9.0 KiB as RGB, over --max-sample-bytes 9.0 KiB: raise --max-sample-bytes, or shrink them with a recipe that starts with resize="},
		{VideoOptions{Clip: 5, MaxSampleBytes: 5 * frame}, 10, ""},
		{VideoOptions{Clip: 5, MaxSampleBytes: 5*frame - 1}, 0, "a sample of 5 frames of [48 64 3] is 45.0 KiB, over --max-sample-bytes 45.0 KiB: raise --max-sample-bytes, or make it smaller with --clip or a recipe that starts with resize="},
	}
	for _, tt := range tests {
		in := mediaInput(t, "video/testsrc.mp4", 0, true)
		s, err := NewVideoHandler(tt.opt, nil).Samples(context.Background(), in, 0, rand.New(rand.NewPCG(1, 2)))
		if tt.err == "" {
			if err != nil || len(s) != tt.samples {
				t.Errorf("%+v: %d samples, %v; want %d", tt.opt, len(s), err, tt.samples)
			}
			continue
		}
		if err == nil || err.Error() != tt.err || IsFatal(err) {
			t.Errorf("%+v: error %v, want %q, not fatal", tt.opt, err, tt.err)
		}
	}
}
