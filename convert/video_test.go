package convert

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prep-dev/prep/augment"
	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/media/ffmpeg"
)

// mediaInput reads testdata/<rel> as the pipeline would: with its local
// path, or with only its bytes as a remote object has.
func mediaInput(t *testing.T, rel string, label int64, local bool) *Input {
	t.Helper()
	path := filepath.Join("../testdata", rel)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	in := &Input{Key: rel, Source: "test://" + rel, Label: label, Data: data}
	if local {
		in.Path = path
	}
	return in
}

// ffmpegRun runs the ffmpeg program and returns its stdout.
func ffmpegRun(t *testing.T, args ...string) []byte {
	t.Helper()
	var out, stderr bytes.Buffer
	cmd := exec.Command("ffmpeg", append([]string{"-nostdin", "-v", "error"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ffmpeg %v: %v: %s", args, err, stderr.String())
	}
	return out.Bytes()
}

// allFrames decodes every frame of testdata/<rel> with the ffmpeg program
// on its own, as 64×48 RGB.
func allFrames(t *testing.T, rel string) [][]byte {
	t.Helper()
	return scaledFrames(t, rel, 0, 64, 48)
}

// scaledFrames decodes every frame of testdata/<rel> with the ffmpeg
// program, shrunk to a shorter side of short as Frames does, as w×h RGB.
func scaledFrames(t *testing.T, rel string, short, w, h int) [][]byte {
	t.Helper()
	raw := ffmpegRun(t, "-i", filepath.Join("../testdata", rel), "-vf", ffmpeg.ScaleFilter(short)+",format=rgb24",
		"-f", "rawvideo", "-pix_fmt", "rgb24", "-")
	size := w * h * 3
	var frames [][]byte
	for ; len(raw) >= size; raw = raw[size:] {
		frames = append(frames, raw[:size])
	}
	if len(raw) != 0 {
		t.Fatalf("ffmpeg's frames are not %d×%d", w, h)
	}
	return frames
}

func TestVideoHandler(t *testing.T) {
	tests := []struct {
		file  string
		opt   VideoOptions
		first []int // each sample's first frame
	}{
		{"video/testsrc.mp4", VideoOptions{Every: 5}, []int{0, 5, 10, 15, 20, 25, 30, 35, 40, 45}},
		{"video/testsrc.mkv", VideoOptions{Clip: 4}, []int{0, 4, 8, 12, 16, 20, 24}}, // 30 frames: 2 left over
		{"video/testsrc.avi", VideoOptions{Clip: 3, Every: 2}, []int{0, 6, 12}},      // 10 of 20 kept
		{"video/testsrc.webm", VideoOptions{MaxFrames: 4}, []int{0, 1, 2, 3}},
		{"video/testsrc.mp4", VideoOptions{Clip: 2, MaxFrames: 5}, []int{0, 2}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%+v", tt.file, tt.opt), func(t *testing.T) {
			t.Parallel()
			in := mediaInput(t, tt.file, 3, true)
			samples, err := NewVideoHandler(tt.opt, nil).Samples(context.Background(), in, 0, rand.New(rand.NewPCG(1, 2)))
			if err != nil {
				t.Fatal(err)
			}
			frames := allFrames(t, tt.file)
			step, clip := max(tt.opt.Every, 1), max(tt.opt.Clip, 1)
			var got []int
			for _, s := range samples {
				i := s.Params["frame"].(int)
				got = append(got, i)
				if s.Key != fmt.Sprintf("%s#f%d", tt.file, i) || s.Label != 3 || s.Source != in.Source {
					t.Errorf("sample %q, label %d, source %q", s.Key, s.Label, s.Source)
				}
				shape := []int{48, 64, 3}
				if clip > 1 {
					shape = []int{clip, 48, 64, 3}
				}
				d := s.Fields[0]
				if d.Name != formats.DataField || d.DType != formats.Uint8 || !slices.Equal(d.Shape, shape) {
					t.Fatalf("%s: field %s %s %v, want data uint8 %v", s.Key, d.Name, d.DType, d.Shape, shape)
				}
				var want []byte
				for k := range clip {
					want = append(want, frames[i+k*step]...)
				}
				if !bytes.Equal(d.Data, want) {
					t.Errorf("%s: pixels differ from ffmpeg's frames %d.. (every %d)", s.Key, i, step)
				}
			}
			if !slices.Equal(got, tt.first) {
				t.Errorf("samples start at frames %v, want %v", got, tt.first)
			}
		})
	}
}

// TestVideoHandlerClipAugment checks that the frames of a clip share one
// augmentation, drawn as NewVideoHandler documents, and clips differ.
func TestVideoHandlerClipAugment(t *testing.T) {
	tests := []struct {
		recipe    string
		short     int // ffmpeg's shrink: the recipe's MinSide
		w, h      int // the frames ffmpeg delivers
		shape     []int
		wantCrops int
	}{
		{"crop=40x30:random,hflip=0.5,jitter=0.4", 0, 64, 48, []int{5, 30, 40, 3}, 3},
		// A leading resize is ffmpeg's: 64×48 comes as 32×24, the recipe
		// resizes it to itself and crops.
		{"resize=24,crop=20:random,hflip=0.5", 24, 32, 24, []int{5, 20, 20, 3}, 3},
		// A centred crop is ffmpeg's too (CropFilter): offsets half to
		// even, 6.5 → 6 and 2.5 → 2 here, 7.5 → 8 and 3.5 → 4 below.
		{"resize=24,crop=19,hflip=0.5", 24, 32, 24, []int{5, 19, 19, 3}, 1},
		{"resize=24,crop=17", 24, 32, 24, []int{5, 17, 17, 3}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.recipe, func(t *testing.T) {
			samples, frames := clipAugment(t, tt.recipe, tt.short, tt.w, tt.h, tt.shape, tt.wantCrops)
			if len(samples) != 6 || len(frames) != 30 {
				t.Fatalf("%d clips of %d frames, want 6 of 30", len(samples), len(frames))
			}
		})
	}
}

// clipAugment converts testsrc.mkv in clips of 5 with recipe and checks
// each clip against ffmpeg's frames, shrunk to short (w×h), put through
// the recipe with the clip's seeds, and that the clips drew at least
// wantCrops distinct crops.
func clipAugment(t *testing.T, text string, short, w, h int, shape []int, wantCrops int) ([]formats.Sample, [][]byte) {
	recipe, err := augment.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	in := mediaInput(t, "video/testsrc.mkv", 0, false)
	h5 := NewVideoHandler(VideoOptions{Clip: 5}, recipe)
	samples, err := h5.Samples(context.Background(), in, 0, rand.New(rand.NewPCG(7, 8)))
	if err != nil {
		t.Fatal(err)
	}
	frames := scaledFrames(t, "video/testsrc.mkv", short, w, h)
	rng := rand.New(rand.NewPCG(7, 8))
	crops := map[string]bool{}
	for c, s := range samples {
		s1, s2 := rng.Uint64(), rng.Uint64()
		var want []byte
		for k := range 5 {
			img := image.NewNRGBA(image.Rect(0, 0, w, h))
			for i, j := 0, 0; j < len(frames[c*5+k]); i, j = i+4, j+3 {
				copy(img.Pix[i:i+3], frames[c*5+k][j:j+3])
				img.Pix[i+3] = 255
			}
			out, params := recipe.Apply(img, rand.New(rand.NewPCG(s1, s2)))
			if k == 0 {
				params["frame"] = c * 5
				if fmt.Sprint(params) != fmt.Sprint(s.Params) {
					t.Errorf("%s: params %v, want %v", s.Key, s.Params, params)
				}
				crops[fmt.Sprint(params["crop"])] = true
			}
			want = append(want, RGBTensor(out).Data...)
		}
		if !slices.Equal(s.Fields[0].Shape, shape) || !bytes.Equal(s.Fields[0].Data, want) {
			t.Errorf("%s: shape %v; pixels differ from the recipe applied with the clip's seeds", s.Key, s.Fields[0].Shape)
		}
	}
	if len(crops) < wantCrops {
		t.Errorf("6 clips drew only %d distinct crops, want %d", len(crops), wantCrops)
	}
	again, err := h5.Samples(context.Background(), in, 0, rand.New(rand.NewPCG(7, 8)))
	if err != nil {
		t.Fatal(err)
	}
	for i := range samples {
		if !bytes.Equal(samples[i].Fields[0].Data, again[i].Fields[0].Data) {
			t.Errorf("%s differs between two runs with the same seed", samples[i].Key)
		}
	}
	return samples, frames
}

func TestVideoHandlerAudioOnlyRecipe(t *testing.T) {
	in := mediaInput(t, "video/testsrc.mkv", 0, false)
	frames := allFrames(t, "video/testsrc.mkv")
	// A recipe without image ops leaves the frames as ffmpeg decodes them.
	audioOnly, err := augment.Parse("gain=3")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := NewVideoHandler(VideoOptions{Clip: 5}, audioOnly).Samples(context.Background(), in, 0, rand.New(rand.NewPCG(7, 8)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(plain[1].Fields[0].Data, bytes.Join(frames[5:10], nil)) {
		t.Error("an audio-only recipe changed the frames")
	}
}

// TestVideoHandlerRemote decodes an input that has only bytes, through a
// temporary file that must be gone afterwards.
func TestVideoHandlerRemote(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	h := NewVideoHandler(VideoOptions{Every: 10}, nil)
	var runs [2][]formats.Sample
	for i, local := range []bool{true, false} {
		s, err := h.Samples(context.Background(), mediaInput(t, "video/testsrc.webm", 1, local), 0, rand.New(rand.NewPCG(1, 1)))
		if err != nil {
			t.Fatal(err)
		}
		runs[i] = s
	}
	if len(runs[1]) != 4 || len(runs[0]) != len(runs[1]) {
		t.Fatalf("%d samples from a path, %d from bytes; want 4", len(runs[0]), len(runs[1]))
	}
	for i := range runs[0] {
		if runs[0][i].Key != runs[1][i].Key || !bytes.Equal(runs[0][i].Fields[0].Data, runs[1][i].Fields[0].Data) {
			t.Errorf("sample %d differs between path and bytes input", i)
		}
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestVideoHandlerErrors(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 1))
	for _, local := range []bool{true, false} {
		in := mediaInput(t, "video/corrupt.mp4", 0, local)
		_, err := NewVideoHandler(VideoOptions{}, nil).Samples(ctx, in, 0, rng)
		want := "cut off: the MP4/MOV index (moov atom) is missing; copy or download the file again (ffmpeg: [mov,mp4,m4a,3gp,3g2,mj2] moov atom not found; Invalid data found when processing input)"
		if err == nil || err.Error() != want || IsFatal(err) {
			t.Errorf("local %v: error %v (fatal %v), want %q, not fatal", local, err, IsFatal(err), want)
		}
	}
	in := mediaInput(t, "video/testsrc.mp4", 0, true)
	if _, err := NewVideoHandler(VideoOptions{Clip: 60}, nil).Samples(ctx, in, 0, rng); err == nil || !strings.Contains(err.Error(), "50 frames decoded, fewer than one clip of 60") {
		t.Errorf("clip longer than the video: %v", err)
	}
	if _, err := NewVideoHandler(VideoOptions{Every: -2}, nil).Samples(ctx, in, 0, rng); !IsFatal(err) {
		t.Errorf("negative Every: %v, want a fatal error", err)
	}
	t.Setenv("PATH", t.TempDir())
	_, err := NewVideoHandler(VideoOptions{}, nil).Samples(ctx, in, 0, rng)
	if !IsFatal(err) || !strings.Contains(err.Error(), `install it with "apt-get install ffmpeg"`) {
		t.Errorf("without ffmpeg: %v (fatal %v), want a fatal error saying how to install it", err, IsFatal(err))
	}
	// A μ-law WAV goes through ffmpeg; WAV PCM, MP3 and Opus (cgo:
	// libmpg123, libopusfile) decode in process.
	mulaw := filepath.Join(t.TempDir(), "mulaw.wav")
	hdr := []byte("RIFF\x2c\x01\x00\x00WAVEfmt \x10\x00\x00\x00\x07\x00\x01\x00\x40\x1f\x00\x00\x40\x1f\x00\x00\x01\x00\x08\x00data\x00\x01\x00\x00")
	data := append(hdr, make([]byte, 256)...)
	if err := os.WriteFile(mulaw, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = NewAudioHandler(AudioOptions{}, nil).Samples(ctx, &Input{Key: "mulaw.wav", Source: "test://mulaw.wav", Path: mulaw, Data: data}, 0, rng)
	if !IsFatal(err) || errors.Unwrap(err) == nil && !strings.Contains(err.Error(), "ffmpeg not found") {
		t.Errorf("μ-law WAV without ffmpeg: %v, want a fatal error", err)
	}
	for _, file := range []string{"audio/sine.wav", "audio/sine.mp3", "audio/sine.opus"} {
		if _, err = NewAudioHandler(AudioOptions{}, nil).Samples(ctx, mediaInput(t, file, 0, true), 0, rng); err != nil {
			t.Errorf("%s without ffmpeg: %v", file, err)
		}
	}
}

// TestVideoWithoutVideoStream: a file that holds only audio is skipped
// with a reason that says so, from ffprobe, without the key (the summary
// prints the key beside it).
func TestVideoWithoutVideoStream(t *testing.T) {
	path := filepath.Join(t.TempDir(), "speech.mp4")
	out, err := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "sine=frequency=440:duration=0.2",
		"-c:a", "aac", path).CombinedOutput()
	if err != nil {
		t.Fatalf("ffmpeg: %v\n%s", err, out)
	}
	in := &Input{Key: "speech.mp4", Path: path}
	_, err = NewVideoHandler(VideoOptions{}, nil).Samples(context.Background(), in, 0, rand.New(rand.NewPCG(1, 2)))
	if want := "ffmpeg: no video stream (streams: audio); to convert its audio, give it an audio file's extension (.m4a for MP4 audio)"; err == nil || err.Error() != want || IsFatal(err) {
		t.Errorf("err = %v, want %q, not fatal", err, want)
	}
}

// TestVideoStripRefused: a recipe that would blow a long, thin video's
// frames past the side limit (resize=256 on 16×2000: 256×32000) skips
// the video with the recipe's reason at its first frame, before a frame
// is resized, as checkSize does for images.
func TestVideoStripRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "strip.mkv")
	out, err := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=16x2000:rate=5",
		"-frames:v", "3", "-c:v", "ffv1", path).CombinedOutput()
	if err != nil {
		t.Fatalf("ffmpeg: %v\n%s", err, out)
	}
	r, err := augment.Parse("resize=256")
	if err != nil {
		t.Fatal(err)
	}
	in := &Input{Key: "strip.mkv", Path: path}
	_, err = NewVideoHandler(VideoOptions{}, r).Samples(context.Background(), in, 0, rand.New(rand.NewPCG(1, 2)))
	if want := "resize=256 would make this 16×2000 image 256×32000"; err == nil || !strings.Contains(err.Error(), want) || IsFatal(err) {
		t.Errorf("err = %v, want one with %q, not fatal", err, want)
	}
}

// TestVideoPrescaleGeometry: ffmpeg's shrink gives the size prep's own
// resize computes (the longer side truncated, 99×57 → 41×24, not the
// rounded 42), so a recipe gives a video the geometry it gives an image.
func TestVideoPrescaleGeometry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "odd.mkv")
	ffmpegRun(t, "-f", "lavfi", "-i", "testsrc=size=99x57:rate=5", "-frames:v", "2", "-c:v", "ffv1", path)
	for _, text := range []string{"resize=24", "resize=24,crop=20", "resize=80,crop=70", "resize=40x30", "resize=40x30:fit", "resize=30x40:fit"} {
		r, err := augment.Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		w, h, err := r.OutputSize(99, 57)
		if err != nil {
			t.Fatal(err)
		}
		samples, err := NewVideoHandler(VideoOptions{}, r).Samples(context.Background(), &Input{Key: "odd.mkv", Path: path}, 0, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			t.Fatal(err)
		}
		if got := samples[0].Fields[0].Shape; !slices.Equal(got, []int{h, w, 3}) {
			t.Errorf("%s: frames %v, want %v as on an image", text, got, []int{h, w, 3})
		}
	}
}
