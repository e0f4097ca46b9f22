package convert

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prep-dev/prep/augment"
	"github.com/prep-dev/prep/formats"
)

func audioSample(t *testing.T, rel string, opt AudioOptions, aug AudioAugmenter) formats.Sample {
	t.Helper()
	s, err := NewAudioHandler(opt, aug).Samples(context.Background(), mediaInput(t, rel, 2, true), 0, rand.New(rand.NewPCG(3, 4)))
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 1 {
		t.Fatalf("%d samples, want 1", len(s))
	}
	return s[0]
}

// TestAudioHandlerExact compares the samples with ffmpeg's own output
// for the same file, where no resampling or mixing happens: 16-bit
// sources must come back bit-exact as s16.
func TestAudioHandlerExact(t *testing.T) {
	tests := []struct {
		file         string
		opt          AudioOptions
		dtype        formats.DType
		shape        []int
		ffmpegFormat string
	}{
		{"audio/sine.flac", AudioOptions{}, formats.Float32, []int{16000}, "f32le"},
		{"audio/sine.flac", AudioOptions{SampleFormat: "s16"}, formats.Int16, []int{16000}, "s16le"},
		{"audio/sine.wav", AudioOptions{Rate: 22050, Channels: 2, SampleFormat: "s16"}, formats.Int16, []int{22050, 2}, "s16le"},
		{"audio/sine.wav", AudioOptions{Rate: 22050, Channels: 2, Duration: 0.5, SampleFormat: "f32"}, formats.Float32, []int{11025, 2}, "f32le"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%+v", tt.file, tt.opt), func(t *testing.T) {
			t.Parallel()
			s := audioSample(t, tt.file, tt.opt, nil)
			d := s.Fields[0]
			if s.Key != tt.file || s.Label != 2 || s.Rate != max(tt.opt.Rate, 16000) || d.DType != tt.dtype || !slices.Equal(d.Shape, tt.shape) {
				t.Fatalf("sample %s label %d rate %d: %s %v; want %s %v", s.Key, s.Label, s.Rate, d.DType, d.Shape, tt.dtype, tt.shape)
			}
			want := ffmpegRun(t, "-i", filepath.Join("../testdata", tt.file), "-f", tt.ffmpegFormat, "-")
			want = want[:min(len(want), len(d.Data))]
			if !bytes.Equal(d.Data, want) {
				t.Errorf("samples differ from ffmpeg -f %s", tt.ffmpegFormat)
			}
		})
	}
}

func TestAudioHandlerFormats(t *testing.T) {
	for _, file := range []string{"sine.wav", "sine.flac", "sine.mp3", "sine.ogg", "sine.opus"} {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			s := audioSample(t, "audio/"+file, AudioOptions{Rate: 8000, Channels: 2, Duration: 1.5, SampleFormat: "s16"}, nil)
			d := s.Fields[0]
			if s.Rate != 8000 || d.DType != formats.Int16 || !slices.Equal(d.Shape, []int{12000, 2}) {
				t.Fatalf("rate %d, %s %v; want 8000 int16 [12000 2]", s.Rate, d.DType, d.Shape)
			}
			pcm := make([]int16, len(d.Data)/2)
			binary.Read(bytes.NewReader(d.Data), binary.LittleEndian, pcm)
			crossings := 0
			for i := 2 * 800; i < 2*7200; i += 2 { // left channel, 0.1 s to 0.9 s
				if (pcm[i] < 0) != (pcm[i+2] < 0) {
					crossings++
				}
			}
			if hz := float64(crossings) / 2 / 0.8; math.Abs(hz-440) > 5 {
				t.Errorf("%.1f Hz, want 440", hz)
			}
			if slices.ContainsFunc(pcm[2*8800:], func(v int16) bool { return v != 0 }) {
				t.Error("the padding after 1 s is not silence")
			}
		})
	}
}

