package hdf5

import (
	"fmt"
	"sort"

	"gonum.org/v1/hdf5"

	"github.com/prep-dev/prep/formats"
)

// Datasets describes every dataset in the root group of an HDF5 file, in
// name order. Offset is -1 for a dataset that is chunked or filtered, which
// can only be read through the library.
func Datasets(path string) ([]formats.DatasetInfo, error) {
	lockLib()
	defer unlockLib()
	f, err := hdf5.OpenFile(path, hdf5.F_ACC_RDONLY)
	if err != nil {
		return nil, fmt.Errorf("open %s: not a readable HDF5 file: %w", path, err)
	}
	defer f.Close()
	n, err := f.NumObjects()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var infos []formats.DatasetInfo
	for i := uint(0); i < n; i++ {
		typ, err := f.ObjectTypeByIndex(i)
		if err != nil || typ != hdf5.H5G_DATASET {
			continue
		}
		name, err := f.ObjectNameByIndex(i)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		info, err := describe(f, name)
		if err != nil {
			return nil, fmt.Errorf("%s: dataset %s: %w", path, name, err)
		}
		infos = append(infos, info)
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
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
