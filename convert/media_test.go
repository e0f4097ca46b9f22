package convert

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/hdf5"
	"github.com/prep-dev/prep/formats/manifest"
	"github.com/prep-dev/prep/formats/tarshard"
	"github.com/prep-dev/prep/formats/wav"
	"github.com/prep-dev/prep/media/audiodec"
)

// convertMedia copies testdata/<dir> into SRC/<class>/ and converts it
// with h; it returns the manifest and the destination.
func convertMedia(t *testing.T, dir, class string, h Handler, format formats.ShardFormat, mod ...func(*Options)) (*manifest.Manifest, string) {
	m, dst, _ := convertMediaSummary(t, dir, class, h, format, mod...)
	return m, dst
}

// convertMediaSummary is convertMedia with the run's Summary; mod changes
// the Options.
func convertMediaSummary(t *testing.T, dir, class string, h Handler, format formats.ShardFormat, mod ...func(*Options)) (*manifest.Manifest, string, *Summary) {
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
	opt := Options{
		Sink: sink, Format: format, Handler: handler, Seed: 1, Copies: 1, Order: OrderSorted,
		ItemsPerShard: 100, Workers: 2, IOWorkers: 2, Version: "test",
	}
	for _, f := range mod {
		f(&opt)
	}
	m, sum, err := Run(ctx, l, opt)
	if err != nil {
		t.Fatal(err)
	}
	return m, dst, sum
}

// TestVideoOverMemoryBudget converts the test videos with memory for
// none, some and all of their frames: samples over the budget wait in a
// scratch file, and the shards come out the same, the damaged videos
// skipped as ever (their frames emitted, then dropped), no scratch file
// left behind.
func TestVideoOverMemoryBudget(t *testing.T) {
	h := func() Handler { return NewVideoHandler(VideoOptions{Every: 3}, nil) }
	want, wantDst, sum := convertMediaSummary(t, "video", "clips", h(), hdf5.Format{})
	if sum.ScratchBytes != 0 {
		t.Fatalf("%d bytes through a scratch file with the default budget", sum.ScratchBytes)
	}
	frame := int64(48 * 64 * 3)
	for _, budget := range []int64{1, 7 * frame, 12 * frame} {
		m, dst, sum := convertMediaSummary(t, "video", "clips", h(), hdf5.Format{},
			func(o *Options) { o.MemoryBudget = budget })
		if sum.ScratchBytes == 0 || sum.ScratchBytes%frame != 0 {
			t.Errorf("budget %d: %d bytes through a scratch file", budget, sum.ScratchBytes)
		}
		if budget == 1 && sum.ScratchBytes < int64(m.Samples)*frame { // and the skipped videos' frames
			t.Errorf("budget 1: %d bytes through a scratch file, want all %d samples'", sum.ScratchBytes, m.Samples)
		}
		if m.Samples != want.Samples || !slices.Equal(m.Skipped, want.Skipped) || m.Shards[0].SHA256 != want.Shards[0].SHA256 {
			t.Errorf("budget %d: %d samples, skipped %v, shard %s; want %d, %v, %s", budget,
				m.Samples, m.Skipped, m.Shards[0].SHA256, want.Samples, want.Skipped, want.Shards[0].SHA256)
		}
		got, exp := dirFiles(t, dst), dirFiles(t, wantDst)
		if len(got) != len(exp) {
			t.Errorf("budget %d: %d files in DST, want %d (a scratch file left?)", budget, len(got), len(exp))
		}
	}
}

