// Package formattest is the conformance suite every shard format's
// writer and reader pass together, as gocloud.dev/blob's drivertest is
// for its drivers: round trips of each kind of sample the format stores,
// reproducible bytes, checksums that describe the file, and damaged or
// hostile files that fail with an error rather than read as something
// else. A format's package runs it from a test:
//
//	func TestConformance(t *testing.T) { formattest.Run(t, hdf5.Format{}, formattest.Caps{...}) }
package formattest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prep-dev/prep/formats"
)

// Caps says what a format stores, and so which cases it must pass.
type Caps struct {
	Images bool // uint8 (H,W,3) and (H,W,1) images, a fixed shape per shard
	Ragged bool // samples of one field that differ in shape within a shard
	Extra  bool // further fields after the primary one
	Groups bool // fields in a group ("npz/x"), with no "data" field
	Audio  bool // int16 and float32 (frames, channels) at a sample rate
	Clips  bool // uint8 (T,H,W,C) video clips
	// Params: the reader gives back each sample's Source and Params.
	Params bool
	// FieldName maps a field's written name to the name it reads back
	// under; nil keeps names.
	FieldName func(string) string
	// Hostile writes, at path, a shard of the format whose member names
	// point outside its folder ("../../x", "/etc/x"), as a crafted file
	// would; nil for a format without member names.
	Hostile func(t *testing.T, path string)
}

// Run runs the suite against f.
func Run(t *testing.T, f formats.ReadWriteFormat, c Caps) {
	cases := Cases(c)
	if len(cases) == 0 {
		t.Fatal("formattest: Caps enables no case")
	}
	for _, tc := range cases {
		t.Run("RoundTrip/"+tc.Name, func(t *testing.T) { roundTrip(t, f, c, tc.Samples) })
	}
	first := cases[0].Samples
	t.Run("Reproducible", func(t *testing.T) { reproducible(t, f, first) })
	t.Run("Sums", func(t *testing.T) { sums(t, f, first) })
	t.Run("Abort", func(t *testing.T) { abort(t, f, first) })
	t.Run("Truncated", func(t *testing.T) { truncated(t, f, first) })
	t.Run("Damaged", func(t *testing.T) { damaged(t, f, first) })
	if c.Hostile != nil {
		t.Run("HostileNames", func(t *testing.T) { hostile(t, f, c.Hostile) })
	}
}

// Case is one kind of sample the suite writes and reads back.
type Case struct {
	Name    string // "images", "ragged", "npz group", "audio int16", ...
	Samples []formats.Sample
}

// Cases builds the samples of each case c enables. They are the same
// bytes on every run and machine, each case's drawn from a generator
// seeded by its name alone: golden shards are made of them.
func Cases(c Caps) []Case {
	var out []Case
	add := func(name string, n int, fields func(g gen, i int) []formats.Field) []formats.Sample {
		h := fnv.New64a()
		h.Write([]byte(name))
		g := gen{rand.New(rand.NewPCG(h.Sum64(), 2))}
		s := g.samples(n, func(i int) []formats.Field { return fields(g, i) })
		out = append(out, Case{name, s})
		return s
	}
	if c.Images {
		add("images", 6, func(g gen, _ int) []formats.Field {
			return []formats.Field{g.field(formats.DataField, formats.Uint8, 5, 7, 3)}
		})
		add("grey", 3, func(g gen, _ int) []formats.Field {
			return []formats.Field{g.field(formats.DataField, formats.Uint8, 4, 6, 1)}
		})
	}
	if c.Images && c.Ragged {
		add("ragged", 5, func(g gen, i int) []formats.Field {
			return []formats.Field{g.field(formats.DataField, formats.Uint8, 3+i, 9-i, 3)}
		})
	}
	if c.Images && c.Extra {
		add("extra fields", 4, func(g gen, _ int) []formats.Field {
			return []formats.Field{
				g.field(formats.DataField, formats.Uint8, 6, 6, 3),
				g.field("boxes", formats.Float32, 2, 4),
				g.field("mask", formats.Bool, 6, 6),
			}
		})
	}
	if c.Groups {
		add("npz group", 4, func(g gen, i int) []formats.Field {
			return []formats.Field{
				g.field("npz/a", formats.Float64, 3),
				g.field("npz/img", formats.Uint8, 2+i, 3, 3),
				g.field("npz/z", formats.Int32, 2, 2),
			}
		})
	}
	if c.Audio {
		for _, dt := range []formats.DType{formats.Int16, formats.Float32} {
			s := add("audio "+string(dt), 4, func(g gen, i int) []formats.Field {
				return []formats.Field{g.field(formats.DataField, dt, 100+37*i, 1+i%2)}
			})
			for i := range s {
				s[i].Rate = 16000
			}
		}
	}
	if c.Clips {
		add("clips", 3, func(g gen, _ int) []formats.Field {
			return []formats.Field{g.field(formats.DataField, formats.Uint8, 3, 4, 5, 3)}
		})
	}
	return out
}

