package hdf5

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prep-dev/prep/formats"
)

// shapeCases are spillCases with a ragged column, and shards whose
// shapes vary more: scalars among vectors (rank 0, padded to the largest
// rank), a column that turns ragged after 200 samples of one shape (more
// than a block of rows), and two ragged columns, the second turning
// ragged after the first's shapes spilled.
func shapeCases() map[string]struct {
	expect  int
	samples []*formats.Sample
} {
	cases := spillCases()
	delete(cases, "fixed")
	var scalars, late, two []*formats.Sample
	for i := range 30 {
		shape := []int{i % 4}
		if i%3 == 0 {
			shape = nil
		}
		v := make([]int64, formats.Tensor{Shape: shape}.Len())
		for k := range v {
			v[k] = int64(i*10 + k)
		}
		scalars = append(scalars, &formats.Sample{Key: fmt.Sprint("s", i), Label: int64(i), Fields: []formats.Field{
			{Name: formats.DataField, Tensor: int64Tensor(shape, v...)},
		}})
	}
	for i := range 250 {
		h, w := 2, 2
		if i >= 200 {
			h, w = 1+i%5, 1+i%3
		}
		late = append(late, imageSample(fmt.Sprint("l", i), 0, h, w, byte(i)))
	}
	for i := range 60 {
		s := imageSample(fmt.Sprint("t", i), 1, 3+i%4, 2, byte(i))
		n := 2
		if i >= 40 {
			n = i % 7
		}
		s.Fields = append(s.Fields, formats.Field{Name: "npz/x", Tensor: formats.Tensor{DType: formats.Float32, Shape: []int{n, 1}, Data: make([]byte, 4*n)}})
		two = append(two, s)
	}
	for name, samples := range map[string][]*formats.Sample{"scalars": scalars, "late, many": late, "two ragged": two} {
		cases[name+", gathered"] = struct {
			expect  int
			samples []*formats.Sample
		}{0, samples}
		cases[name+", hinted"] = struct {
			expect  int
			samples []*formats.Sample
		}{len(samples), samples}
	}
	return cases
}

// shapeRecordBytes is what the ragged columns' shape records of samples
// take: a uvarint rank and dimensions for each sample of a column from
// the one whose shape first differs from the column's first.
func shapeRecordBytes(samples []*formats.Sample) int64 {
	var n int64
	for k := range samples[0].Fields {
		ragged := false
		for _, s := range samples {
			shape := s.Fields[k].Shape
			ragged = ragged || !slices.Equal(shape, samples[0].Fields[k].Shape)
			if !ragged {
				continue
			}
			n += int64(len(binary.AppendUvarint(nil, uint64(len(shape)))))
			for _, d := range shape {
				n += int64(len(binary.AppendUvarint(nil, uint64(d))))
			}
		}
	}
	return n
}

// writeShapeBudget writes samples to a shard at p, told to expect
// expect, keeping at most budget column bytes and shapeBudget bytes of
// shapes in memory. It reports whether a shapes scratch file existed
// before Close, and fails t when the writer held more shape bytes than
// shapeBudget.
func writeShapeBudget(t *testing.T, p string, expect int, budget, shapeBudget int64, samples []*formats.Sample) (formats.ShardInfo, bool) {
	t.Helper()
	return writeSide(t, p, expect, budget, samples,
		func(w *writer) { w.shapeBudget = shapeBudget },
		func(w *writer) {
			var held int64
			for _, c := range w.cols {
				held += c.rag.recs.held()
			}
			if held != w.shapesHeld || held > shapeBudget {
				t.Fatalf("shape budget %d: %d bytes of shapes held, %d counted", shapeBudget, held, w.shapesHeld)
			}
		},
		func(w *writer) bool {
			spilled := false
			for k := range w.cols {
				if _, err := os.Stat(w.shapeSpillName(k)); err == nil {
					spilled = true
				}
			}
			return spilled
		})
}

// TestShapeSpillSameBytes writes each case with its shapes in memory, and
// again with budgets that spill them at the first record, part way and
// at the last, with the columns in memory or spilled too, and with
// blocks of one row, a few rows and the default size: the shards and
// their infos must be equal byte for byte, their offsets, shapes and
// ranks those of the samples, and no scratch file may stay behind.
func TestShapeSpillSameBytes(t *testing.T) {
	v := sideSpill{
		what: "shapes", block: &shapeBlock, blocks: []int{1, 200, 1 << 20},
		write: writeShapeBudget, budget: shapesAfter, total: shapeRecordBytes, check: checkShapes,
	}
	for name, tc := range shapeCases() {
		t.Run(name, func(t *testing.T) { v.sameBytes(t, tc.expect, tc.samples) })
	}
}

