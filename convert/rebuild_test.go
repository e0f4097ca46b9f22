package convert

import (
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/hdf5"
	"github.com/prep-dev/prep/formats/manifest"
	"github.com/prep-dev/prep/formats/tarshard"
)

// TestShardSamples writes samples with the real writers and reads them
// back by key: fixed and ragged fields, ranks that differ, an npz group,
// several dtypes; the reader must give back every tensor and label.
func TestShardSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tensor := func(dt formats.DType, shape ...int) formats.Tensor {
		n := dt.Size()
		for _, d := range shape {
			n *= d
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return formats.Tensor{DType: dt, Shape: shape, Data: b}
	}
	sample := func(key string, label int64, fields ...formats.Field) formats.Sample {
		return formats.Sample{Key: key, Label: label, Fields: fields}
	}
	for _, tc := range []struct {
		name    string
		format  formats.ReadWriteFormat
		samples []formats.Sample
	}{
		{"hdf5 fixed", hdf5.Format{}, []formats.Sample{
			sample("a.jpg#c0", 1, formats.Field{Name: "data", Tensor: tensor(formats.Uint8, 4, 5, 3)}),
			sample("b.jpg#c0", 2, formats.Field{Name: "data", Tensor: tensor(formats.Uint8, 4, 5, 3)}),
			sample("long/name/c.jpg#c0", -1, formats.Field{Name: "data", Tensor: tensor(formats.Uint8, 4, 5, 3)}),
		}},
		{"hdf5 ragged, ranks differ", hdf5.Format{}, []formats.Sample{
			sample("x.npy", 0, formats.Field{Name: "data", Tensor: tensor(formats.Float32, 3, 2)}),
			sample("y.npy", 0, formats.Field{Name: "data", Tensor: tensor(formats.Float32, 7)}),
			sample("z.npy", 0, formats.Field{Name: "data", Tensor: tensor(formats.Float32, 1, 2, 2)}),
		}},
		{"hdf5 npz group, one field ragged", hdf5.Format{}, []formats.Sample{
			sample("p.npz", 3, formats.Field{Name: "npz/img", Tensor: tensor(formats.Uint8, 2, 2)}, formats.Field{Name: "npz/x%5Foffsets", Tensor: tensor(formats.Int64, 3)}, formats.Field{Name: "npz/flag", Tensor: tensor(formats.Bool, 1)}),
			sample("q.npz", 4, formats.Field{Name: "npz/img", Tensor: tensor(formats.Uint8, 2, 2)}, formats.Field{Name: "npz/x%5Foffsets", Tensor: tensor(formats.Int64, 5)}, formats.Field{Name: "npz/flag", Tensor: tensor(formats.Bool, 1)}),
		}},
		{"png tar", tarshard.PNG(), []formats.Sample{
			sample("a.jpg", 0, formats.Field{Name: "data", Tensor: tensor(formats.Uint8, 6, 4, 3)}),
			sample("b.jpg", 1, formats.Field{Name: "data", Tensor: tensor(formats.Uint8, 3, 8, 1)}),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.samples {
				tc.samples[i].Params = map[string]any{}
			}
			path := filepath.Join(t.TempDir(), "shard-000000"+tc.format.Ext())
			w, err := tc.format.Create(path, formats.ShardMeta{})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]bool{}
			for i := range tc.samples {
				if err := w.Add(&tc.samples[i]); err != nil {
					t.Fatal(err)
				}
				want[tc.samples[i].Key] = i != 1 // read all but the second
			}
			delete(want, tc.samples[1].Key)
			info, err := w.Close()
			if err != nil {
				t.Fatal(err)
			}
			got, keys, err := shardSamples(tc.format, path, info.Datasets, want)
			if err != nil {
				t.Fatal(err)
			}
			var wantKeys []string
			for _, s := range tc.samples {
				wantKeys = append(wantKeys, s.Key)
			}
			if !slices.Equal(keys, wantKeys) {
				t.Errorf("keys %q, want %q", keys, wantKeys)
			}
			if len(got.samples) != len(want) || len(got.bad) != 0 {
				t.Fatalf("read %d samples (%d bad), asked for %d", len(got.samples), len(got.bad), len(want))
			}
			for i, s := range tc.samples {
				g, ok := got.samples[s.Key]
				if i == 1 {
					if ok {
						t.Errorf("%s was read though not asked for", s.Key)
					}
					continue
				}
				if g.Label != s.Label {
					t.Errorf("%s: label %d, want %d", s.Key, g.Label, s.Label)
				}
				byName := map[string]formats.Tensor{}
				for _, f := range g.Fields {
					byName[f.Name] = f.Tensor
				}
				for j, f := range s.Fields {
					name := f.Name
					if tc.format.Name() == "png" && j == 0 {
						name = formats.DataField
					}
					if d := diffTensor(byName[name], f.Tensor); d != "" {
						t.Errorf("%s: field %s: %s", s.Key, f.Name, d)
					}
				}
				if len(g.Fields) != len(s.Fields) {
					t.Errorf("%s: %d fields, want %d", s.Key, len(g.Fields), len(s.Fields))
				}
			}
		})
	}
}

