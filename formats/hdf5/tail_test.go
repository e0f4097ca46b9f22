package hdf5

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prep-dev/prep/formats"
)

// tailCases are spillCases and shards whose keys vary: empty keys, the
// longest key last (the width grows after the records spilled), one key
// longer than a block of keys, and negative labels.
func tailCases() map[string]struct {
	expect  int
	samples []*formats.Sample
} {
	cases := spillCases()
	var varied, long []*formats.Sample
	for i := range 40 {
		key := strings.Repeat("k", i%7) + fmt.Sprint(i)
		if i%5 == 0 {
			key = ""
		}
		if i == 39 {
			key = strings.Repeat("z", 100)
		}
		varied = append(varied, imageSample(key, int64(i)-20, 4, 4, byte(i)))
	}
	for i := range 5 {
		long = append(long, imageSample(strings.Repeat(fmt.Sprint(i), 300*i), -1<<62+int64(i), 2, 2, byte(i)))
	}
	cases["varied keys, streamed"] = struct {
		expect  int
		samples []*formats.Sample
	}{len(varied), varied}
	cases["varied keys, gathered"] = struct {
		expect  int
		samples []*formats.Sample
	}{0, varied}
	cases["long keys"] = struct {
		expect  int
		samples []*formats.Sample
	}{len(long), long}
	return cases
}

// tailBytes is what a shard's labels and keys take in memory.
func tailBytes(samples []*formats.Sample) int64 {
	var n int64
	for _, s := range samples {
		n += int64(8 + len(binary.AppendUvarint(nil, uint64(len(s.Key)))) + len(s.Key))
	}
	return n
}

// writeTailBudget writes samples to a shard at p, told to expect expect,
// keeping at most budget column bytes and tailBudget label and key bytes
// in memory. It reports whether the labels' and keys' scratch files
// existed before Close, and fails t when the writer held more labels and
// keys in memory than tailBudget.
func writeTailBudget(t *testing.T, p string, expect int, budget, tailBudget int64, samples []*formats.Sample) (formats.ShardInfo, bool) {
	t.Helper()
	return writeSide(t, p, expect, budget, samples,
		func(w *writer) { w.tailBudget = tailBudget },
		func(w *writer) {
			if held := w.tail.labels.held() + w.tail.keys.held(); held > tailBudget {
				t.Fatalf("tail budget %d: %d bytes of labels and keys held", tailBudget, held)
			}
		},
		func(w *writer) bool {
			ln, kn := w.tailSpillNames()
			_, lerr := os.Stat(ln)
			_, kerr := os.Stat(kn)
			if (lerr == nil) != (kerr == nil) {
				t.Errorf("tail budget %d: labels spilled %v, keys %v", tailBudget, lerr == nil, kerr == nil)
			}
			return lerr == nil
		})
}

// TestTailSpillSameBytes writes each case with its labels and keys in
// memory, and again with budgets that spill them at the first sample,
// part way and at the last, with the columns in memory or spilled too,
// and with blocks of keys smaller than a key, of a few keys and of the
// default size: the shards and their infos must be equal byte for byte,
// and no scratch file may stay behind.
func TestTailSpillSameBytes(t *testing.T) {
	v := sideSpill{
		what: "labels and keys", block: &keyBlock, blocks: []int{1, 64, 1 << 20},
		write: writeTailBudget, budget: tailAfter, total: tailBytes, check: checkTail,
	}
	for name, tc := range tailCases() {
		t.Run(name, func(t *testing.T) { v.sameBytes(t, tc.expect, tc.samples) })
	}
}

// sideSpill is one of the writer's side records that spill past their own
// budget (labels and keys, ragged shapes), as sameBytes tests it.
type sideSpill struct {
	what   string
	block  *int  // the size of the blocks Close fills the datasets in
	blocks []int // sizes to try
	// write writes samples to a shard at p with the given gather and side
	// budgets and reports whether the side records spilled.
	write  func(t *testing.T, p string, expect int, budget, side int64, samples []*formats.Sample) (formats.ShardInfo, bool)
	budget int64                                 // the side records' default budget
	total  func(samples []*formats.Sample) int64 // the side records' bytes
	// check checks a shard's datasets of the side records against samples.
	check func(t *testing.T, shard []byte, info formats.ShardInfo, samples []*formats.Sample)
}