func TestAudioHandlerAugment(t *testing.T) {
	plain := audioSample(t, "audio/sine.flac", AudioOptions{}, nil)
	recipe, err := augment.Parse("gain=4-8")
	if err != nil {
		t.Fatal(err)
	}
	loud := audioSample(t, "audio/sine.flac", AudioOptions{}, recipe)
	db, ok := loud.Params["gain"].(float64)
	if !ok || db < 4 || db > 8 {
		t.Fatalf("params %v, want a gain of 4 to 8 dB", loud.Params)
	}
	g := math.Pow(10, db/20)
	for i := 0; i < len(plain.Fields[0].Data); i += 4 {
		a := math.Float32frombits(binary.LittleEndian.Uint32(plain.Fields[0].Data[i:]))
		b := math.Float32frombits(binary.LittleEndian.Uint32(loud.Fields[0].Data[i:]))
		if math.Abs(float64(b)-g*float64(a)) > 1e-6 {
			t.Fatalf("sample %d: %v after %+.2f dB, want %v", i/4, b, db, g*float64(a))
		}
	}
	// +24 dB takes the 1/8 sine past full scale: s16 clips, never wraps.
	recipe, err = augment.Parse("gain=24")
	if err != nil {
		t.Fatal(err)
	}
	clipped := audioSample(t, "audio/sine.flac", AudioOptions{SampleFormat: "s16"}, recipe)
	pcm := make([]int16, len(clipped.Fields[0].Data)/2)
	binary.Read(bytes.NewReader(clipped.Fields[0].Data), binary.LittleEndian, pcm)
	if slices.Max(pcm) != math.MaxInt16 || slices.Min(pcm) != math.MinInt16 {
		t.Errorf("clipped range %d..%d, want %d..%d", slices.Min(pcm), slices.Max(pcm), math.MinInt16, math.MaxInt16)
	}
}

func TestAudioHandlerErrors(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 1))
	in := mediaInput(t, "audio/truncated.wav", 0, false)
	_, err := NewAudioHandler(AudioOptions{}, nil).Samples(ctx, in, 0, rng)
	want := "damaged WAV: its header ends before the audio data; re-encode or remove the file"
	if err == nil || err.Error() != want || IsFatal(err) {
		t.Errorf("error %v, want %q, not fatal", err, want)
	}
	// ffmpeg's words for an empty file vary by format: prep says it.
	empty := filepath.Join(t.TempDir(), "empty.mp3")
	os.WriteFile(empty, nil, 0o644)
	for _, in := range []*Input{{Key: "empty.mp3", Path: empty}, {Key: "empty.mp3", Data: []byte{}}} {
		_, err = NewAudioHandler(AudioOptions{}, nil).Samples(ctx, in, 0, rng)
		if err == nil || err.Error() != "empty file (0 bytes)" || IsFatal(err) {
			t.Errorf("path %q: error %v, want \"empty file (0 bytes)\", not fatal", in.Path, err)
		}
	}
	_, err = NewAudioHandler(AudioOptions{SampleFormat: "u8"}, nil).Samples(ctx, in, 0, rng)
	if !IsFatal(err) || !strings.Contains(err.Error(), "use s16 or f32") {
		t.Errorf("sample format u8: %v, want a fatal error", err)
	}
}

func TestS16Tensor(t *testing.T) {
	pcm := []float32{0, 0.5, -0.5, 1, -1, 2, -2, 1.5 / 32768, 2.5 / 32768, -1.5 / 32768, float32(math.NaN())}
	want := []int16{0, 16384, -16384, 32767, -32768, 32767, -32768, 2, 2, -2, 0}
	got := make([]int16, len(pcm))
	tt := s16Tensor(pcm, 1)
	binary.Read(bytes.NewReader(tt.Data), binary.LittleEndian, got)
	if !slices.Equal(got, want) || !slices.Equal(tt.Shape, []int{len(pcm)}) {
		t.Errorf("s16 %v %v, want %v", tt.Shape, got, want)
	}
}
