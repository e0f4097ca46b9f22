package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/hdf5"
	"github.com/prep-dev/prep/formats/manifest"
)

// Shard formats as Find reports them.
const (
	HDF5 = "hdf5"
	Tar  = "tar"
)

// Shard is one shard file and what bench needs to know to read it.
type Shard struct {
	Path     string
	Format   string                // HDF5 or Tar
	Count    int                   // samples; 0 when unknown (a tar shard without a manifest)
	Bytes    int64                 // file size
	Datasets []formats.DatasetInfo // HDF5 only
}

// Find lists the shards of target: a shard file, or a directory holding
// manifest.json (whose shard list and dataset offsets are used) or, failing
// that, .h5/.hdf5/.tar files.
func Find(target string) ([]Shard, error) {
	fi, err := os.Stat(target)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		s, err := describe(target, manifestEntry(target))
		if err != nil {
			return nil, err
		}
		return []Shard{s}, nil
	}
	var shards []Shard
	m, err := manifest.Read(target)
	switch {
	case err == nil:
		for _, e := range m.Shards {
			if e.File == "" {
				continue // every input of this shard was skipped
			}
			s, err := describe(filepath.Join(target, e.File), &e.ShardInfo)
			if err != nil {
				return nil, err
			}
			shards = append(shards, s)
		}
		if len(shards) == 0 {
			return nil, fmt.Errorf("%s: the manifest lists no shards with samples", target)
		}
		return shards, nil
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	entries, err := os.ReadDir(target)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.IsDir() || formatOf(e.Name()) == "" {
			continue
		}
		s, err := describe(filepath.Join(target, e.Name()), nil)
		if err != nil {
			return nil, err
		}
		shards = append(shards, s)
	}
	if len(shards) == 0 {
		return nil, fmt.Errorf("%s holds no manifest.json and no .h5 or .tar shards: run prep convert first", target)
	}
	return shards, nil
}

func formatOf(name string) string {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".h5", ".hdf5":
		return HDF5
	case ".tar":
		return Tar
	}
	return ""
}

// manifestEntry returns the manifest's record of a shard file, if the
// file's directory has a manifest that lists it.
func manifestEntry(path string) *formats.ShardInfo {
	m, err := manifest.Read(filepath.Dir(path))
	if err != nil {
		return nil
	}
	for _, s := range m.Shards {
		if s.File == filepath.Base(path) {
			return &s.ShardInfo
		}
	}
	return nil
}

// describe builds a Shard from the file and, when there is one, its
// manifest record; HDF5 files without one are asked for their layout.
func describe(path string, info *formats.ShardInfo) (Shard, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return Shard{}, fmt.Errorf("shard listed in the manifest: %w", err)
	}
	s := Shard{Path: path, Format: formatOf(path), Bytes: fi.Size()}
	if s.Format == "" {
		return s, fmt.Errorf("%s: not a shard (want .h5, .hdf5 or .tar)", path)
	}
	if info != nil {
		s.Count = info.Count
		if info.Bytes != fi.Size() {
			return s, fmt.Errorf("%s is %d bytes, the manifest says %d: the shard changed since it was written (prep inspect --verify)", path, fi.Size(), info.Bytes)
		}
		s.Datasets = info.Datasets
	}
	if s.Format == HDF5 && len(s.Datasets) == 0 {
		if s.Datasets, err = hdf5.Datasets(path); err != nil {
			return s, err
		}
	}
	for _, d := range s.Datasets {
		if d.Offset >= 0 && d.Offset+d.Size > s.Bytes {
			return s, fmt.Errorf("%s: dataset %s ends at byte %d, past the file's end (%d)", path, d.Name, d.Offset+d.Size, s.Bytes)
		}
	}
	if s.Format == HDF5 && s.Count == 0 {
		s.Count = countOf(s.Datasets)
	}
	return s, nil
}

// countOf infers the sample count of an HDF5 shard from its datasets.
func countOf(ds []formats.DatasetInfo) int {
	for _, name := range []string{"labels", "keys", formats.DataField} {
		i := slices.IndexFunc(ds, func(d formats.DatasetInfo) bool { return d.Name == name })
		if i >= 0 && len(ds[i].Shape) > 0 && (name != formats.DataField || !ragged(ds)) {
			return ds[i].Shape[0]
		}
	}
	return 0
}

// ragged reports whether the shard stores variable-size samples as a flat
// data dataset with offsets and shapes.
func ragged(ds []formats.DatasetInfo) bool {
	return slices.ContainsFunc(ds, func(d formats.DatasetInfo) bool { return d.Name == "offsets" })
}

// dataset returns the named dataset, or nil.
func (s *Shard) dataset(name string) *formats.DatasetInfo {
	for i := range s.Datasets {
		if s.Datasets[i].Name == name {
			return &s.Datasets[i]
		}
	}
	return nil
}

// logicalSize is the dataset's size in memory, or -1 when its dtype has no
// fixed size that bench knows.
func logicalSize(d formats.DatasetInfo) int64 {
	n := int64(d.DType.Size())
	if n == 0 {
		return -1
	}
	for _, x := range d.Shape {
		n *= int64(x)
	}
	return n
}