// TestDiffSamples checks that each difference is named.
func TestDiffSamples(t *testing.T) {
	base := formats.Sample{Key: "k", Label: 1, Fields: []formats.Field{{Name: "data", Tensor: formats.Tensor{DType: formats.Uint8, Shape: []int{2, 2}, Data: []byte{1, 2, 3, 4}}}}, Params: map[string]any{"hflip": true}}
	clone := func(change func(*formats.Sample)) formats.Sample {
		s := base
		s.Fields = []formats.Field{{Name: "data", Tensor: formats.Tensor{DType: formats.Uint8, Shape: []int{2, 2}, Data: []byte{1, 2, 3, 4}}}}
		s.Params = map[string]any{"hflip": true}
		change(&s)
		return s
	}
	for _, tc := range []struct {
		name   string
		change func(*formats.Sample)
		want   string
	}{
		{"equal", func(*formats.Sample) {}, ""},
		{"label", func(s *formats.Sample) { s.Label = 2 }, "label 1 in the shard, 2 rebuilt"},
		{"bytes", func(s *formats.Sample) { s.Fields[0].Data[2] = 9 }, "data: 1 of 4 bytes differ, the first at byte 2 (shard 0x03, rebuilt 0x09)"},
		{"shape", func(s *formats.Sample) { s.Fields[0].Shape = []int{4} }, "data: uint8[2 2] in the shard, uint8[4] rebuilt"},
		{"field", func(s *formats.Sample) { s.Fields[0].Name = "other" }, "field other is missing from the shard; the shard has a field data the rebuild does not make"},
		{"params", func(s *formats.Sample) { s.Params["hflip"] = false }, `augmentation parameters {"hflip":true} in the shard, {"hflip":false} rebuilt`},
	} {
		if got := diffSamples(base, clone(tc.change)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestOfItem(t *testing.T) {
	for _, tc := range []struct {
		k, key    string
		c, copies int
		want      bool
	}{
		{"a.jpg", "a.jpg", 0, 1, true},
		{"a.jpg#c1", "a.jpg", 1, 2, true},
		{"a.jpg#c1", "a.jpg", 0, 2, false},
		{"v.mp4#f8#c0", "v.mp4", 0, 2, true},
		{"v.mp4#f8", "v.mp4", 0, 1, true},
		{"x.npz#r3", "x.npz", 0, 1, true},
		{"v.mp4#fx", "v.mp4", 0, 1, false},
		{"a.jpg.jpg", "a.jpg", 0, 1, false},
		{"b.jpg", "a.jpg", 0, 1, false},
	} {
		if got := ofItem(tc.k, tc.key, tc.c, tc.copies); got != tc.want {
			t.Errorf("ofItem(%q, %q, %d, %d) = %v", tc.k, tc.key, tc.c, tc.copies, got)
		}
	}
}

func TestPickDistinct(t *testing.T) {
	for _, tc := range []struct{ total, n int }{{10, 3}, {5, 5}, {5, 9}, {1 << 40, 64}, {0, 4}} {
		a := pickDistinct(rand.New(rand.NewPCG(7, 7)), tc.total, tc.n)
		b := pickDistinct(rand.New(rand.NewPCG(7, 7)), tc.total, tc.n)
		if !reflect.DeepEqual(a, b) || len(a) != min(tc.n, tc.total) || !slices.IsSorted(a) || len(slices.Compact(slices.Clone(a))) != len(a) {
			t.Errorf("pickDistinct(%d, %d) = %v (again %v): want %d sorted distinct, the same each time", tc.total, tc.n, a, b, min(tc.n, tc.total))
		}
		for _, v := range a {
			if v < 0 || v >= tc.total {
				t.Errorf("pickDistinct(%d, %d): %d out of range", tc.total, tc.n, v)
			}
		}
	}
}

// TestNormalizeMixed: rebuilt samples go through one temporary shard; one
// the writer will not put beside the others (another dtype, itself a
// mismatch to report) goes through a shard of its own, and every sample
// comes back as the format keeps it.
func TestNormalizeMixed(t *testing.T) {
	f32 := formats.Tensor{DType: formats.Float32, Shape: []int{2}, Data: []byte{0, 0, 128, 63, 0, 0, 0, 64}}
	u8 := formats.Tensor{DType: formats.Uint8, Shape: []int{2, 2, 1}, Data: []byte{1, 2, 3, 4}}
	want := map[string]*formats.Sample{
		"a.npy": {Key: "a.npy", Label: 0, Fields: []formats.Field{{Name: "data", Tensor: f32}}},
		"b.npy": {Key: "b.npy", Label: 1, Fields: []formats.Field{{Name: "data", Tensor: u8}}},
		"c.npy": {Key: "c.npy", Label: 2, Fields: []formats.Field{{Name: "data", Tensor: f32}}},
	}
	rb := &rebuild{opt: &RebuildOptions{Format: hdf5.Format{}, TempDir: t.TempDir()}, m: &manifest.Manifest{}}
	got, err := rb.normalize(want)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d samples back, want %d", len(got), len(want))
	}
	for k, w := range want {
		if d := diffSamples(got[k], *w); d != "" {
			t.Errorf("%s: %s", k, d)
		}
	}
}
