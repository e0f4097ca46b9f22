package hdf5

import (
	"fmt"
	"sort"

	"gonum.org/v1/hdf5"

	"github.com/prep-dev/prep/formats"
)

// Datasets describes every dataset of an HDF5 file, those in groups named
// by their path ("npz/x"), in name order. Offset is -1 for a dataset that
// is chunked or filtered, which can only be read through the library.
func Datasets(path string) ([]formats.DatasetInfo, error) {
	lockLib()
	defer unlockLib()
	f, err := hdf5.OpenFile(path, hdf5.F_ACC_RDONLY)
	if err != nil {
		return nil, fmt.Errorf("open %s: not a readable HDF5 file: %w", path, err)
	}
	defer f.Close()
	infos, err := walk(f, &f.CommonFG, "")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
	return infos, nil
}

// walk describes the datasets in g and its subgroups; prefix is g's path.
func walk(f *hdf5.File, g *hdf5.CommonFG, prefix string) ([]formats.DatasetInfo, error) {
	n, err := g.NumObjects()
	if err != nil {
		return nil, err
	}
	var infos []formats.DatasetInfo
	for i := uint(0); i < n; i++ {
		typ, err := g.ObjectTypeByIndex(i)
		if err != nil || (typ != hdf5.H5G_DATASET && typ != hdf5.H5G_GROUP) {
			continue
		}
		name, err := g.ObjectNameByIndex(i)
		if err != nil {
			return nil, err
		}
		name = prefix + name
		if typ == hdf5.H5G_GROUP {
			sub, err := f.OpenGroup(name)
			if err != nil {
				return nil, fmt.Errorf("group %s: %w", name, err)
			}
			more, err := walk(f, &sub.CommonFG, name+"/")
			sub.Close()
			if err != nil {
				return nil, err
			}
			infos = append(infos, more...)
			continue
		}
		info, err := describe(f, name)
		if err != nil {
			return nil, fmt.Errorf("dataset %s: %w", name, err)
		}
		infos = append(infos, info)
	}
	return infos, nil
}

func describe(f *hdf5.File, name string) (formats.DatasetInfo, error) {
	ds, err := f.OpenDataset(name)
	if err != nil {
		return formats.DatasetInfo{}, err
	}
	defer ds.Close()
	space := ds.Space()
	defer space.Close()
	dims, _, err := space.SimpleExtentDims()
	if err != nil {
		return formats.DatasetInfo{}, err
	}
	t, err := ds.Datatype()
	if err != nil {
		return formats.DatasetInfo{}, err
	}
	defer t.Close()
	info := formats.DatasetInfo{Name: name, DType: dtypeOf(t), Offset: -1, Size: storageSize(ds)}
	for _, d := range dims {
		info.Shape = append(info.Shape, int(d))
	}
	if isPlain(ds) {
		info.Offset = datasetOffset(ds)
	}
	return info, nil
}

// dtypeOf names an HDF5 type the way numpy would; types prep does not
// write are described by class and size.
func dtypeOf(t *hdf5.Datatype) formats.DType {
	class, size, signed, big := typeInfo(t)
	order := ""
	if big {
		order = ">"
	}
	switch class {
	case classInteger:
		if signed {
			return formats.DType(fmt.Sprintf("%sint%d", order, 8*size))
		}
		return formats.DType(fmt.Sprintf("%suint%d", order, 8*size))
	case classFloat:
		return formats.DType(fmt.Sprintf("%sfloat%d", order, 8*size))
	case classString:
		return formats.DType(fmt.Sprintf("S%d", size))
	case classEnum:
		if size == 1 {
			return formats.Bool
		}
	case classCompound:
		return formats.DType(fmt.Sprintf("complex%d", 8*size))
	}
	return formats.DType(fmt.Sprintf("class%d/%dB", class, size))
}

// ReadDataset reads a whole dataset through the HDF5 library into dst,
// which must hold exactly its elements (shape × element size; for a
// compressed dataset that is more than it stores). bench-read uses it to
// compare the library's speed with plain reads.
func ReadDataset(path, name string, dst []byte) error {
	lockLib()
	defer unlockLib()
	f, err := hdf5.OpenFile(path, hdf5.F_ACC_RDONLY)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	ds, err := f.OpenDataset(name)
	if err != nil {
		return fmt.Errorf("%s: dataset %s: %w", path, name, err)
	}
	defer ds.Close()
	size, err := memorySize(ds)
	if err != nil {
		return fmt.Errorf("%s: dataset %s: %w", path, name, err)
	}
	if size != int64(len(dst)) {
		return fmt.Errorf("%s: dataset %s holds %d bytes, buffer has %d", path, name, size, len(dst))
	}
	if len(dst) == 0 {
		return nil
	}
	return ds.Read(&dst[0])
}

