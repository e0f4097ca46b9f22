package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/manifest"
)

// How bench reads a shard, as Find reports it.
const (
	HDF5 = "hdf5" // arrays at fixed offsets (the reader's Spans), read with plain reads
	Tar  = "tar"  // one stream, scanned member by member
)

// Shard is one shard file and what bench needs to know to read it.
type Shard struct {
	Path     string
	Format   string                // HDF5 or Tar
	Count    int                   // samples; 0 when unknown (a tar shard without a manifest)
	Bytes    int64                 // file size
	Datasets []formats.DatasetInfo // the reader's Spans (HDF5 only), in file order
	// Reader is the shard's format, which reads its samples.
	Reader formats.ShardOpener
}

// Find lists the shards of target: a shard file, or a directory holding
// manifest.json (whose shard list and dataset offsets are used) or, failing
// that, the files reg reads. reg picks each file's format by its
// extension.
func Find(target string, reg *formats.Registry) ([]Shard, error) {
	fi, err := os.Stat(target)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		s, err := describe(target, manifestEntry(target), reg)
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
			s, err := describe(filepath.Join(target, e.File), &e.ShardInfo, reg)
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
		if e.IsDir() || reg.ForFile(e.Name()) == nil {
			continue
		}
		s, err := describe(filepath.Join(target, e.Name()), nil, reg)
		if err != nil {
			return nil, err
		}
		shards = append(shards, s)
	}
	if len(shards) == 0 {
		return nil, fmt.Errorf("%s holds no manifest.json and no shards (files ending in %s): run prep convert first", target, strings.Join(reg.Exts(), ", "))
	}
	return shards, nil
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
// manifest record; the shard's reader gives its layout (an HDF5 file
// without a record is asked for it).
func describe(path string, info *formats.ShardInfo, reg *formats.Registry) (Shard, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return Shard{}, fmt.Errorf("shard listed in the manifest: %w", err)
	}
	s := Shard{Path: path, Bytes: fi.Size()}
	f := reg.ForFile(path)
	if f == nil {
		return s, fmt.Errorf("%s: not a shard (want a file ending in %s)", path, strings.Join(reg.Exts(), ", "))
	}
	s.Reader = f
	var layout []formats.DatasetInfo
	if info != nil {
		s.Count = info.Count
		if info.Bytes != fi.Size() {
			return s, fmt.Errorf("%s is %d bytes, the manifest says %d: the shard changed since it was written (prep inspect --verify)", path, fi.Size(), info.Bytes)
		}
		if len(info.Datasets) > 0 {
			layout = info.Datasets
		}
	}
	r, err := f.Open(path, layout)
	if err != nil {
		return s, err
	}
	defer r.Close()
	s.Datasets, s.Format = r.Spans(), Tar
	if s.Datasets != nil {
		s.Format = HDF5
	}
	for _, d := range s.Datasets {
		if d.Offset >= 0 && d.Offset+d.Size > s.Bytes {
			return s, fmt.Errorf("%s: dataset %s ends at byte %d, past the file's end (%d)", path, d.Name, d.Offset+d.Size, s.Bytes)
		}
	}
	if s.Count == 0 {
		s.Count = max(r.Count(), 0)
	}
	return s, nil
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
