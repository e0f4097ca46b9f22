package hdf5

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prep-dev/prep/formats"
)

func imageSample(key string, label int64, h, w int, seed byte) *formats.Sample {
	data := make([]byte, h*w*3)
	for i := range data {
		data[i] = byte(i*7) + seed
	}
	return &formats.Sample{Key: key, Label: label, Fields: []formats.Field{{
		Name: formats.DataField, Tensor: formats.Tensor{DType: formats.Uint8, Shape: []int{h, w, 3}, Data: data},
	}}}
}

func writeShard(t *testing.T, path string, samples ...*formats.Sample) formats.ShardInfo {
	t.Helper()
	w, err := Format{}.Create(path, formats.ShardMeta{Version: "test", Recipe: "resize=8", Seed: 7, Classes: []string{"cat", "dog"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		if err := w.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	info, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// h5py reads the file back and prints what it holds as JSON.
func h5py(t *testing.T, path, script string) map[string]any {
	t.Helper()
	cmd := exec.Command("/usr/bin/python3", "-c", `
import sys, json, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
out = {}
`+script+`
print(json.dumps(out))
`, path)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("h5py: %v\n%s", err, stderr)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("h5py output %q: %v", out, err)
	}
	return m
}

func TestFixedShapeRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "shard-000000.h5")
	samples := []*formats.Sample{imageSample("cat/1.jpg", 0, 40, 50, 1), imageSample("dog/2.jpg", 1, 40, 50, 2), imageSample("dog/33.jpg", 1, 40, 50, 3)}
	info := writeShard(t, path, samples...)
	if _, err := os.Stat(formats.TempName(path)); !os.IsNotExist(err) {
		t.Fatalf("temp file left behind: %v", err)
	}
	if info.Count != 3 || info.File != "shard-000000.h5" {
		t.Fatalf("info = %+v", info)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(raw)) != info.Bytes {
		t.Fatalf("bytes %d, file %d", info.Bytes, len(raw))
	}
	// Plain reads at the recorded offset return the samples' bytes.
	var want []byte
	for _, s := range samples {
		want = append(want, s.Fields[0].Data...)
	}
	ds := info.Datasets[0]
	if ds.Name != "data" || ds.Offset <= 0 || ds.Offset%alignment != 0 {
		t.Fatalf("data dataset = %+v, want an aligned offset", ds)
	}
	if got := raw[ds.Offset : ds.Offset+ds.Size]; !bytes.Equal(got, want) {
		t.Fatal("bytes at the data offset differ from the samples")
	}
	m := h5py(t, path, `
d = f["data"]
out["shape"] = list(d.shape); out["dtype"] = str(d.dtype)
out["chunks"] = d.chunks; out["compression"] = d.compression
out["sum"] = int(d[...].astype(np.int64).sum()); out["px"] = int(d[2, 3, 4, 2])
out["labels"] = f["labels"][...].tolist()
out["keys"] = [k.decode() for k in f["keys"][...]]
out["recipe"] = f.attrs["recipe"]; out["seed"] = int(f.attrs["seed"])
out["classes"] = f.attrs["classes"]
out["offset"] = d.id.get_offset()
`)
	var sum int64
	for _, b := range want {
		sum += int64(b)
	}
	checks := []struct {
		name string
		got  any
		want any
	}{
		{"shape", m["shape"], []any{3.0, 40.0, 50.0, 3.0}},
		{"dtype", m["dtype"], "uint8"},
		{"chunks", m["chunks"], nil},
		{"compression", m["compression"], nil},
		{"sum", m["sum"], float64(sum)},
		{"px", m["px"], float64(want[2*6000+3*150+4*3+2])},
		{"labels", m["labels"], []any{0.0, 1.0, 1.0}},
		{"keys", m["keys"], []any{"cat/1.jpg", "dog/2.jpg", "dog/33.jpg"}},
		{"recipe", m["recipe"], "resize=8"},
		{"seed", m["seed"], 7.0},
		{"classes", m["classes"], "cat\ndog"},
		{"offset", m["offset"], float64(ds.Offset)},
	}
	for _, c := range checks {
		if !jsonEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

// wantJSON checks the values h5py printed against want, key by key.
func wantJSON(t *testing.T, m, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if !jsonEqual(m[k], v) {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func TestReproducible(t *testing.T) {
	dir := t.TempDir()
	a := writeShard(t, filepath.Join(dir, "a.h5"), imageSample("k1", 0, 3, 3, 1), imageSample("k2", 1, 3, 3, 2))
	b := writeShard(t, filepath.Join(dir, "b.h5"), imageSample("k1", 0, 3, 3, 1), imageSample("k2", 1, 3, 3, 2))
	if a.SHA256 != b.SHA256 {
		t.Fatalf("equal samples gave different shards: %s vs %s", a.SHA256, b.SHA256)
	}
}

// TestExpect checks that the size hint, right or wrong, changes no byte:
// a shard streamed into the file (the hint right, fixed shapes) equals
// one gathered in memory (no hint), and so does one that starts streaming
// and falls back to gathering, when more or fewer samples come than the
// hint said or the column turns ragged after some samples. Fewer samples
// with one column keep them in place (shrink); with two, they are copied.
func TestExpect(t *testing.T) {
	dir := t.TempDir()
	twoColumns := func(key string, seed byte) *formats.Sample {
		s := imageSample(key, 0, 3, 3, seed)
		s.Fields = append(s.Fields, formats.Field{Name: "extra", Tensor: formats.Tensor{DType: formats.Uint8, Shape: []int{5}, Data: []byte{seed, 1, 2, 3, 4}}})
		return s
	}
	for _, tc := range []struct {
		name    string
		samples []*formats.Sample
		shapes  any // h5py's shapes dataset, nil for none
		inPlace int64
	}{
		{"fixed", []*formats.Sample{imageSample("k1", 0, 3, 3, 1), imageSample("k2", 1, 3, 3, 2), imageSample("k3", 1, 3, 3, 3)}, nil, 1},
		{"ragged", []*formats.Sample{imageSample("k1", 0, 3, 3, 1), imageSample("k2", 1, 3, 3, 2), imageSample("k3", 1, 4, 3, 3)},
			[]any{[]any{3, 3, 3}, []any{3, 3, 3}, []any{4, 3, 3}}, 0},
		{"two columns", []*formats.Sample{twoColumns("k1", 1), twoColumns("k2", 2), twoColumns("k3", 3)}, nil, 0},
	} {
		var sums []string
		before := inPlaceShrinks.Load()
		for _, expect := range []int{-1, 0, 1, 2, 3, 100} {
			path := filepath.Join(dir, fmt.Sprintf("%s%d.h5", tc.name, expect))
			w, err := Format{}.Create(path, formats.ShardMeta{Version: "test"})
			if err != nil {
				t.Fatal(err)
			}
			if expect >= 0 {
				w.(formats.Expecter).Expect(expect)
			}
			for _, s := range tc.samples {
				if err := w.Add(s); err != nil {
					t.Fatal(err)
				}
			}
			info, err := w.Close()
			if err != nil {
				t.Fatal(err)
			}
			sums = append(sums, info.SHA256)
			if got := info.Datasets[0].Size; got != 3*27 && tc.shapes == nil {
				t.Errorf("%s, hint %d: data size %d, want %d", tc.name, expect, got, 3*27)
			}
			m := h5py(t, path, `out["data"] = f["data"][...].flatten().tolist()
out["keys"] = [k.decode() for k in f["keys"][...]]
out["shapes"] = f["shapes"][...].tolist() if "shapes" in f else None`)
			var want []any
			for _, s := range tc.samples {
				for _, b := range s.Fields[0].Data {
					want = append(want, int(b))
				}
			}
			if !jsonEqual(m["data"], want) || !jsonEqual(m["keys"], []any{"k1", "k2", "k3"}) || !jsonEqual(m["shapes"], tc.shapes) {
				t.Errorf("%s, hint %d: read back %v", tc.name, expect, m)
			}
		}
		for i, s := range sums[1:] {
			if s != sums[0] {
				t.Errorf("%s, hint case %d: sha256 %s, without a hint %s", tc.name, i+1, s, sums[0])
			}
		}
		if n := inPlaceShrinks.Load() - before; n != tc.inPlace {
			t.Errorf("%s: %d shrinks kept the samples in place, want %d", tc.name, n, tc.inPlace)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestRaggedAndDTypes(t *testing.T) {
	f16 := make([]byte, 4) // 1.0, -2.0 as IEEE half
	binary.LittleEndian.PutUint16(f16, 0x3c00)
	binary.LittleEndian.PutUint16(f16[2:], 0xc000)
	c64 := make([]byte, 8)
	binary.LittleEndian.PutUint32(c64, math.Float32bits(1.5))
	binary.LittleEndian.PutUint32(c64[4:], math.Float32bits(-3))
	f32 := func(v ...float32) []byte {
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		return b
	}
	mk := func(key string, pcm []byte, n int) *formats.Sample {
		return &formats.Sample{Key: key, Label: formats.NoLabel, Fields: []formats.Field{
			{Name: "data", Tensor: formats.Tensor{DType: formats.Float32, Shape: []int{n, 1}, Data: pcm}},
			{Name: "half", Tensor: formats.Tensor{DType: formats.Float16, Shape: []int{2}, Data: f16}},
			{Name: "flag", Tensor: formats.Tensor{DType: formats.Bool, Shape: []int{2}, Data: []byte{1, 0}}},
			{Name: "z", Tensor: formats.Tensor{DType: formats.Complex64, Shape: []int{1}, Data: c64}},
		}}
	}
	path := filepath.Join(t.TempDir(), "r.h5")
	writeShard(t, path, mk("a", f32(0.5, 0.25), 2), mk("b", f32(1, 2, 3), 3))
	m := h5py(t, path, `
out["data"] = f["data"][...].tolist(); out["offsets"] = f["offsets"][...].tolist()
out["shapes"] = f["shapes"][...].tolist()
out["half"] = [str(f["half"].dtype), f["half"][1].tolist()]
out["flag"] = [str(f["flag"].dtype), f["flag"][0].tolist()]
out["z"] = [str(f["z"].dtype), float(f["z"][1, 0].real), float(f["z"][1, 0].imag)]
out["labels"] = f["labels"][...].tolist()
`)
	want := map[string]any{
		"data":    []any{0.5, 0.25, 1, 2, 3},
		"offsets": []any{0, 2, 5},
		"shapes":  []any{[]any{2, 1}, []any{3, 1}},
		"half":    []any{"float16", []any{1, -2}},
		"flag":    []any{"bool", []any{true, false}},
		"z":       []any{"complex64", 1.5, -3},
		"labels":  []any{-1, -1},
	}
	wantJSON(t, m, want)
	infos, err := Datasets(path)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, d := range infos {
		names = append(names, d.Name+":"+string(d.DType))
	}
	if got := strings.Join(names, " "); got != "data:float32 flag:bool half:float16 keys:S1 labels:int64 offsets:int64 shapes:int64 z:complex64" {
		t.Errorf("Datasets = %s", got)
	}
}

func TestH5dumpHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.h5")
	writeShard(t, path, imageSample("a", 0, 6, 7, 0), imageSample("b", 1, 6, 7, 1))
	out, err := exec.Command("h5dump", "-H", path).CombinedOutput()
	if err != nil {
		t.Fatalf("h5dump: %v\n%s", err, out)
	}
	for _, want := range []string{
		`DATASET "data"`, "H5T_STD_U8LE", "DATASPACE  SIMPLE { ( 2, 6, 7, 3 ) / ( 2, 6, 7, 3 ) }",
		`DATASET "labels"`, "H5T_STD_I64LE", `DATASET "keys"`, `ATTRIBUTE "recipe"`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("h5dump -H lacks %q:\n%s", want, out)
		}
	}
}

func TestReadDatasetMatchesRaw(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.h5")
	info := writeShard(t, path, imageSample("a", 0, 16, 16, 3), imageSample("b", 1, 16, 16, 9))
	d := info.Datasets[0]
	got := make([]byte, d.Size)
	if err := ReadDataset(path, "data", got); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	if !bytes.Equal(got, raw[d.Offset:d.Offset+d.Size]) {
		t.Fatal("library read differs from the raw bytes at the offset")
	}
}

func TestMismatchedFields(t *testing.T) {
	w, _ := Format{}.Create(filepath.Join(t.TempDir(), "x.h5"), formats.ShardMeta{})
	defer w.Abort()
	if err := w.Add(imageSample("a", 0, 2, 2, 0)); err != nil {
		t.Fatal(err)
	}
	bad := imageSample("b", 0, 2, 2, 0)
	bad.Fields[0].DType = formats.Uint16
	bad.Fields[0].Shape = []int{2, 1, 3}
	if err := w.Add(bad); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("err = %v", err)
	}
}

func int64Tensor(shape []int, v ...int64) formats.Tensor {
	return formats.Tensor{DType: formats.Int64, Shape: shape, Data: int64Bytes(v)}
}

// TestMixedRanks: samples of different ranks share one ragged column,
// whatever sample comes first, so no input's fate depends on where a
// shard boundary falls.
func TestMixedRanks(t *testing.T) {
	a := &formats.Sample{Key: "a", Fields: []formats.Field{{Name: "data", Tensor: int64Tensor([]int{2, 3}, 1, 2, 3, 4, 5, 6)}}}
	b := &formats.Sample{Key: "b", Fields: []formats.Field{{Name: "data", Tensor: int64Tensor([]int{2, 1, 2}, 7, 8, 9, 10)}}}
	c := &formats.Sample{Key: "c", Fields: []formats.Field{{Name: "data", Tensor: int64Tensor([]int{1}, 11)}}}
	tests := []struct {
		name    string
		samples []*formats.Sample
		shapes  []any
		ranks   []any
	}{
		{"2,3 then 3", []*formats.Sample{a, b}, []any{[]any{2, 3, -1}, []any{2, 1, 2}}, []any{2, 3}},
		{"3 then 2", []*formats.Sample{b, a}, []any{[]any{2, 1, 2}, []any{2, 3, -1}}, []any{3, 2}},
		{"2,3,1", []*formats.Sample{a, b, c}, []any{[]any{2, 3, -1}, []any{2, 1, 2}, []any{1, -1, -1}}, []any{2, 3, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.h5")
			writeShard(t, path, tt.samples...)
			m := h5py(t, path, `
out["shapes"] = f["shapes"][...].tolist(); out["ranks"] = f["ranks"][...].tolist()
o = f["offsets"][...]; d = f["data"][...]
out["samples"] = [d[o[i]:o[i+1]].reshape([x for x in f["shapes"][i] if x >= 0][:f["ranks"][i]]).tolist() for i in range(len(f["keys"]))]
`)
			var want []any
			for _, s := range tt.samples {
				want = append(want, npNested(s.Fields[0].Shape, s.Fields[0].Data))
			}
			if !jsonEqual(m["shapes"], tt.shapes) || !jsonEqual(m["ranks"], tt.ranks) {
				t.Errorf("shapes %v ranks %v, want %v %v", m["shapes"], m["ranks"], tt.shapes, tt.ranks)
			}
			if !jsonEqual(m["samples"], want) {
				t.Errorf("samples read back %v, want %v", m["samples"], want)
			}
		})
	}
	// Equal ranks keep the layout without ranks.
	path := filepath.Join(t.TempDir(), "r.h5")
	writeShard(t, path, a, &formats.Sample{Key: "d", Fields: []formats.Field{{Name: "data", Tensor: int64Tensor([]int{1, 2}, 1, 2)}}})
	if m := h5py(t, path, `out["ranks"] = "ranks" in f`); m["ranks"] != false {
		t.Errorf("equal ranks wrote a ranks dataset")
	}
}

// npNested is an int64 tensor as nested lists, the way tolist() gives it.
func npNested(shape []int, data []byte) any {
	if len(shape) == 0 {
		return int64(binary.LittleEndian.Uint64(data))
	}
	n := len(data) / shape[0]
	out := make([]any, shape[0])
	for i := range out {
		out[i] = npNested(shape[1:], data[i*n:(i+1)*n])
	}
	return out
}

// TestGroupedFields: fields named GROUP/NAME go into an HDF5 group, so
// names the writer uses at the root (labels, keys, x_offsets) are free
// there; ragged ones get their offsets and shapes beside them.
func TestGroupedFields(t *testing.T) {
	mk := func(key string, n int) *formats.Sample {
		x := make([]int64, n)
		return &formats.Sample{Key: key, Label: 1, Fields: []formats.Field{
			{Name: "npz/keys", Tensor: int64Tensor([]int{1}, 42)},
			{Name: "npz/labels", Tensor: int64Tensor([]int{2}, 3, 4)},
			{Name: "npz/x", Tensor: int64Tensor([]int{n}, x...)},
		}}
	}
	path := filepath.Join(t.TempDir(), "g.h5")
	info := writeShard(t, path, mk("a", 2), mk("b", 3))
	m := h5py(t, path, `
out["names"] = sorted(f["npz"].keys()); out["root"] = sorted(f.keys())
out["labels"] = f["npz/labels"][...].tolist(); out["keys"] = f["npz/keys"][...].tolist()
out["x_offsets"] = f["npz/x_offsets"][...].tolist()
out["plabels"] = f["labels"][...].tolist()
`)
	want := map[string]any{
		"names":     []any{"keys", "labels", "x", "x_offsets", "x_shapes"},
		"root":      []any{"keys", "labels", "npz"},
		"labels":    []any{[]any{3, 4}, []any{3, 4}},
		"keys":      []any{[]any{42}, []any{42}},
		"x_offsets": []any{0, 2, 5},
		"plabels":   []any{1, 1},
	}
	wantJSON(t, m, want)
	got, err := Datasets(path)
	if err != nil {
		t.Fatal(err)
	}
	var names, infoNames []string
	for _, d := range got {
		names = append(names, d.Name)
	}
	for _, d := range info.Datasets {
		infoNames = append(infoNames, d.Name)
	}
	if !strings.Contains(strings.Join(names, " "), "npz/labels npz/x npz/x_offsets") || len(names) != len(infoNames) {
		t.Errorf("Datasets = %v, writer reported %v", names, infoNames)
	}
	for _, bad := range []string{"labels", "x_shapes", "npz/x_ranks", "a.b", "npz/a/b", "npz/..", "/x"} {
		w, _ := Format{}.Create(filepath.Join(t.TempDir(), "x.h5"), formats.ShardMeta{})
		s := &formats.Sample{Key: "k", Fields: []formats.Field{{Name: bad, Tensor: int64Tensor([]int{1}, 1)}}}
		if err := w.Add(s); err == nil || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("field %q: err = %v, want it refused", bad, err)
		}
		w.Abort()
	}
}

// TestAudioAttrs: an audio shard records its rate, channels and sample
// format; mono is (N, T), several channels (N, T, C).
func TestAudioAttrs(t *testing.T) {
	tests := []struct {
		name     string
		dtype    formats.DType
		shape    []int
		channels int
		format   string
	}{
		{"mono s16", formats.Int16, []int{4}, 1, "s16"},
		{"stereo f32", formats.Float32, []int{4, 2}, 2, "f32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := tt.dtype.Size()
			for _, d := range tt.shape {
				n *= d
			}
			s := &formats.Sample{Key: "a", Rate: 22050, Fields: []formats.Field{{Name: "data", Tensor: formats.Tensor{DType: tt.dtype, Shape: tt.shape, Data: make([]byte, n)}}}}
			path := filepath.Join(t.TempDir(), "a.h5")
			writeShard(t, path, s)
			m := h5py(t, path, `
out["attrs"] = [int(f.attrs["sample_rate"]), int(f.attrs["channels"]), f.attrs["sample_format"]]
out["shape"] = list(f["data"].shape)`)
			if want := []any{22050, tt.channels, tt.format}; !jsonEqual(m["attrs"], want) {
				t.Errorf("attrs = %v, want %v", m["attrs"], want)
			}
			if want := append([]int{1}, tt.shape...); !jsonEqual(m["shape"], want) {
				t.Errorf("shape = %v, want %v", m["shape"], want)
			}
			w, _ := Format{}.Create(filepath.Join(t.TempDir(), "b.h5"), formats.ShardMeta{})
			defer w.Abort()
			w.Add(s)
			other := *s
			other.Rate = 16000
			if err := w.Add(&other); !errors.Is(err, formats.ErrIncompatible) {
				t.Errorf("a second rate: err = %v", err)
			}
		})
	}
}

// TestStreamCreateFails makes the library refuse a streamed shard's
// layout (two datasets of one name, which check keeps Add from asking):
// start must return the error, naming the shard, and leave no file.
func TestStreamCreateFails(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.h5")
	col := func() *column {
		return &column{name: "data", dtype: formats.Uint8, shape: []int{2}, fixed: true, size: 2}
	}
	w := &writer{path: p, expect: 2, cols: []*column{col(), col()}}
	err := w.start()
	if err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("start: %v, want an error naming %s", err, p)
	}
	if _, err := os.Stat(formats.TempName(p)); !os.IsNotExist(err) {
		t.Errorf("temporary file left after a failed start (%v)", err)
	}
	s := imageSample("a", 0, 2, 2, 0)
	s.Fields = append(s.Fields, s.Fields[0])
	if err := new(writer).check(s); !errors.Is(err, formats.ErrIncompatible) {
		t.Errorf("two fields of one name: %v, want ErrIncompatible", err)
	}
}

func int64Bytes(v []int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}