type gen struct{ r *rand.Rand }

// field is a tensor of random bytes; bools are 0 or 1, and floats are
// whole numbers, so that every byte pattern is one the dtype holds.
func (g gen) field(name string, dt formats.DType, shape ...int) formats.Field {
	t := formats.Tensor{DType: dt, Shape: shape}
	n := t.Len()
	t.Data = make([]byte, n*dt.Size())
	for i := range n {
		e := t.Data[i*dt.Size() : (i+1)*dt.Size()]
		switch dt {
		case formats.Bool:
			e[0] = byte(g.r.IntN(2))
		case formats.Float32:
			binary.LittleEndian.PutUint32(e, math.Float32bits(float32(g.r.IntN(2000)-1000)))
		case formats.Float64:
			binary.LittleEndian.PutUint64(e, math.Float64bits(float64(g.r.IntN(2000)-1000)))
		default:
			for j := range e {
				e[j] = byte(g.r.Uint32())
			}
		}
	}
	return formats.Field{Name: name, Tensor: t}
}

// samples makes n samples with distinct keys (one longer than a USTAR
// name, one not ASCII), labels with and without a class, and params.
func (g gen) samples(n int, fields func(i int) []formats.Field) []formats.Sample {
	out := make([]formats.Sample, n)
	for i := range out {
		key := fmt.Sprintf("class%d/img-%03d.jpg#c0", i%3, i)
		switch i {
		case 1:
			key = "naïve/" + strings.Repeat("long", 30) + ".jpg"
		case 2:
			key = "flat.png"
		}
		label := int64(i % 3)
		if i == 2 {
			label = formats.NoLabel
		}
		out[i] = formats.Sample{
			Key: key, Label: label, Source: "/data/" + key, Fields: fields(i),
			Params: map[string]any{"crop": []any{float64(i), float64(2 * i)}, "hflip": i%2 == 0},
		}
	}
	return out
}

// write writes samples to a new shard in a fresh folder and returns its
// path and description.
func write(t *testing.T, f formats.ReadWriteFormat, samples []formats.Sample) (string, formats.ShardInfo) {
	t.Helper()
	return WriteShard(t, f, t.TempDir(), samples)
}

// Meta is what the suite's shards record about their run.
var Meta = formats.ShardMeta{Version: "formattest", Recipe: "resize=8", Seed: 7, Classes: []string{"class0", "class1", "class2"}}

// WriteShard writes samples with f to dir/shard-000000 and returns the
// shard's path and description. It checks on the way that Add copies
// what it keeps.
func WriteShard(t testing.TB, f formats.ReadWriteFormat, dir string, samples []formats.Sample) (string, formats.ShardInfo) {
	t.Helper()
	path := filepath.Join(dir, "shard-000000"+f.Ext())
	w, err := f.Create(path, Meta)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := w.(formats.Expecter); ok {
		e.Expect(len(samples))
	}
	for i := range samples {
		s := clone(samples[i])
		if err := w.Add(&s); err != nil {
			w.Abort()
			t.Fatalf("add %s: %v", s.Key, err)
		}
		clear(s.Fields[0].Data) // Add must have copied what it keeps
	}
	info, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	return path, info
}

func clone(s formats.Sample) formats.Sample {
	s.Fields = slices.Clone(s.Fields)
	for i := range s.Fields {
		s.Fields[i].Data = slices.Clone(s.Fields[i].Data)
		s.Fields[i].Shape = slices.Clone(s.Fields[i].Shape)
	}
	return s
}

// readAll opens path with layout and reads every sample, failing on
// any error.
func readAll(t *testing.T, f formats.ReadWriteFormat, path string, layout []formats.DatasetInfo) []*formats.Sample {
	t.Helper()
	r, err := f.Open(path, layout)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer r.Close()
	var got []*formats.Sample
	for s, err := range r.Samples() {
		if err != nil {
			t.Fatalf("read sample %d: %v", len(got), err)
		}
		got = append(got, s)
	}
	if n := r.Count(); n != -1 && n != len(got) {
		t.Errorf("Count %d, read %d samples", n, len(got))
	}
	return got
}

