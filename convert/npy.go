package convert

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/npy"
)

// NPYOptions configure the .npy/.npz handler.
type NPYOptions struct {
	// SplitAxis is -1 to make each file one sample, or 0 to make each row
	// along axis 0 a sample (a file of N examples stacked in one array).
	SplitAxis int
	// MaxSampleBytes bounds what an .npz's compressed members may inflate
	// to (0: no bound); an .npy is read whole, so its size is the file's.
	MaxSampleBytes int64
}

// NewNPYHandler reads .npy files (one field, "data") and .npz archives
// (one field per member, sorted by name, named NPZField(member)). Numeric arrays are passed
// through unchanged: recipes apply to images and audio, so every copy of
// an array is the same and Params is nil.
//
// With SplitAxis 0 every field is split along axis 0 into samples keyed
// "KEY#r<row>"; all fields of an .npz must then have the same length
// along axis 0. The samples share memory with the input.
func NewNPYHandler(opt NPYOptions) Handler {
	return HandlerFunc(func(_ context.Context, in *Input, _ int, _ *rand.Rand) ([]formats.Sample, error) {
		if opt.SplitAxis != -1 && opt.SplitAxis != 0 {
			return nil, Fatal(fmt.Errorf("split axis %d is not supported: use -1 (a file is a sample) or 0 (a row is a sample)", opt.SplitAxis))
		}
		var fields []formats.Field
		if ext(in.Key) == ".npz" {
			// The pipeline records a skipped input under its key, so
			// errors here do not repeat it.
			fs, err := npy.ParseNPZ(in.Data, opt.MaxSampleBytes)
			if err != nil {
				return nil, err
			}
			for i := range fs {
				fs[i].Name = NPZField(fs[i].Name)
			}
			fields = fs
		} else {
			t, err := npy.Parse(in.Data)
			if err != nil {
				return nil, err
			}
			fields = []formats.Field{{Name: formats.DataField, Tensor: t}}
		}
		if opt.SplitAxis == -1 {
			return []formats.Sample{{Key: in.Key, Source: in.Source, Label: in.Label, Fields: fields}}, nil
		}
		return splitRows(in, fields)
	})
}

// NPZPrefix is the HDF5 group that .npz members are stored in.
const NPZPrefix = "npz/"

// NPZField names the field of an .npz member: "npz/" + the member name,
// so that every member becomes a dataset of group npz in an HDF5 shard,
// even one named labels, keys, offsets or shapes (names the writer uses in
// the root group). Within the group, a name is percent-escaped where HDF5
// or the ragged layout would misread it: "%" as %25, "/" as %2F, a leading
// "." as %2E, and the "_" of a trailing _offsets, _shapes or _ranks as
// %5F (so "x_offsets" is "x%5Foffsets", never the offsets of a ragged
// "x"). Every other name is kept as is; the mapping is one to one.
func NPZField(member string) string {
	var b strings.Builder
	b.WriteString(NPZPrefix)
	cut := -1
	for _, suffix := range formats.RaggedSuffixes {
		if strings.HasSuffix(member, suffix) {
			cut = len(member) - len(suffix)
		}
	}
	for i := 0; i < len(member); i++ {
		switch c := member[i]; {
		case c == '%', c == '/', c == '.' && i == 0, i == cut:
			fmt.Fprintf(&b, "%%%02X", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// arrayName is how errors name the array of a field: an .npz member's name.
func arrayName(field string) string { return strings.TrimPrefix(field, NPZPrefix) }

// splitRows makes one sample per row along axis 0 of every field.
func splitRows(in *Input, fields []formats.Field) ([]formats.Sample, error) {
	rows := -1
	for _, f := range fields {
		if len(f.Shape) == 0 {
			return nil, fmt.Errorf("array %s is 0-d and cannot be split into rows; use split axis -1", arrayName(f.Name))
		}
		switch {
		case rows < 0:
			rows = f.Shape[0]
		case f.Shape[0] != rows:
			return nil, fmt.Errorf("cannot split into rows: array %s has %d rows along axis 0, array %s has %d; every array must have the same number",
				arrayName(fields[0].Name), rows, arrayName(f.Name), f.Shape[0])
		}
	}
	if rows == 0 {
		return nil, fmt.Errorf("array %s has no rows along axis 0, so there are no samples", arrayName(fields[0].Name))
	}
	samples := make([]formats.Sample, rows)
	for r := range samples {
		samples[r] = formats.Sample{
			Key:    in.Key + "#r" + strconv.Itoa(r),
			Source: in.Source,
			Label:  in.Label,
			Fields: make([]formats.Field, len(fields)),
		}
	}
	for i, f := range fields {
		shape := f.Shape[1:]
		n := len(f.Data) / rows
		for r := range samples {
			samples[r].Fields[i] = formats.Field{Name: f.Name, Tensor: formats.Tensor{
				DType: f.DType,
				Shape: shape,
				Data:  f.Data[r*n : (r+1)*n : (r+1)*n],
			}}
		}
	}
	return samples, nil
}
