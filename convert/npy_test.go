package convert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/hdf5"
	"github.com/prep-dev/prep/formats/npy"
)

const npyTestdata = "../testdata/npy"

func readNPYInput(t *testing.T, name string, label int64) *Input {
	t.Helper()
	path := filepath.Join(npyTestdata, name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return &Input{Key: filepath.Base(name), Source: path, Label: label, Data: data, Path: path}
}

func TestNPYHandlerWholeFile(t *testing.T) {
	h := NewNPYHandler(NPYOptions{SplitAxis: -1})
	in := readNPYInput(t, "ok/c16_be_fortran.npy", 3)
	want, err := npy.Parse(in.Data)
	if err != nil {
		t.Fatal(err)
	}
	s, err := h.Samples(context.Background(), in, 0, NewRand(1, in.Key, 0))
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 1 || s[0].Key != in.Key || s[0].Label != 3 || s[0].Source != in.Source || s[0].Params != nil {
		t.Fatalf("samples %+v", s)
	}
	f := s[0].Fields
	if len(f) != 1 || f[0].Name != formats.DataField || f[0].DType != formats.Complex128 ||
		!slices.Equal(f[0].Shape, []int{3, 2}) || !bytes.Equal(f[0].Data, want.Data) {
		t.Errorf("field %s %s%v, want data complex128[3 2]", f[0].Name, f[0].DType, f[0].Shape)
	}

	in = readNPYInput(t, "ok/arrays_deflated.npz", formats.NoLabel)
	s, err = h.Samples(context.Background(), in, 0, NewRand(1, in.Key, 0))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range s[0].Fields {
		names = append(names, f.Name)
	}
	if len(s) != 1 || !slices.Equal(names, []string{"npz/a", "npz/x", "npz/y"}) {
		t.Errorf("%d samples with fields %v, want 1 with [a x y]", len(s), names)
	}
}

func TestNPYHandlerSplit(t *testing.T) {
	h := NewNPYHandler(NPYOptions{SplitAxis: 0})
	in := readNPYInput(t, "ok/arrays_stored.npz", 1)
	whole, err := npy.ParseNPZ(in.Data, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := h.Samples(context.Background(), in, 0, NewRand(1, in.Key, 0))
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 4 {
		t.Fatalf("%d samples, want 4 rows", len(s))
	}
	for i, f := range whole {
		var joined []byte
		for r := range s {
			if s[r].Key != in.Key+"#r"+strconv.Itoa(r) || s[r].Label != 1 {
				t.Errorf("sample %d: key %q label %d", r, s[r].Key, s[r].Label)
			}
			g := s[r].Fields[i]
			if g.Name != NPZField(f.Name) || g.DType != f.DType || !slices.Equal(g.Shape, f.Shape[1:]) {
				t.Errorf("row %d field %s %s%v, want %s %s%v", r, g.Name, g.DType, g.Shape, f.Name, f.DType, f.Shape[1:])
			}
			joined = append(joined, g.Data...)
		}
		if !bytes.Equal(joined, f.Data) {
			t.Errorf("rows of %s do not add up to the array", f.Name)
		}
	}
}

func TestNPYHandlerErrors(t *testing.T) {
	for _, tc := range []struct {
		file  string
		split int
		err   string
		fatal bool
	}{
		{"bad/object.npy", -1, "object arrays are not supported: prep never unpickles", false},
		{"bad/truncated_data.npy", 0, "truncated .npy data", false},
		{"ok/ragged.npz", 0, "cannot split into rows: array img has 2 rows along axis 0, array mask has 5", false},
		{"ok/scalar_f8.npy", 0, "array data is 0-d", false},
		{"ok/empty_f4.npy", 0, "array data has no rows", false},
		{"ok/f4_le.npy", 1, "split axis 1 is not supported", true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			in := readNPYInput(t, tc.file, 0)
			_, err := NewNPYHandler(NPYOptions{SplitAxis: tc.split}).Samples(context.Background(), in, 0, NewRand(1, in.Key, 0))
			if err == nil || !strings.Contains(err.Error(), tc.err) || IsFatal(err) != tc.fatal {
				t.Errorf("error %v (fatal %v), want one containing %q (fatal %v)", err, IsFatal(err), tc.err, tc.fatal)
			}
		})
	}
}

// npyCheck asks the Python side to compare one sample of a shard with
// np.load of the file it came from.
type npyCheck struct {
	H5     string `json:"h5"`
	Field  string `json:"field"`  // dataset name in the shard
	Index  int    `json:"index"`  // sample index in the shard
	Ragged bool   `json:"ragged"` // flat data + offsets + shapes
	NPY    string `json:"npy"`    // file np.load reads
	Member string `json:"member"` // npz member, "" for .npy
	Row    int    `json:"row"`    // row along axis 0, -1 for the whole array
	Key    string `json:"key"`
	Label  int64  `json:"label"`
}

// convertNPY converts the files (relative to testdata/npy) into HDF5 in a
// fresh folder and returns the shard paths. Files keep their folder, so
// "a/x.npy" gets label a.
func convertNPY(t *testing.T, files map[string]string, split int) []string {
	t.Helper()
	src, dst := t.TempDir(), t.TempDir()
	for name, from := range files {
		if !filepath.IsAbs(from) {
			from = filepath.Join(npyTestdata, from)
		}
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h := NewNPYHandler(NPYOptions{SplitAxis: split})
	handler := func(key string) Handler {
		if e := ext(key); e == ".npy" || e == ".npz" {
			return h
		}
		return nil
	}
	sink, err := cloudsrc.NewLocalSink(dst)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := ListSource(ctx, cloudsrc.Dir{Root: src}, func(k string) bool { return handler(k) != nil })
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := Run(ctx, l, Options{
		Sink: sink, Format: hdf5.Format{}, Handler: handler, Seed: 1, Copies: 1,
		ItemsPerShard: 100, Workers: 2, IOWorkers: 2, Version: "test", Strict: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	var shards []string
	for _, s := range m.Shards {
		shards = append(shards, filepath.Join(dst, s.File))
	}
	return shards
}

// TestNPYToHDF5 converts numpy's own files to HDF5 shards and has h5py
// read every dataset back and compare it with np.load of the input.
func TestNPYToHDF5(t *testing.T) {
	expected, err := os.ReadFile(filepath.Join(npyTestdata, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var files map[string]struct {
		Members map[string]any `json:"members"`
	}
	if err := json.Unmarshal(expected, &files); err != nil {
		t.Fatal(err)
	}
	abs := func(name string) string {
		p, err := filepath.Abs(filepath.Join(npyTestdata, name))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	var checks []npyCheck
	// Every file alone: one sample, fixed shape.
	for name, f := range files {
		shards := convertNPY(t, map[string]string{name: "ok/" + name}, -1)
		if len(shards) != 1 {
			t.Fatalf("%s: %d shards, want 1", name, len(shards))
		}
		if f.Members == nil {
			checks = append(checks, npyCheck{H5: shards[0], Field: "data", NPY: abs("ok/" + name), Row: -1, Key: name, Label: formats.NoLabel})
			continue
		}
		for member := range f.Members {
			checks = append(checks, npyCheck{H5: shards[0], Field: NPZField(member), NPY: abs("ok/" + name), Member: member, Row: -1, Key: name, Label: formats.NoLabel})
		}
	}
	// Mixed shapes of one dtype and rank, labelled by folder: ragged data.
	mixed := map[string]string{"a/1.npy": "ok/f4_le.npy", "a/2.npy": "ok/empty_f4.npy", "b/3.npy": "ok/f4_be.npy"}
	shards := convertNPY(t, mixed, -1)
	for i, key := range []string{"a/1.npy", "a/2.npy", "b/3.npy"} {
		checks = append(checks, npyCheck{H5: shards[0], Field: "data", Index: i, Ragged: true, NPY: abs(mixed[key]), Row: -1, Key: key, Label: int64(i / 2)})
	}
	// Split along axis 0: rows of an .npz and of a Fortran-order, big-endian .npy.
	shards = convertNPY(t, map[string]string{"z.npz": "ok/arrays_stored.npz"}, 0)
	for r := range 4 {
		for _, member := range []string{"a", "x", "y"} {
			checks = append(checks, npyCheck{H5: shards[0], Field: NPZField(member), Index: r, NPY: abs("ok/arrays_stored.npz"), Member: member, Row: r, Key: "z.npz#r" + strconv.Itoa(r), Label: formats.NoLabel})
		}
	}
	shards = convertNPY(t, map[string]string{"v.npy": "ok/i4_be_fortran_v3.npy"}, 0)
	for r := range 3 {
		checks = append(checks, npyCheck{H5: shards[0], Field: "data", Index: r, NPY: abs("ok/i4_be_fortran_v3.npy"), Row: r, Key: "v.npy#r" + strconv.Itoa(r), Label: formats.NoLabel})
	}

	plan, err := json.Marshal(checks)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/python3", "-c", `
import json, sys
import h5py, numpy as np
fails = []
for c in json.load(sys.stdin):
    where = "%s[%s][%d] from %s %s row %d" % (c["h5"], c["field"], c["index"], c["npy"], c["member"], c["row"])
    want = np.load(c["npy"], allow_pickle=False)
    if c["member"]:
        want = want[c["member"]]
    if c["row"] >= 0:
        want = want[c["row"]]
    want = want.astype(want.dtype.newbyteorder("<"), order="C")  # ascontiguousarray would make 0-d arrays 1-d
    with h5py.File(c["h5"], "r") as f:
        if c["ragged"]:
            prefix = "" if c["field"] == "data" else c["field"] + "_"
            lo, hi = f[prefix + "offsets"][c["index"]:c["index"] + 2]
            got = f[c["field"]][lo:hi].reshape(f[prefix + "shapes"][c["index"]])
        else:
            got = f[c["field"]][c["index"]]
        got = np.asarray(got)
        key, label = f["keys"][c["index"]].decode(), int(f["labels"][c["index"]])
    if got.dtype != want.dtype or got.shape != want.shape:
        fails.append("%s: h5py %s%s, np.load %s%s" % (where, got.dtype, got.shape, want.dtype, want.shape))
    elif got.tobytes() != want.tobytes():
        fails.append("%s: values differ" % where)
    if key != c["key"] or label != c["label"]:
        fails.append("%s: key %r label %d, want %r %d" % (where, key, label, c["key"], c["label"]))
print(json.dumps(fails))
`)
	cmd.Stdin = bytes.NewReader(plan)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("h5py: %v\n%s", err, stderr.String())
	}
	var fails []string
	if err := json.Unmarshal(out, &fails); err != nil {
		t.Fatalf("h5py output %q: %v", out, err)
	}
	for _, f := range fails {
		t.Error(f)
	}
	t.Logf("%d datasets compared with np.load", len(checks))
}

// TestNPZReservedNames: an .npz whose members are named like the datasets
// the HDF5 writer adds (labels, keys, x_offsets) keeps every member, as a
// dataset of group npz; ragged members get their offsets beside them.
func TestNPZReservedNames(t *testing.T) {
	dir := t.TempDir()
	script := `
import sys, numpy as np
d = sys.argv[1]
for i, n in enumerate([2, 3]):
    np.savez(d + "/%d.npz" % i, x=np.arange(n * 2, dtype=np.float32).reshape(n, 2) + i,
             labels=np.array([i, 7]), keys=np.array([3.5]), x_offsets=np.array([9 + i], dtype=np.int16))
`
	if out, err := exec.Command("/usr/bin/python3", "-c", script, dir).CombinedOutput(); err != nil {
		t.Fatalf("numpy: %v\n%s", err, out)
	}
	shards := convertNPY(t, map[string]string{"0.npz": filepath.Join(dir, "0.npz"), "1.npz": filepath.Join(dir, "1.npz")}, -1)
	if len(shards) != 1 {
		t.Fatalf("%d shards, want 1", len(shards))
	}
	out, err := exec.Command("/usr/bin/python3", "-c", `
import sys, json, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
g = f["npz"]
o = g["x_offsets"][...]
print(json.dumps({
    "members": sorted(g.keys()),
    "labels": g["labels"][...].tolist(), "keys": g["keys"][...].tolist(),
    "x_offsets member": g["x%5Foffsets"][...].tolist(),
    "x": [g["x"][o[i]:o[i+1]].reshape(g["x_shapes"][i]).tolist() for i in range(2)],
    "prep keys": [k.decode() for k in f["keys"][...]], "prep labels": f["labels"][...].tolist(),
}))`, shards[0]).Output()
	if err != nil {
		t.Fatalf("h5py: %v", err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"members":          []any{"keys", "labels", "x", "x%5Foffsets", "x_offsets", "x_shapes"},
		"labels":           []any{[]any{0, 7}, []any{1, 7}},
		"keys":             []any{[]any{3.5}, []any{3.5}},
		"x_offsets member": []any{[]any{9}, []any{10}},
		"x":                []any{[]any{[]any{0, 1}, []any{2, 3}}, []any{[]any{1, 2}, []any{3, 4}, []any{5, 6}}},
		"prep keys":        []any{"0.npz", "1.npz"},
		"prep labels":      []any{-1, -1},
	}
	for k, v := range want {
		a, _ := json.Marshal(got[k])
		b, _ := json.Marshal(v)
		if !bytes.Equal(a, b) {
			t.Errorf("%s = %s, want %s", k, a, b)
		}
	}
}

func TestNPZField(t *testing.T) {
	for member, want := range map[string]string{
		"x": "npz/x", "labels": "npz/labels", "a.b": "npz/a.b", ".hidden": "npz/%2Ehidden",
		"a/b": "npz/a%2Fb", "100%": "npz/100%25", "x_offsets": "npz/x%5Foffsets", "y_shapes": "npz/y%5Fshapes",
		"z_ranks": "npz/z%5Franks", "my_shape": "npz/my_shape",
	} {
		if got := NPZField(member); got != want {
			t.Errorf("NPZField(%q) = %q, want %q", member, got, want)
		}
	}
}

// TestNPYEmitRows: a local .npy split into rows is read row by row
// (Emit), giving exactly the samples of a whole read (Samples) for every
// test array, or the same error; a Fortran-order array falls back to the
// whole read.
func TestNPYEmitRows(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(npyTestdata, "*", "*.npy"))
	if err != nil || len(files) < 30 {
		t.Fatalf("found %d .npy files (%v)", len(files), err)
	}
	h := NewNPYHandler(NPYOptions{SplitAxis: 0}).(Emitter)
	ctx := context.Background()
	for _, f := range files {
		in := readNPYInput(t, strings.TrimPrefix(f, npyTestdata+"/"), 2)
		want, werr := h.Samples(ctx, in, 0, nil)
		in.Data = nil // as fetch leaves it for a local file
		var got []formats.Sample
		gerr := h.Emit(ctx, in, 0, nil, func(s formats.Sample) error {
			got = append(got, s)
			return nil
		})
		if errors.Is(gerr, errWhole) {
			if !strings.Contains(f, "fortran") || len(got) != 0 {
				t.Errorf("%s: not read row by row (%d rows emitted first)", f, len(got))
			}
			continue
		}
		if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
			t.Errorf("%s: Emit: %v; Samples: %v", f, gerr, werr)
			continue
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d samples emitted, %d from Samples", f, len(got), len(want))
			continue
		}
		for i := range got {
			g, w := got[i], want[i]
			if g.Key != w.Key || g.Label != w.Label || g.Source != w.Source || len(g.Fields) != 1 ||
				g.Fields[0].Name != w.Fields[0].Name || g.Fields[0].DType != w.Fields[0].DType ||
				!slices.Equal(g.Fields[0].Shape, w.Fields[0].Shape) || !bytes.Equal(g.Fields[0].Data, w.Fields[0].Data) {
				t.Errorf("%s: sample %d differs: %s %v, want %s %v", f, i, g.Key, g.Fields[0].Shape, w.Key, w.Fields[0].Shape)
				break
			}
		}
	}
}