func roundTrip(t *testing.T, f formats.ReadWriteFormat, c Caps, want []formats.Sample) {
	path, info := write(t, f, want)
	if info.Count != len(want) || info.File != filepath.Base(path) {
		t.Errorf("info: %d samples in %s, want %d in %s", info.Count, info.File, len(want), filepath.Base(path))
	}
	// The manifest's layout and the file's own give the same samples.
	for _, layout := range [][]formats.DatasetInfo{info.Datasets, nil} {
		got := readAll(t, f, path, layout)
		if len(got) != len(want) {
			t.Fatalf("layout %v: read %d samples, wrote %d", layout != nil, len(got), len(want))
		}
		for i := range want {
			if d := Diff(c, &want[i], got[i]); d != "" {
				t.Errorf("sample %d (%s): %s", i, want[i].Key, d)
			}
		}
	}
	spans(t, f, path, info, want)
}

// Diff says how got, read back, differs from want, as written, or "".
func Diff(c Caps, want, got *formats.Sample) string {
	if got.Key != want.Key || got.Label != want.Label || got.Rate != want.Rate {
		return fmt.Sprintf("key %q label %d rate %d, want %q %d %d", got.Key, got.Label, got.Rate, want.Key, want.Label, want.Rate)
	}
	if c.Params {
		if got.Source != want.Source || fmt.Sprint(got.Params) != fmt.Sprint(want.Params) {
			return fmt.Sprintf("source %q params %v, want %q %v", got.Source, got.Params, want.Source, want.Params)
		}
	}
	name := c.FieldName
	if name == nil {
		name = func(s string) string { return s }
	}
	if len(got.Fields) != len(want.Fields) {
		return fmt.Sprintf("%d fields, want %d", len(got.Fields), len(want.Fields))
	}
	for _, w := range want.Fields {
		i := slices.IndexFunc(got.Fields, func(f formats.Field) bool { return f.Name == name(w.Name) })
		if i < 0 {
			return fmt.Sprintf("no field %s", name(w.Name))
		}
		g := got.Fields[i]
		if g.DType != w.DType || !slices.Equal(g.Shape, w.Shape) || !bytes.Equal(g.Data, w.Data) {
			return fmt.Sprintf("field %s: %s%v (%d bytes), want %s%v, or other bytes", w.Name, g.DType, g.Shape, len(g.Data), w.DType, w.Shape)
		}
	}
	if got.Fields[0].Name != name(want.Fields[0].Name) && want.Fields[0].Name == formats.DataField {
		return "the data field is not first"
	}
	return ""
}