// TestVideoToHDF5 converts the test videos to one HDF5 shard of frames:
// the corrupt and cut-off ones are skipped with ffmpeg's reason, the
// others' frames are stored in key order, pixel for pixel as ffmpeg
// decodes them.
func TestVideoToHDF5(t *testing.T) {
	m, dst := convertMedia(t, "video", "clips", NewVideoHandler(VideoOptions{Every: 10}, nil), hdf5.Format{})
	// avi 20 frames, mkv 30, mp4 50, webm 36: every 10th.
	if m.Samples != 2+3+5+4 || len(m.Shards) != 1 {
		t.Fatalf("%d samples in %d shards, want 14 in 1", m.Samples, len(m.Shards))
	}
	// The files cut off midway decode in part, and ffmpeg exits 0: they are
	// skipped, not kept short.
	wantSkipped := map[string]string{"clips/corrupt.mp4": "moov atom not found",
		"clips/truncated.mkv": "video cut off or damaged: 3 frames decoded",
		"clips/truncated.mp4": "video cut off or damaged: 2 frames decoded"}
	if len(m.Skipped) != len(wantSkipped) {
		t.Errorf("skipped %+v, want %d files", m.Skipped, len(wantSkipped))
	}
	for _, s := range m.Skipped {
		if want, ok := wantSkipped[s.Key]; !ok || !strings.Contains(s.Reason, want) {
			t.Errorf("skipped %s: %q, want %q", s.Key, s.Reason, want)
		}
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
	// truncated.mp3's Info header announces twice the samples it holds.
	if len(m.Skipped) != 2 || m.Skipped[0].Key != "tones/truncated.mp3" || !strings.Contains(m.Skipped[0].Reason, "MP3 cut off: 20783 of the 44100 samples") ||
		m.Skipped[1].Key != "tones/truncated.wav" || !strings.Contains(m.Skipped[1].Reason, "header ends before the audio data") {
		t.Errorf("skipped %+v, want tones/truncated.mp3, cut off, and tones/truncated.wav, its header cut short", m.Skipped)
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

// TestAudioToHDF5 converts the test sounds to HDF5: with --duration every
// file has T frames and mono data is (N, T); without it the lengths
// differ and data is ragged. h5py reads the layout, the attributes and
// each sample's frames, which must be ffmpeg's own decode of the file.
func TestAudioToHDF5(t *testing.T) {
	files := []string{"noinfo.mp3", "sine.flac", "sine.mp3", "sine.ogg", "sine.opus", "sine.wav"} // truncated.mp3 and .wav are skipped
	tests := []struct {
		name   string
		opt    AudioOptions
		shape  []any // of data; nil: ragged
		dtype  string
		format string // ffmpeg -f for the reference decode
	}{
		{"fixed mono s16", AudioOptions{Rate: 16000, Channels: 1, Duration: 1.5, SampleFormat: "s16"}, []any{6, 24000}, "int16", "s16le"},
		{"fixed stereo f32", AudioOptions{Rate: 8000, Channels: 2, Duration: 0.5, SampleFormat: "f32"}, []any{6, 4000, 2}, "float32", "f32le"},
		{"ragged mono f32", AudioOptions{Rate: 16000, Channels: 1, SampleFormat: "f32"}, nil, "float32", "f32le"},
		{"ragged stereo s16", AudioOptions{Rate: 22050, Channels: 2, SampleFormat: "s16"}, nil, "int16", "s16le"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, dst := convertMedia(t, "audio", "tones", NewAudioHandler(tt.opt, nil), hdf5.Format{})
			if m.Samples != len(files) || len(m.Shards) != 1 {
				t.Fatalf("%d samples in %d shards, want %d in 1 (skipped %v)", m.Samples, len(m.Shards), len(files), m.Skipped)
			}
			out, err := exec.Command("/usr/bin/python3", "-c", `
import sys, json, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
d = f["data"]
out = {"shape": list(d.shape), "dtype": str(d.dtype), "ragged": "offsets" in f,
       "attrs": [int(f.attrs["sample_rate"]), int(f.attrs["channels"]), f.attrs["sample_format"]],
       "keys": [k.decode() for k in f["keys"][...]], "samples": []}
for i in range(len(out["keys"])):
    if out["ragged"]:
        lo, hi = f["offsets"][i:i+2]
        x = d[lo:hi].reshape(f["shapes"][i])
    else:
        x = d[i]
    out["samples"].append([list(x.shape), x.tobytes().hex()])
print(json.dumps(out))`, filepath.Join(dst, m.Shards[0].File)).Output()
			if err != nil {
				t.Fatalf("h5py: %v", err)
			}
			var got struct {
				Shape   []any
				DType   string
				Ragged  bool
				Attrs   []any
				Keys    []string
				Samples [][2]any
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			if tt.shape != nil && (got.Ragged || !jsonEq(got.Shape, tt.shape)) {
				t.Errorf("data %v (ragged %v), want %v", got.Shape, got.Ragged, tt.shape)
			}
			if tt.shape == nil && !got.Ragged {
				t.Errorf("data %v, want the ragged layout", got.Shape)
			}
			format := map[string]string{"int16": "s16", "float32": "f32"}[tt.dtype]
			if want := []any{tt.opt.Rate, tt.opt.Channels, format}; got.DType != tt.dtype || !jsonEq(got.Attrs, want) {
				t.Errorf("dtype %s attrs %v, want %s %v", got.DType, got.Attrs, tt.dtype, want)
			}
			for i, file := range files {
				// The reference: the decoder's float samples (package
				// audiodec checks them against ffmpeg's), as 16-bit by
				// x×32768 rounded half to even and clipped where s16 is
				// asked for.
				pcm, _, err := audiodec.Decode(context.Background(), filepath.Join("../testdata/audio", file),
					audiodec.Options{Rate: tt.opt.Rate, Channels: tt.opt.Channels, Duration: tt.opt.Duration})
				if err != nil {
					t.Fatal(err)
				}
				ref := make([]byte, 4*len(pcm))
				for j, v := range pcm {
					binary.LittleEndian.PutUint32(ref[4*j:], math.Float32bits(v))
				}
				want := ref
				if tt.dtype == "int16" {
					want = make([]byte, len(ref)/2)
					for j := range len(ref) / 4 {
						v := math.RoundToEven(float64(math.Float32frombits(binary.LittleEndian.Uint32(ref[4*j:]))) * 32768)
						binary.LittleEndian.PutUint16(want[2*j:], uint16(int16(max(-32768, min(32767, v)))))
					}
				}
				frames := len(ref) / (4 * tt.opt.Channels)
				shape := []any{frames}
				if tt.opt.Channels > 1 {
					shape = append(shape, tt.opt.Channels)
				}
				if i >= len(got.Keys) || got.Keys[i] != "tones/"+file {
					t.Fatalf("keys %v, want tones/%s at %d", got.Keys, file, i)
				}
				if s := got.Samples[i]; !jsonEq(s[0], shape) || s[1] != hex.EncodeToString(want) {
					t.Errorf("%s: shape %v, want %v; samples equal the decoder's: %v", file, s[0], shape, s[1] == hex.EncodeToString(want))
				}
			}
		})
	}
}

func jsonEq(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// countingEmitter is an Emitter that records how many samples each Emit
// call emitted, in call order (the probe's call comes first).
type countingEmitter struct {
	Emitter
	mu    sync.Mutex
	calls []int
}

func (c *countingEmitter) Emit(ctx context.Context, in *Input, copy int, rng *rand.Rand, emit func(formats.Sample) error) error {
	n := 0
	err := c.Emitter.Emit(ctx, in, copy, rng, func(s formats.Sample) error {
		n++
		return emit(s)
	})
	c.mu.Lock()
	c.calls = append(c.calls, n)
	c.mu.Unlock()
	return err
}

// TestVideoProbeBounded: sizing shards from a video, the probe stops
// decoding once the frames fill a shard (the rest cannot change the
// answer: one video a shard) and keeps none of them past the memory
// budget; the shards are those of a run told the items per shard.
func TestVideoProbeBounded(t *testing.T) {
	frame := int64(48 * 64 * 3)
	for _, tc := range []struct {
		name      string
		shardSize int64
		budget    int64
		probed    int // frames the probe's Emit gave
		perShard  int
	}{
		{"shard of 3 frames", 3 * frame, DefaultMemoryBudget, 3, 1},
		{"budget of 2 frames", 400 * frame, 2 * frame, 10, 40}, // the whole first video: 10 frames of avi
	} {
		t.Run(tc.name, func(t *testing.T) {
			em := &countingEmitter{Emitter: NewVideoHandler(VideoOptions{Every: 2}, nil).(Emitter)}
			m, _ := convertMedia(t, "video", "clips", em, hdf5.Format{}, func(o *Options) {
				o.ItemsPerShard, o.ShardSize, o.MemoryBudget, o.Workers = 0, tc.shardSize, tc.budget, 1
			})
			// The probe's Emit calls come first; the damaged videos emit
			// nothing (corrupt.mp4 sorts first).
			probed := slices.IndexFunc(em.calls, func(n int) bool { return n > 0 })
			if m.ItemsPerShard != tc.perShard || probed < 0 || em.calls[probed] != tc.probed {
				t.Fatalf("items per shard %d, Emit calls gave %v; want %d, the probe's %d", m.ItemsPerShard, em.calls, tc.perShard, tc.probed)
			}
			// 7 videos, and the probe's 2: what it kept is not handed on.
			if len(em.calls) != 9 {
				t.Errorf("Emit calls gave %v, want 9 calls: the probed video converted again", em.calls)
			}
			told, _ := convertMedia(t, "video", "clips", NewVideoHandler(VideoOptions{Every: 2}, nil), hdf5.Format{}, func(o *Options) {
				o.ItemsPerShard = m.ItemsPerShard
			})
			if len(m.Shards) != len(told.Shards) {
				t.Fatalf("%d shards, told %d", len(m.Shards), len(told.Shards))
			}
			for i := range m.Shards {
				if m.Shards[i].SHA256 != told.Shards[i].SHA256 {
					t.Errorf("shard %d differs from a run told %d items per shard", i, m.ItemsPerShard)
				}
			}
		})
	}
}

// TestProbeEmit: the probe keeps an Emitter's samples only when all of
// them fit in the budget, and stops once they fill a shard.
func TestProbeEmit(t *testing.T) {
	frame := int64(48 * 64 * 3)
	h := NewVideoHandler(VideoOptions{Every: 2}, nil).(Emitter) // testsrc.avi: 10 frames
	for _, tc := range []struct {
		shardSize, budget int64
		kept              int
		size              int64
	}{
		{100 * frame, 100 * frame, 10, 10 * frame},
		{100 * frame, 9 * frame, 0, 10 * frame}, // counted whole, not kept
		{4 * frame, 100 * frame, 0, 4 * frame},  // stopped: the first frames only
	} {
		in := mediaInput(t, "video/testsrc.avi", 0, true)
		kept, size, err := probeEmit(context.Background(), h, in, NewRand(1, in.Key, 0), tc.shardSize, tc.budget)
		if err != nil || len(kept) != tc.kept || size != tc.size {
			t.Errorf("shard %d, budget %d bytes: kept %d samples of %d bytes (%v); want %d, %d",
				tc.shardSize, tc.budget, len(kept), size, err, tc.kept, tc.size)
		}
	}
}
