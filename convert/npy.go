package convert

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
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
	// to (0: no bound); an .npy is read whole, so its size is the file's
	// (split into rows, a local C-order one is read a row at a time).
	MaxSampleBytes int64
}

// NewNPYHandler reads .npy files (one field, "data") and .npz archives
// (one field per member, sorted by name, named NPZField(member)). Numeric arrays are passed
// through unchanged: recipes apply to images and audio, so every copy of
// an array is the same and Params is nil.
//
// With SplitAxis 0 every field is split along axis 0 into samples keyed
// "KEY#r<row>"; all fields of an .npz must then have the same length
// along axis 0. A local C-order .npy is then read row by row as the
// samples are emitted (Emitter), so an array larger than memory can be
// split; otherwise the file is read whole and the samples share its
// memory.
func NewNPYHandler(opt NPYOptions) Handler {
	return &npyHandler{opt: opt}
}

// npyHandler is the Handler NewNPYHandler returns: a PathHandler (it
// reads a local file itself) and an Emitter.
type npyHandler struct{ opt NPYOptions }

func (*npyHandler) ReadsPath() {}

func (h *npyHandler) Samples(_ context.Context, in *Input, _ int, _ *rand.Rand) ([]formats.Sample, error) {
	opt := h.opt
	if opt.SplitAxis != -1 && opt.SplitAxis != 0 {
		return nil, Fatal(fmt.Errorf("split axis %d is not supported: use -1 (a file is a sample) or 0 (a row is a sample)", opt.SplitAxis))
	}
	data := in.Data
	if data == nil && in.Path != "" {
		b, err := os.ReadFile(in.Path)
		if err != nil {
			return nil, fmt.Errorf("read: %w", err)
		}
		data = b
	}
	var fields []formats.Field
	if ext(in.Key) == ".npz" {
		// The pipeline records a skipped input under its key, so
		// errors here do not repeat it.
		fs, err := npy.ParseNPZ(data, opt.MaxSampleBytes)
		if err != nil {
			return nil, err
		}
		for i := range fs {
			fs[i].Name = NPZField(fs[i].Name)
		}
		fields = fs
	} else {
		t, err := npy.Parse(data)
		if err != nil {
			return nil, err
		}
		fields = []formats.Field{{Name: formats.DataField, Tensor: t}}
	}
	if opt.SplitAxis == -1 {
		return []formats.Sample{{Key: in.Key, Source: in.Source, Label: in.Label, Fields: fields}}, nil
	}
	return splitRows(in, fields)
}

// Emit hands over the rows of a local C-order .npy one at a time
// (Emitter), straight from the file, each in memory of its own. Every
// other input is read whole, its samples sharing its memory: errWhole.
func (h *npyHandler) Emit(ctx context.Context, in *Input, _ int, _ *rand.Rand, emit func(formats.Sample) error) error {
	if h.opt.SplitAxis == 0 && ext(in.Key) == ".npy" && in.Data == nil && in.Path != "" {
		err := emitRows(ctx, in, emit)
		if !errors.Is(err, npy.ErrFortran) {
			return err
		}
	}
	return errWhole
}

// emitRows emits the rows of the .npy file at in.Path as splitRows makes
// them, read one at a time.
func emitRows(ctx context.Context, in *Input, emit func(formats.Sample) error) error {
	f, err := os.Open(in.Path)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	rows, err := npy.NewRows(bufio.NewReaderSize(f, 1<<20), st.Size())
	if err != nil {
		return err
	}
	if err := checkRows(formats.DataField, rows.Shape); err != nil {
		return err
	}
	for r := 0; ; r++ {
		if r%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		row := make([]byte, rows.RowBytes)
		switch err := rows.Next(row); {
		case err == io.EOF:
			return nil
		case err != nil:
			return err
		}
		err := emit(formats.Sample{
			Key:    in.Key + "#r" + strconv.Itoa(r),
			Source: in.Source,
			Label:  in.Label,
			Fields: []formats.Field{{Name: formats.DataField, Tensor: formats.Tensor{DType: rows.DType, Shape: rows.Shape[1:], Data: row}}},
		})
		if err != nil {
			return err
		}
	}
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

// checkRows refuses an array that has no rows to split into samples.
func checkRows(field string, shape []int) error {
	switch {
	case len(shape) == 0:
		return fmt.Errorf("array %s is 0-d and cannot be split into rows; use split axis -1", arrayName(field))
	case shape[0] == 0:
		return fmt.Errorf("array %s has no rows along axis 0, so there are no samples", arrayName(field))
	}
	return nil
}

// splitRows makes one sample per row along axis 0 of every field.
func splitRows(in *Input, fields []formats.Field) ([]formats.Sample, error) {
	rows := -1
	for _, f := range fields {
		if len(f.Shape) == 0 {
			return nil, checkRows(f.Name, f.Shape)
		}
		switch {
		case rows < 0:
			rows = f.Shape[0]
		case f.Shape[0] != rows:
			return nil, fmt.Errorf("cannot split into rows: array %s has %d rows along axis 0, array %s has %d; every array must have the same number",
				arrayName(fields[0].Name), rows, arrayName(f.Name), f.Shape[0])
		}
	}
	if err := checkRows(fields[0].Name, fields[0].Shape); err != nil {
		return nil, err
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