// sameBytes writes samples with the side records in memory, checks that
// shard, then writes them spilled at the first sample, a third of the way
// and the last sample, with every block size and the gather budget's
// columns in memory or spilled: every shard must have the same bytes and
// info, and no scratch file may be left.
func (v sideSpill) sameBytes(t *testing.T, expect int, samples []*formats.Sample) {
	defer func(b int) { *v.block = b }(*v.block)
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref.h5")
	want, spilled := v.write(t, ref, expect, spillAfter, v.budget, samples)
	if spilled {
		t.Fatalf("reference shard: %s spilled", v.what)
	}
	wantBytes, err := os.ReadFile(ref)
	if err != nil {
		t.Fatal(err)
	}
	v.check(t, wantBytes, want, samples)
	total := v.total(samples)
	for _, block := range v.blocks {
		*v.block = block
		for _, budget := range []int64{spillAfter, 0} {
			for _, side := range []int64{0, total / 3, total - 1} {
				p := filepath.Join(dir, fmt.Sprintf("b%d-%d-%d.h5", block, budget, side))
				got, spilled := v.write(t, p, expect, budget, side, samples)
				if !spilled {
					t.Errorf("budget %d of %d bytes: %s did not spill", side, total, v.what)
				}
				if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, wantBytes) {
					t.Errorf("%s: the shard differs from one whose %s stayed in memory (%v)", filepath.Base(p), v.what, err)
				}
				got.File = want.File
				if !jsonEqual(got, want) {
					t.Errorf("%s: info %+v, want %+v", filepath.Base(p), got, want)
				}
			}
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*.spill*"))
	tmps, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
	if len(left)+len(tmps) > 0 {
		t.Errorf("files left: %v %v", left, tmps)
	}
}

// checkTail checks the labels and keys datasets of shard, whose info is
// info, against the samples: little-endian int64s, and each key padded
// with NULs to the longest.
func checkTail(t *testing.T, shard []byte, info formats.ShardInfo, samples []*formats.Sample) {
	t.Helper()
	width := 1
	for _, s := range samples {
		width = max(width, len(s.Key))
	}
	var labels, keys []byte
	for _, s := range samples {
		labels = binary.LittleEndian.AppendUint64(labels, uint64(s.Label))
		keys = append(keys, s.Key...)
		keys = append(keys, make([]byte, width-len(s.Key))...)
	}
	for _, d := range []struct {
		name, dtype string
		want        []byte
	}{{"labels", "int64", labels}, {"keys", fmt.Sprintf("S%d", width), keys}} {
		got, ok := datasetNamed(info.Datasets, d.name)
		if !ok || string(got.DType) != d.dtype || got.Size != int64(len(d.want)) || got.Offset+got.Size > int64(len(shard)) {
			t.Fatalf("dataset %s: %+v, want %s of %d bytes", d.name, got, d.dtype, len(d.want))
		}
		if !bytes.Equal(shard[got.Offset:got.Offset+got.Size], d.want) {
			t.Errorf("dataset %s: the bytes differ from the samples'", d.name)
		}
	}
}

// TestTailKeys reads back the keys and labels of a shard whose records
// spilled, against the samples'.
func TestTailKeys(t *testing.T) {
	samples := tailCases()["varied keys, streamed"].samples
	p := filepath.Join(t.TempDir(), "s.h5")
	if _, spilled := writeTailBudget(t, p, len(samples), spillAfter, 0, samples); !spilled {
		t.Fatal("no scratch files while writing")
	}
	got := h5py(t, p, `out["keys"] = [k.decode() for k in f["keys"][:]]; out["labels"] = f["labels"][:].tolist(); out["dtype"] = f["keys"].dtype.str`)
	var keys []any
	var labels []any
	for _, s := range samples {
		keys = append(keys, s.Key)
		labels = append(labels, float64(s.Label))
	}
	wantJSON(t, got, map[string]any{"keys": keys, "labels": labels, "dtype": "|S100"})
}

// TestTailEmpty: a shard closed before any sample still has its empty
// labels and keys, as before they were filled after the library closed
// the file (an empty dataset has no storage to write to).
func TestTailEmpty(t *testing.T) {
	p := filepath.Join(t.TempDir(), "e.h5")
	w, err := Format{}.Create(p, formats.ShardMeta{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if info.Count != 0 || len(info.Datasets) != 2 {
		t.Fatalf("info %+v, want 0 samples, labels and keys", info)
	}
	got := h5py(t, p, `out["labels"] = list(f["labels"].shape); out["keys"] = list(f["keys"].shape); out["dtype"] = f["keys"].dtype.str`)
	wantJSON(t, got, map[string]any{"labels": []any{0.0}, "keys": []any{0.0}, "dtype": "|S1"})
}

// TestTailSpillAbort: Abort removes the labels' and keys' scratch files
// with the temp file, and Close removes them once the shard is written,
// also when it fails.
func TestTailSpillAbort(t *testing.T) {
	ends := abortOrClose()
	ends["stray label"] = closeAfter(func(w *writer) { w.tail.labels.spill.write([]byte{1}) }, "spilled")
	ends["stray key"] = closeAfter(func(w *writer) { w.tail.keys.spill.write([]byte{0}) }, "more gathered")
	sideSpillEnds(t, tailCases()["varied keys, gathered"].samples,
		func(w *writer) { w.tailBudget = 100 },
		func(w *writer) []string {
			ln, kn := w.tailSpillNames()
			return []string{ln, kn}
		}, ends)
}

// TestTailSpillDiskFull points the labels' scratch file at /dev/full:
// writing the shard fails with ENOSPC naming it, in Add or in Close, and
// Abort leaves nothing behind.
func TestTailSpillDiskFull(t *testing.T) {
	for _, n := range []int{3, 20000} { // records within the spill buffer, or past it
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			writeToFullDisk(t, 1, n, func(w *writer) { w.tailBudget = 1; w.Expect(n) },
				func(i int) *formats.Sample { return imageSample(fmt.Sprint(i), 0, 1, 1, 1) })
		})
	}
}