// checkShapes checks the offsets, shapes and ranks datasets of each
// ragged field of shard, whose info is info, against the samples: the
// running element counts from 0, each shape padded with -1 to the
// largest rank, and the ranks only when they differ.
func checkShapes(t *testing.T, shard []byte, info formats.ShardInfo, samples []*formats.Sample) {
	t.Helper()
	ragged := 0
	for k, f := range samples[0].Fields {
		rank, mixed, differ := 0, false, false
		for _, s := range samples {
			rank = max(rank, len(s.Fields[k].Shape))
			mixed = mixed || len(s.Fields[k].Shape) != len(f.Shape)
			differ = differ || !slices.Equal(s.Fields[k].Shape, f.Shape)
		}
		if !differ {
			continue
		}
		ragged++
		offsets, shapes, ranks := []int64{0}, []int64{}, []int64{}
		for _, s := range samples {
			shape := s.Fields[k].Shape
			for d := range rank {
				if d < len(shape) {
					shapes = append(shapes, int64(shape[d]))
				} else {
					shapes = append(shapes, -1)
				}
			}
			offsets = append(offsets, offsets[len(offsets)-1]+int64(formats.Tensor{Shape: shape}.Len()))
			ranks = append(ranks, int64(len(shape)))
		}
		prefix := f.Name + "_"
		if f.Name == formats.DataField {
			prefix = ""
		}
		sets := []struct {
			name string
			want []int64
		}{{prefix + "offsets", offsets}, {prefix + "shapes", shapes}}
		if mixed {
			sets = append(sets, struct {
				name string
				want []int64
			}{prefix + "ranks", ranks})
		}
		if _, ok := datasetNamed(info.Datasets, prefix+"ranks"); ok != mixed {
			t.Errorf("field %s: a ranks dataset %v, want %v", f.Name, ok, mixed)
		}
		for _, d := range sets {
			got, ok := datasetNamed(info.Datasets, d.name)
			want := int64Bytes(d.want)
			if !ok || got.DType != formats.Int64 || got.Size != int64(len(want)) || got.Offset < 0 || got.Offset+got.Size > int64(len(shard)) {
				t.Fatalf("dataset %s: %+v, want int64 of %d bytes", d.name, got, len(want))
			}
			if !bytes.Equal(shard[got.Offset:got.Offset+got.Size], want) {
				t.Errorf("dataset %s: the bytes differ from the samples'", d.name)
			}
		}
	}
	if ragged == 0 {
		t.Fatal("no ragged field")
	}
}

// TestShapesMixed reads back, through h5py, a shard of scalars and
// vectors whose shapes spilled, against the samples.
func TestShapesMixed(t *testing.T) {
	samples := shapeCases()["scalars, gathered"].samples
	p := filepath.Join(t.TempDir(), "s.h5")
	if _, spilled := writeShapeBudget(t, p, 0, spillAfter, 0, samples); !spilled {
		t.Fatal("no scratch file while writing")
	}
	got := h5py(t, p, `o = f["offsets"][:]; r = f["ranks"][:]
out["samples"] = [f["data"][o[i]:o[i+1]].reshape([int(x) for x in f["shapes"][i][:r[i]]]).tolist() for i in range(len(r))]`)
	var want []any
	for i, s := range samples {
		switch len(s.Fields[0].Shape) {
		case 0:
			want = append(want, float64(i*10))
		default:
			var v []any
			for k := range s.Fields[0].Shape[0] {
				v = append(v, float64(i*10+k))
			}
			if v == nil {
				v = []any{}
			}
			want = append(want, v)
		}
	}
	wantJSON(t, got, map[string]any{"samples": want})
}

// TestShapeSpillAbort: Abort removes the shapes' scratch files with the
// temp file, and Close removes them once the shard is written, also when
// it fails.
func TestShapeSpillAbort(t *testing.T) {
	ends := abortOrClose()
	ends["stray byte"] = closeAfter(func(w *writer) { w.cols[1].rag.recs.spill.write([]byte{0}) }, "more recorded")
	ends["short"] = closeAfter(func(w *writer) { w.cols[0].rag.recs.spill.n-- }, "EOF")
	sideSpillEnds(t, shapeCases()["two ragged, gathered"].samples,
		func(w *writer) { w.shapeBudget = 10 },
		func(w *writer) []string {
			var names []string
			for k := range w.cols {
				names = append(names, w.shapeSpillName(k))
			}
			return names
		}, ends)
}

// TestShapeSpillDiskFull points the shapes' scratch file at /dev/full:
// writing the shard fails with ENOSPC naming it, in Add or in Close, and
// Abort leaves nothing behind.
func TestShapeSpillDiskFull(t *testing.T) {
	for _, n := range []int{3, 30000} { // records within the spill buffer, or past it
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			writeToFullDisk(t, 3, n, func(w *writer) { w.shapeBudget = 1 },
				func(i int) *formats.Sample { return imageSample(fmt.Sprint(i), 0, 1+i%2, 1, 1) }) // column 0's, after the labels' and keys'
		})
	}
}
