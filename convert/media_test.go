package convert

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/hdf5"
	"github.com/prep-dev/prep/formats/manifest"
	"github.com/prep-dev/prep/formats/tarshard"
	"github.com/prep-dev/prep/formats/wav"
)

// convertMedia copies testdata/<dir> into SRC/<class>/ and converts it
// with h; it returns the manifest and the destination.
func convertMedia(t *testing.T, dir, class string, h Handler, format formats.ShardFormat) (*manifest.Manifest, string) {
	t.Helper()
	src, dst := t.TempDir(), t.TempDir()
	entries, err := os.ReadDir(filepath.Join("../testdata", dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(src, class), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("../testdata", dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, class, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sink, err := cloudsrc.NewLocalSink(dst)
	if err != nil {
		t.Fatal(err)
	}
	handler := func(string) Handler { return h }
	ctx := context.Background()
	l, err := ListSource(ctx, cloudsrc.Dir{Root: src}, func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := Run(ctx, l, Options{
		Sink: sink, Format: format, Handler: handler, Seed: 1, Copies: 1,
		ItemsPerShard: 100, Workers: 2, IOWorkers: 2, Version: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	return m, dst
}

// TestVideoToHDF5 converts the test videos to one HDF5 shard of frames:
// the corrupt one is skipped with ffmpeg's reason, the others' frames are
// stored in key order, pixel for pixel as ffmpeg decodes them.
func TestVideoToHDF5(t *testing.T) {
	m, dst := convertMedia(t, "video", "clips", NewVideoHandler(VideoOptions{Every: 10}, nil), hdf5.Format{})
	// avi 20 frames, mkv 30, mp4 50, webm 36: every 10th.
	if m.Samples != 2+3+5+4 || len(m.Shards) != 1 {
		t.Fatalf("%d samples in %d shards, want 14 in 1", m.Samples, len(m.Shards))
	}
	if len(m.Skipped) != 1 || m.Skipped[0].Key != "clips/corrupt.mp4" || !strings.Contains(m.Skipped[0].Reason, "moov atom not found") {
		t.Errorf("skipped %+v, want clips/corrupt.mp4 with ffmpeg's reason", m.Skipped)
	}
	data := make([]byte, 14*48*64*3)
	if err := hdf5.ReadDataset(filepath.Join(dst, m.Shards[0].File), "data", data); err != nil {
		t.Fatal(err)
	}
	var want []byte
	for _, file := range []string{"testsrc.avi", "testsrc.mkv", "testsrc.mp4", "testsrc.webm"} {
		for i, f := range allFrames(t, "video/"+file) {
			if i%10 == 0 {
				want = append(want, f...)
			}
		}
	}
	if !bytes.Equal(data, want) {
		t.Error("the shard's frames differ from ffmpeg's")
	}
}

// TestAudioToWAVShards converts the test sounds to 16-bit WAV members of
// a tar shard and decodes them back.
func TestAudioToWAVShards(t *testing.T) {
	h := NewAudioHandler(AudioOptions{Rate: 16000, Duration: 1, SampleFormat: "s16"}, nil)
	m, dst := convertMedia(t, "audio", "tones", h, tarshard.WAV())
	if len(m.Skipped) != 1 || m.Skipped[0].Key != "tones/truncated.wav" || !strings.Contains(m.Skipped[0].Reason, "no 'data' tag found") {
		t.Errorf("skipped %+v, want tones/truncated.wav with ffmpeg's reason", m.Skipped)
	}
	f, err := os.Open(filepath.Join(dst, m.Shards[0].File))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var keys []string
	err = tarshard.Read(f, func(key string, members map[string][]byte) error {
		keys = append(keys, key)
		tensor, rate, err := wav.DecodeBytes(members["wav"])
		if err != nil {
			return err
		}
		if rate != 16000 || tensor.DType != formats.Int16 || !slices.Equal(tensor.Shape, []int{16000, 1}) {
			t.Errorf("%s: %d Hz %s %v, want 16000 Hz int16 [16000 1]", key, rate, tensor.DType, tensor.Shape)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 6 || m.Samples != 6 {
		t.Errorf("%d samples (%v), manifest says %d; want 6", len(keys), keys, m.Samples)
	}
}