// spans checks the reader's spans against the file: sorted, inside it,
// apart, and for a fixed-shape data field holding the samples' bytes
// back to back, which is what a loader streams.
func spans(t *testing.T, f formats.ReadWriteFormat, path string, info formats.ShardInfo, want []formats.Sample) {
	r, err := f.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sp := r.Spans()
	if sp == nil {
		return
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	end := int64(0)
	for _, d := range sp {
		if d.Size == 0 {
			continue
		}
		if d.Offset < end || d.Offset+d.Size > int64(len(file)) {
			t.Fatalf("span %s [%d, %d) overlaps the one before (ends %d) or passes the file's end (%d)", d.Name, d.Offset, d.Offset+d.Size, end, len(file))
		}
		end = d.Offset + d.Size
	}
	i := slices.IndexFunc(sp, func(d formats.DatasetInfo) bool { return d.Name == formats.DataField })
	if i < 0 || len(sp[i].Shape) < 1 || sp[i].Shape[0] != len(want) {
		return // no data field, or a ragged one
	}
	var all []byte
	for _, s := range want {
		all = append(all, s.Fields[0].Data...)
	}
	if d := sp[i]; !bytes.Equal(file[d.Offset:d.Offset+d.Size], all) {
		t.Errorf("the data span's bytes are not the samples' bytes in order")
	}
	if !slices.EqualFunc(sortedByName(sp), sortedByName(info.Datasets), func(a, b formats.DatasetInfo) bool {
		return a.Name == b.Name && a.Offset == b.Offset && a.Size == b.Size && a.DType == b.DType && slices.Equal(a.Shape, b.Shape)
	}) {
		t.Errorf("the file's spans %v differ from the writer's record %v", sp, info.Datasets)
	}
}

func sortedByName(d []formats.DatasetInfo) []formats.DatasetInfo {
	d = slices.Clone(d)
	slices.SortFunc(d, func(a, b formats.DatasetInfo) int { return strings.Compare(a.Name, b.Name) })
	return d
}

func reproducible(t *testing.T, f formats.ReadWriteFormat, samples []formats.Sample) {
	p1, i1 := write(t, f, samples)
	p2, i2 := write(t, f, samples)
	b1, _ := os.ReadFile(p1)
	b2, _ := os.ReadFile(p2)
	if !bytes.Equal(b1, b2) || i1.SHA256 != i2.SHA256 {
		t.Errorf("the same samples gave different files (%s, %s)", i1.SHA256, i2.SHA256)
	}
}

// sums checks that the writer's size and checksums are the file's.
func sums(t *testing.T, f formats.ReadWriteFormat, samples []formats.Sample) {
	path, info := write(t, f, samples)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sha := sha256.Sum256(b)
	crc := crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
	if info.Bytes != int64(len(b)) || info.SHA256 != hex.EncodeToString(sha[:]) || info.CRC32C != fmt.Sprintf("%08x", crc) {
		t.Errorf("info says %d bytes, sha256 %s, crc32c %s; the file has %d, %x, %08x", info.Bytes, info.SHA256, info.CRC32C, len(b), sha, crc)
	}
	if _, err := os.Stat(formats.TempName(path)); !os.IsNotExist(err) {
		t.Errorf("Close left %s: %v", formats.TempName(path), err)
	}
}

func abort(t *testing.T, f formats.ReadWriteFormat, samples []formats.Sample) {
	dir := t.TempDir()
	path := filepath.Join(dir, "shard-000000"+f.Ext())
	w, err := f.Create(path, formats.ShardMeta{})
	if err != nil {
		t.Fatal(err)
	}
	s := clone(samples[0])
	if err := w.Add(&s); err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("Abort left %v", left)
	}
}

// truncated cuts the shard at points inside it (never at a 512-byte
// record boundary, where a tar that ends is indistinguishable from a
// whole one of fewer samples: the manifest's size and count tell those)
// and wants an error, with the manifest's layout and without.
func truncated(t *testing.T, f formats.ReadWriteFormat, samples []formats.Sample) {
	path, info := write(t, f, samples)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, frac := range []float64{0.1, 0.5, 0.9} {
		cut := int(float64(len(b))*frac) | 7
		if err := os.WriteFile(path, b[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		for _, layout := range [][]formats.DatasetInfo{info.Datasets, nil} {
			if n, err := readErr(f, path, layout); err == nil {
				t.Errorf("cut at %d of %d bytes (layout from the manifest: %v): read %d samples, no error", cut, len(b), layout != nil, n)
			}
		}
	}
}

// readErr reads every sample and returns the first error.
func readErr(f formats.ReadWriteFormat, path string, layout []formats.DatasetInfo) (n int, err error) {
	r, err := f.Open(path, layout)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	for _, err := range r.Samples() {
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// damaged flips bytes in the first sample's payload. Whatever the reader
// makes of it, the file no longer matches the writer's checksum, which
// is how prep inspect --verify tells; and reading must not panic.
func damaged(t *testing.T, f formats.ReadWriteFormat, samples []formats.Sample) {
	path, info := write(t, f, samples)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(b, samples[0].Fields[0].Data[:min(16, len(samples[0].Fields[0].Data))])
	if at < 0 {
		at = len(b) / 2 // a format that transforms the bytes (PNG filters)
	}
	b[at] ^= 0x5a
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) == info.SHA256 {
		t.Fatal("a damaged file has the writer's checksum")
	}
	readErr(f, path, info.Datasets)
	readErr(f, path, nil)
}

func hostile(t *testing.T, f formats.ReadWriteFormat, make func(*testing.T, string)) {
	path := filepath.Join(t.TempDir(), "shard-000000"+f.Ext())
	make(t, path)
	n, err := readErr(f, path, nil)
	if err == nil {
		t.Fatalf("a shard whose member names leave its folder read %d samples, no error", n)
	}
	if !strings.Contains(err.Error(), "..") && !strings.Contains(err.Error(), "/etc") {
		t.Errorf("the error does not name the member: %v", err)
	}
}
