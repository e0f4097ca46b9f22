package formats

import (
	"fmt"
	"iter"
	"path/filepath"
	"slices"
	"strings"
)

// ShardReader reads back a shard a ShardWriter of its format wrote.
type ShardReader interface {
	// Samples yields the shard's samples in shard order, each with its
	// key, label and fields as written (Params and Source where the
	// format keeps them). The caller owns what it is handed. Iteration
	// stops at the first error, which it yields with a nil sample.
	Samples() iter.Seq2[*Sample, error]
	// Spans lists the byte ranges of the file that hold the shard's
	// arrays, in file order: each is Size bytes at Offset, plain
	// little-endian C-order elements, so a loader streams them with
	// sequential reads. It is nil for a format read as one stream (tar),
	// and Offset is -1 for an array only the format's library can read.
	Spans() []DatasetInfo
	// Count is the number of samples, or -1 when only reading the whole
	// shard tells (tar).
	Count() int
	Close() error
}

// MetaReader is implemented by the readers of formats that record the
// run's description (ShardMeta) inside each shard (HDF5's root attributes).
type MetaReader interface {
	Meta() (ShardMeta, error)
}

// ShardOpener is the read side of a ShardFormat.
type ShardOpener interface {
	// Open opens the shard at path. layout is the shard's datasets as
	// its manifest records them; with nil, the file is asked.
	Open(path string, layout []DatasetInfo) (ShardReader, error)
}

// ReadWriteFormat is a shard format with both sides.
type ReadWriteFormat interface {
	ShardFormat
	ShardOpener
}

// Registry holds the shard formats a program writes and reads, each
// registered once, so that a shard file is read by the format that
// wrote it wherever it is read.
type Registry struct {
	formats []ReadWriteFormat
	exts    map[string]ReadWriteFormat // lower-case extension → reader
}

// NewRegistry registers fs, in the order --format lists them. A later
// format with an extension an earlier one took reads nothing itself:
// tar shards of PNG and of WAV are read alike.
func NewRegistry(fs ...ReadWriteFormat) *Registry {
	r := &Registry{exts: map[string]ReadWriteFormat{}}
	for _, f := range fs {
		r.formats = append(r.formats, f)
		r.AddExt(f.Ext(), f)
	}
	return r
}

// AddExt makes files ending in ext (".hdf5") read as f's.
func (r *Registry) AddExt(ext string, f ReadWriteFormat) {
	ext = strings.ToLower(ext)
	if _, ok := r.exts[ext]; !ok {
		r.exts[ext] = f
	}
}

// Names lists the formats' names in registration order.
func (r *Registry) Names() []string {
	var names []string
	for _, f := range r.formats {
		names = append(names, f.Name())
	}
	return names
}

// Format returns the format called name, or nil.
func (r *Registry) Format(name string) ReadWriteFormat {
	for _, f := range r.formats {
		if f.Name() == name {
			return f
		}
	}
	return nil
}

// Exts lists the extensions of the files the registry reads, sorted.
func (r *Registry) Exts() []string {
	var exts []string
	for e := range r.exts {
		exts = append(exts, e)
	}
	slices.Sort(exts)
	return exts
}

// ForFile returns the format that reads the file at path, judged by its
// extension, or nil.
func (r *Registry) ForFile(path string) ReadWriteFormat {
	return r.exts[strings.ToLower(filepath.Ext(path))]
}

// Open opens the shard at path with the format its extension names; see
// ShardOpener.
func (r *Registry) Open(path string, layout []DatasetInfo) (ShardReader, error) {
	f := r.ForFile(path)
	if f == nil {
		return nil, fmt.Errorf("%s: not a shard: prep reads files ending in %s", path, strings.Join(r.Exts(), ", "))
	}
	return f.Open(path, layout)
}
