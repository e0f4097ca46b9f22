package hdf5

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/prep-dev/prep/formats"
)

// Open opens a shard for reading. Samples are read with plain reads at the
// datasets' offsets, as any reader of the format may (FORMAT.md §5.5), so
// the library is asked only for a layout the caller does not pass.
func (Format) Open(path string, layout []formats.DatasetInfo) (formats.ShardReader, error) {
	if layout == nil {
		var err error
		if layout, err = Datasets(path); err != nil {
			return nil, err
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &reader{path: path, f: f, layout: slices.Clone(layout)}, nil
}

// reader is an open HDF5 shard.
type reader struct {
	path   string
	f      *os.File
	layout []formats.DatasetInfo
}

func (r *reader) Close() error { return r.f.Close() }

// Meta reads the root attributes through the library.
func (r *reader) Meta() (formats.ShardMeta, error) { return Meta(r.path) }

// Spans returns the datasets in file order; an empty shard has none,
// but the list is not nil.
func (r *reader) Spans() []formats.DatasetInfo {
	s := append(make([]formats.DatasetInfo, 0, len(r.layout)), r.layout...) // never nil: HDF5 has spans
	slices.SortStableFunc(s, func(a, b formats.DatasetInfo) int { return cmp.Compare(a.Offset, b.Offset) })
	return s
}

// Count reads the sample count off the labels or keys dataset, or off
// data when it is not ragged: the first dimension of each is N.
func (r *reader) Count() int {
	byName := r.byName()
	for _, name := range []string{"labels", "keys", formats.DataField} {
		d, ok := byName[name]
		if !ok || len(d.Shape) == 0 {
			continue
		}
		if _, ragged := byName["offsets"]; name == formats.DataField && ragged {
			continue
		}
		return d.Shape[0]
	}
	return 0
}

func (r *reader) byName() map[string]formats.DatasetInfo {
	m := make(map[string]formats.DatasetInfo, len(r.layout))
	for _, d := range r.layout {
		m[d.Name] = d
	}
	return m
}

// Samples yields every sample; the fields come in name order, data
// first. Audio samples get the shard's sample_rate attribute.
func (r *reader) Samples() iter.Seq2[*formats.Sample, error] {
	return func(yield func(*formats.Sample, error) bool) {
		keys, labels, fields, err := r.index()
		rate := 0
		if err == nil && len(keys) > 0 {
			rate, err = SampleRate(r.path)
		}
		if err != nil {
			yield(nil, fmt.Errorf("%s: %w", r.path, err))
			return
		}
		for i, k := range keys {
			s := &formats.Sample{Key: k, Label: labels[i], Rate: rate}
			for _, fd := range fields {
				t, err := fd.sample(r.f, i, len(keys))
				if err != nil {
					yield(nil, fmt.Errorf("%s: dataset %s, sample %d: %w", r.path, fd.data.Name, i, err))
					return
				}
				s.Fields = append(s.Fields, formats.Field{Name: fd.data.Name, Tensor: t})
			}
			if !yield(s, nil) {
				return
			}
		}
	}
}

// index reads the keys, the labels and where each field's samples lie.
func (r *reader) index() ([]string, []int64, []*field, error) {
	byName := r.byName()
	keys, err := readKeys(r.f, byName["keys"])
	if err != nil {
		return nil, nil, nil, err
	}
	labels, err := readInt64s(r.f, byName["labels"])
	if err != nil {
		return nil, nil, nil, err
	}
	if len(labels) != len(keys) {
		return nil, nil, nil, fmt.Errorf("%d labels for %d keys", len(labels), len(keys))
	}
	fields, err := findFields(r.f, byName)
	return keys, labels, fields, err
}

// field is one field of a shard: its dataset and, when ragged, the
// datasets that place each sample in it (FORMAT.md §5.6).
type field struct {
	data                   formats.DatasetInfo
	offsets, shapes, ranks []int64 // ragged only
}

// companion names the ragged companion of field: "offsets" beside data,
// "npz/x_offsets" beside npz/x.
func companion(field, suffix string) string {
	if field == formats.DataField {
		return suffix[1:]
	}
	return field + suffix
}

// findFields finds the fields among the datasets: all but labels, keys
// and the ragged companions of another dataset, data first, then by name.
func findFields(f *os.File, byName map[string]formats.DatasetInfo) ([]*field, error) {
	isCompanion := map[string]bool{}
	for name := range byName {
		for _, suffix := range formats.RaggedSuffixes {
			if _, ok := byName[companion(name, suffix)]; ok && name != "labels" && name != "keys" {
				isCompanion[companion(name, suffix)] = true
			}
		}
	}
	var fields []*field
	for name, d := range byName {
		if name == "labels" || name == "keys" || isCompanion[name] {
			continue
		}
		fd := &field{data: d}
		if off, ok := byName[companion(name, "_offsets")]; ok {
			var err error
			if fd.offsets, err = readInt64s(f, off); err != nil {
				return nil, err
			}
			if fd.shapes, err = readInt64s(f, byName[companion(name, "_shapes")]); err != nil {
				return nil, err
			}
			if rk, ok := byName[companion(name, "_ranks")]; ok {
				if fd.ranks, err = readInt64s(f, rk); err != nil {
					return nil, err
				}
			}
		}
		fields = append(fields, fd)
	}
	slices.SortFunc(fields, func(a, b *field) int {
		if (a.data.Name == formats.DataField) != (b.data.Name == formats.DataField) {
			if a.data.Name == formats.DataField {
				return -1
			}
			return 1
		}
		return strings.Compare(a.data.Name, b.data.Name)
	})
	return fields, nil
}

// sample reads sample i of n from the field.
func (fd *field) sample(f *os.File, i, n int) (formats.Tensor, error) {
	d := fd.data
	t := formats.Tensor{DType: d.DType}
	elem := int64(d.DType.Size())
	if elem == 0 {
		return t, fmt.Errorf("unknown dtype %q", d.DType)
	}
	if fd.offsets == nil {
		if len(d.Shape) == 0 || d.Shape[0] != n {
			return t, fmt.Errorf("shape %v, want %d rows", d.Shape, n)
		}
		t.Shape = slices.Clone(d.Shape[1:])
		size := int64(t.Len()) * elem
		var err error
		t.Data, err = readRange(f, d, int64(i)*size, size)
		return t, err
	}
	if len(fd.offsets) != n+1 || n == 0 || len(fd.shapes)%n != 0 {
		return t, fmt.Errorf("ragged layout: %d offsets, %d shape values for %d samples", len(fd.offsets), len(fd.shapes), n)
	}
	width := len(fd.shapes) / n
	rank := width
	if fd.ranks != nil {
		if len(fd.ranks) != n || fd.ranks[i] < 0 || fd.ranks[i] > int64(width) {
			return t, fmt.Errorf("ragged layout: rank of sample %d out of range", i)
		}
		rank = int(fd.ranks[i])
	}
	for _, v := range fd.shapes[i*width : i*width+rank] {
		t.Shape = append(t.Shape, int(v))
	}
	start, end := fd.offsets[i], fd.offsets[i+1]
	if end < start {
		return t, fmt.Errorf("ragged layout: offsets %d, %d run backwards", start, end)
	}
	var err error
	if t.Data, err = readRange(f, d, start*elem, (end-start)*elem); err != nil {
		return t, err
	}
	return t, t.Validate()
}

// readRange reads n bytes at off within dataset d.
func readRange(f *os.File, d formats.DatasetInfo, off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off+n > d.Size {
		return nil, fmt.Errorf("bytes [%d, %d) outside the dataset's %d", off, off+n, d.Size)
	}
	b := make([]byte, n)
	if n == 0 {
		return b, nil
	}
	if d.Offset < 0 {
		return nil, errors.New("no file offset: not a contiguous dataset")
	}
	if _, err := f.ReadAt(b, d.Offset+off); err != nil {
		return nil, fmt.Errorf("read at byte %d: %w", d.Offset+off, err)
	}
	return b, nil
}

func readInt64s(f *os.File, d formats.DatasetInfo) ([]int64, error) {
	if d.Name == "" {
		return nil, errors.New("a dataset the layout needs is missing")
	}
	b, err := readRange(f, d, 0, d.Size)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", d.Name, err)
	}
	v := make([]int64, len(b)/8)
	for i := range v {
		v[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v, nil
}

// readKeys reads the keys dataset: fixed-width strings, NUL-padded
// (FORMAT.md §5.4).
func readKeys(f *os.File, d formats.DatasetInfo) ([]string, error) {
	w, err := strconv.Atoi(strings.TrimPrefix(string(d.DType), "S"))
	if d.Name == "" || err != nil || w <= 0 || len(d.Shape) != 1 {
		return nil, fmt.Errorf("no keys dataset of fixed-width strings (dtype %q)", d.DType)
	}
	b, err := readRange(f, d, 0, d.Size)
	if err != nil {
		return nil, fmt.Errorf("dataset keys: %w", err)
	}
	if len(b) != w*d.Shape[0] {
		return nil, fmt.Errorf("dataset keys: %d bytes for %d keys of %d", len(b), d.Shape[0], w)
	}
	keys := make([]string, d.Shape[0])
	for i := range keys {
		keys[i] = string(bytes.TrimRight(b[i*w:(i+1)*w], "\x00"))
	}
	return keys, nil
}