// memorySize is the dataset's size once read: elements × element size.
func memorySize(ds *hdf5.Dataset) (int64, error) {
	space := ds.Space()
	defer space.Close()
	t, err := ds.Datatype()
	if err != nil {
		return 0, err
	}
	defer t.Close()
	return int64(space.SimpleExtentNPoints()) * int64(t.Size()), nil
}

// Meta reads the run description a shard records in its root group's
// attributes: prep_version, recipe, seed and the class names (classes,
// one per line, or class_names).
func Meta(path string) (formats.ShardMeta, error) {
	var m formats.ShardMeta
	err := withRoot(path, func(root *hdf5.Group) error {
		var err error
		m, err = meta(path, root)
		return err
	})
	return m, err
}

// meta reads Meta's attributes off the root group of the shard at path.
func meta(path string, root *hdf5.Group) (formats.ShardMeta, error) {
	var m formats.ShardMeta
	for _, a := range []struct {
		name string
		dst  *string
	}{{"prep_version", &m.Version}, {"recipe", &m.Recipe}} {
		v, err := stringAttrValue(root, a.name)
		if err != nil {
			return m, fmt.Errorf("%s: attribute %s: %w (not a shard written by prep)", path, a.name, err)
		}
		*a.dst = v
	}
	classes, err := readClasses(root)
	if err != nil {
		return m, fmt.Errorf("%s: %w", path, err)
	}
	m.Classes = classes
	attr, err := root.OpenAttribute("seed")
	if err != nil {
		return m, fmt.Errorf("%s: attribute seed: %w (not a shard written by prep)", path, err)
	}
	defer attr.Close()
	var seed uint64 // not &m.Seed: cgo refuses a pointer into a struct holding pointers
	if err := attr.Read(&seed, hdf5.T_STD_U64LE); err != nil {
		return m, fmt.Errorf("%s: attribute seed: %w", path, err)
	}
	m.Seed = seed
	return m, nil
}

// readClasses reads what writeClasses writes: the attribute class_names
// when the shard has it, else classes split at newlines.
func readClasses(root *hdf5.Group) ([]string, error) {
	list, err := hasAttr(root.ID(), "class_names")
	if err != nil {
		return nil, err
	}
	if !list {
		joined, err := stringAttrValue(root, "classes")
		if err != nil {
			return nil, fmt.Errorf("attribute classes: %w (not a shard written by prep)", err)
		}
		return splitClasses(joined), nil
	}
	attr, err := root.OpenAttribute("class_names")
	if err != nil {
		return nil, fmt.Errorf("attribute class_names: %w", err)
	}
	defer attr.Close()
	classes, err := readStringListAttr(attr.ID())
	if err != nil {
		return nil, fmt.Errorf("attribute class_names: %w (not a shard written by prep)", err)
	}
	return classes, nil
}

// SampleRate reads an audio shard's sample_rate root attribute (Hz), or
// returns 0 for a shard of something else, which has none.
func SampleRate(path string) (int, error) {
	var rate int64
	err := withRoot(path, func(root *hdf5.Group) error {
		attr, err := root.OpenAttribute("sample_rate")
		if err != nil {
			return nil // not audio
		}
		defer attr.Close()
		if err := attr.Read(&rate, hdf5.T_STD_I64LE); err != nil {
			return fmt.Errorf("%s: attribute sample_rate: %w", path, err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return int(rate), nil
}

// withRoot opens the shard at path through the library and calls fn with
// its root group, which holds the run's attributes.
func withRoot(path string, fn func(root *hdf5.Group) error) error {
	lockLib()
	defer unlockLib()
	f, err := hdf5.OpenFile(path, hdf5.F_ACC_RDONLY)
	if err != nil {
		return fmt.Errorf("open %s: not a readable HDF5 file: %w", path, err)
	}
	defer f.Close()
	root, err := f.OpenGroup("/")
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer root.Close()
	return fn(root)
}

// stringAttrValue reads a string attribute: variable-length UTF-8, or
// fixed-length, as shards written before those have them. gonum's
// Attribute.Read of a string hands cgo a Go pointer to a Go pointer, which
// the runtime refuses, so cgo reads it.
func stringAttrValue(g *hdf5.Group, name string) (string, error) {
	attr, err := g.OpenAttribute(name)
	if err != nil {
		return "", err
	}
	defer attr.Close()
	return readStringAttr(attr.ID())
}
