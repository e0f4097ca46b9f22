package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prep-dev/prep/formats/manifest"
)

// hashes collects a SHA-256 per shard and dataset from OnData.
type hashes struct {
	mu sync.Mutex
	h  map[[2]string]hash.Hash
	n  map[[2]string]int64
}

func (hs *hashes) onData(shards []Shard) func(int, string, []byte) error {
	hs.h, hs.n = make(map[[2]string]hash.Hash), make(map[[2]string]int64)
	return func(i int, ds string, p []byte) error {
		hs.mu.Lock()
		defer hs.mu.Unlock()
		k := [2]string{filepath.Base(shards[i].Path), ds}
		if hs.h[k] == nil {
			hs.h[k] = sha256.New()
		}
		hs.h[k].Write(p)
		hs.n[k] += int64(len(p))
		return nil
	}
}

func (hs *hashes) sum(file, ds string) string {
	h := hs.h[[2]string{file, ds}]
	if h == nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestReadHDF5(t *testing.T) {
	dir := t.TempDir()
	m := writeHDF5(t, dir, 3, 40, 24, 32)
	shards := findShards(t, dir)
	if len(shards) != 3 || shards[0].Count != 40 || shards[0].Format != HDF5 {
		t.Fatalf("Find: %+v", shards)
	}
	py := make(map[string]map[string]string)
	for _, s := range m.Shards {
		py[s.File] = pySHA(t, filepath.Join(dir, s.File), "data", "labels", "keys")
	}
	for _, tc := range []struct {
		name string
		opt  ReadOptions
	}{
		{"raw", ReadOptions{}},
		{"direct", ReadOptions{Direct: true}},
		{"direct-2-readers", ReadOptions{Direct: true, Readers: 2}},
		{"cold", ReadOptions{Cold: true}},
		{"hdf5", ReadOptions{Via: ViaHDF5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hs hashes
			opt := tc.opt
			opt.Chunk = 3 * align // many chunks per dataset, unaligned dataset ends
			opt.OnData = hs.onData(shards)
			var progress int64
			var mu sync.Mutex
			opt.Progress = func(n int64) { mu.Lock(); progress += n; mu.Unlock() }
			res, err := Read(context.Background(), shards, opt)
			if err != nil {
				t.Fatal(err)
			}
			if res.Samples != 120 || res.Sample.String() != "24×32×3 uint8" || res.Sample.Bytes != 24*32*3 {
				t.Fatalf("samples %d, sample %v (%v bytes)", res.Samples, res.Sample, res.Sample.Bytes)
			}
			var payload, files int64
			for k, s := range m.Shards {
				path := filepath.Join(dir, s.File)
				for _, d := range s.Datasets {
					payload += d.Size
					if got := hs.n[[2]string{s.File, d.Name}]; got != d.Size {
						t.Errorf("%s %s: read %d bytes, dataset holds %d", s.File, d.Name, got, d.Size)
					}
					if got, want := hs.sum(s.File, d.Name), fileSHA(t, path, d.Offset, d.Size); got != want {
						t.Errorf("%s %s: sha256 of what was read differs from the file's bytes", s.File, d.Name)
					}
					if want, ok := py[s.File][d.Name]; ok && hs.sum(s.File, d.Name) != want {
						t.Errorf("%s %s: sha256 of what was read differs from h5py's", s.File, d.Name)
					}
				}
				files += s.Bytes
				sr := res.Shards[k]
				if sr.Raw.Bytes != s.Bytes || sr.Samples != 40 || len(sr.Library) != 0 {
					t.Errorf("shard %d: %+v", k, sr)
				}
			}
			if res.Prep.Bytes != payload || res.Raw.Bytes != files {
				t.Errorf("prep read %d bytes, datasets hold %d; raw read %d, files hold %d", res.Prep.Bytes, payload, res.Raw.Bytes, files)
			}
			if progress != payload+files {
				t.Errorf("progress counted %d bytes, want %d", progress, payload+files)
			}
			if res.Efficiency <= 0 || res.FeedsPerSec <= 0 {
				t.Errorf("efficiency %v, feeds %v", res.Efficiency, res.FeedsPerSec)
			}
		})
	}
}

// TestReadH5py reads files h5py wrote, without a manifest: a chunked
// dataset goes through the library, the ragged layout is recognised.
func TestReadH5py(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ragged.h5")
	python(t, `
import sys, h5py, numpy as np
rng = np.random.default_rng(3)
sizes = [5, 17, 1, 40, 9]
flat = rng.integers(0, 255, sum(sizes) * 3, dtype=np.uint8)
with h5py.File(sys.argv[1], "w") as f:
    f["data"] = flat
    f["offsets"] = np.cumsum([0] + sizes[:-1]).astype(np.int64) * 3
    f["shapes"] = np.array([[s, 3] for s in sizes], dtype=np.int64)
    f["labels"] = np.arange(5, dtype=np.int64)
    f.create_dataset("extra", data=rng.standard_normal((50, 7)).astype(np.float32), chunks=(8, 7))
`, path)
	shards := findShards(t, dir)
	if len(shards) != 1 || shards[0].Count != 5 {
		t.Fatalf("Find: %+v", shards)
	}
	var hs hashes
	res, err := Read(context.Background(), shards, ReadOptions{OnData: hs.onData(shards), Chunk: align})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Shards[0].Library; !slices.Equal(got, []string{"extra"}) {
		t.Errorf("read through the library: %v, want [extra]", got)
	}
	py := pySHA(t, path, "data", "offsets", "shapes", "labels", "extra")
	for name, want := range py {
		if got := hs.sum("ragged.h5", name); got != want {
			t.Errorf("%s: sha256 %s, h5py says %s", name, got, want)
		}
	}
	if res.Sample.Shape != nil || res.Sample.Bytes != 72*3/5.0 {
		t.Errorf("sample %+v, want variable size of %v bytes", res.Sample, 72*3/5.0)
	}
	if got := res.Sample.String(); got != "43 B samples" {
		t.Errorf("sample description %q", got)
	}
}

func TestReadTar(t *testing.T) {
	dir := t.TempDir()
	writeTar(t, dir, 2, 7, 20, 30)
	shards := findShards(t, dir)
	for _, tc := range []struct {
		name string
		opt  ReadOptions
	}{
		{"warm", ReadOptions{}},
		{"warm-decode", ReadOptions{Decode: true}},
		{"warm-decode-2-readers", ReadOptions{Decode: true, Readers: 2}},
		{"direct", ReadOptions{Direct: true, Chunk: align}},
		{"direct-decode", ReadOptions{Direct: true, Chunk: align, Decode: true}},
		{"cold-decode", ReadOptions{Cold: true, Decode: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Read(context.Background(), shards, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if res.Samples != 14 {
				t.Errorf("%d samples, want 14", res.Samples)
			}
			var want int64
			if tc.opt.Decode {
				want = 7 * 20 * 30 * 3
			}
			for i, s := range res.Shards {
				// Every shard is read several times; one pass decodes it once.
				if s.Decoded != want {
					t.Errorf("%s: decoded %d bytes, want %d", s.File, s.Decoded, want)
				}
				if s.Samples != 7 || s.SamplesPerSec <= 0 || s.Prep.Bytes <= 0 || s.Prep.Bytes > shards[i].Bytes {
					t.Errorf("%s: %d samples at %v/s, %d bytes read", s.File, s.Samples, s.SamplesPerSec, s.Prep.Bytes)
				}
			}
			if tc.opt.Decode && res.Sample.Bytes != 20*30*3 {
				t.Errorf("decoded sample size %v, want %d", res.Sample.Bytes, 20*30*3)
			}
			if got := res.Prep.MBps * res.Prep.Seconds * 1e6; res.Prep.Seconds <= 0 || got < float64(res.Prep.Bytes)*0.999 || got > float64(res.Prep.Bytes)*1.001 {
				t.Errorf("total prep pass %+v is not its bytes over its time", res.Prep)
			}
		})
	}
}

func TestReadText(t *testing.T) {
	r := &ReadResult{Via: ViaRaw, Readers: 1, Samples: 160, SamplesPerSec: 141455,
		Shards: []ShardRead{{File: "/x/shard-000000.h5", Samples: 160, SamplesPerSec: 141455,
			Prep: Pass{Bytes: 24084480, MBps: 21298}, Raw: Pass{MBps: 21420}, Efficiency: 0.99}},
		Prep: Pass{Bytes: 24084480, MBps: 21298}, Raw: Pass{MBps: 21420}, Efficiency: 0.99,
		Sample: SampleShape{Shape: []int{224, 224, 3}, DType: "uint8", Bytes: 150528}, FeedsPerSec: 141490}
	var out strings.Builder
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	want := `reads: page cache, via raw, 1 reader(s); raw = plain read() of the whole file into the same buffer
            shard  samples    MB  samples/s  prep MB/s  raw MB/s  efficiency
  shard-000000.h5      160  24.1    141,455      21298     21420        0.99
            total      160  24.1    141,455      21298     21420        0.99
141,455 samples/s at 21298 MB/s: enough for 141,490 samples/s of 224×224×3 uint8
efficiency 0.99 of raw sequential reads
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

func TestFindErrors(t *testing.T) {
	empty := t.TempDir()
	if _, err := Find(empty, shardFormats); err == nil || !strings.Contains(err.Error(), "run prep convert first") {
		t.Errorf("empty dir: %v", err)
	}
	dir := t.TempDir()
	m := writeHDF5(t, dir, 1, 4, 8, 8)
	f, err := os.OpenFile(filepath.Join(dir, m.Shards[0].File), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("x"))
	f.Close()
	if _, err := Find(dir, shardFormats); err == nil || !strings.Contains(err.Error(), "the shard changed since it was written") {
		t.Errorf("grown shard: %v", err)
	}
	m.Shards[0].Bytes++
	m.Shards[0].Datasets[0].Offset = m.Shards[0].Bytes
	if err := manifest.Write(dir, m); err != nil {
		t.Fatal(err)
	}
	if _, err := Find(dir, shardFormats); err == nil || !strings.Contains(err.Error(), "lies outside the") {
		t.Errorf("bad offset: %v", err)
	}
}

func TestFindSkipsEmptyShards(t *testing.T) {
	dir := t.TempDir()
	m := writeHDF5(t, dir, 1, 3, 8, 8)
	m.Shards = append(m.Shards, manifest.Shard{Index: 1, Skipped: []manifest.Skipped{{Key: "bad.jpg", Reason: "truncated"}}})
	if err := manifest.Write(dir, m); err != nil {
		t.Fatal(err)
	}
	shards, err := Find(dir, shardFormats)
	if err != nil || len(shards) != 1 {
		t.Fatalf("Find: %v, %+v", err, shards)
	}
	m.Shards = m.Shards[1:]
	if err := manifest.Write(dir, m); err != nil {
		t.Fatal(err)
	}
	if _, err := Find(dir, shardFormats); err == nil || !strings.Contains(err.Error(), "no shards with samples") {
		t.Fatalf("manifest of empty shards: %v", err)
	}
}
