package npy

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/prep-dev/prep/formats"
)

// Rows reads a C-order .npy array one row along axis 0 at a time, so
// that an array larger than memory can be split into samples: Parse
// needs the whole file. Rows come out little-endian, as Parse's do.
type Rows struct {
	DType    formats.DType
	Shape    []int // the whole array's; a 0-d array has no rows
	RowBytes int

	r     io.Reader
	left  int // rows not read yet
	width int // bytes a byte-swapped unit holds; 0: no swap
}

// ErrFortran is a Fortran-order array of more than one dimension, whose
// rows are not stored one after another: Parse reads it.
var ErrFortran = errors.New(".npy array in Fortran order: its rows are not stored one by one")

// maxHeader bounds the header NewRows reads: numpy's own reader refuses
// headers over 10,000 bytes unless told otherwise (Parse takes any).
const maxHeader = 1 << 20

// NewRows reads the header of the .npy file that r holds, size bytes in
// all, and checks it as Parse does; the rows follow.
func NewRows(r io.Reader, size int64) (*Rows, error) {
	head := make([]byte, min(size, maxHeader))
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, fmt.Errorf("read .npy header: %w", noEOF(err))
	}
	h, rest, err := readHeader(head)
	if err != nil {
		return nil, err
	}
	r = io.MultiReader(bytes.NewReader(rest), r)
	headLen := int64(len(head) - len(rest))
	want, err := h.dataBytes(size - headLen)
	if err != nil {
		return nil, err
	}
	if len(h.shape) == 0 {
		return &Rows{DType: h.dtype, Shape: h.shape}, nil // no rows
	}
	if h.fortran && len(h.shape) > 1 && want > 0 {
		return nil, ErrFortran
	}
	rows := &Rows{DType: h.dtype, Shape: h.shape, r: r, left: h.shape[0]}
	if h.shape[0] > 0 {
		rows.RowBytes = want / h.shape[0]
	}
	if h.swap {
		rows.width = h.dtype.Size()
		if h.dtype == formats.Complex64 || h.dtype == formats.Complex128 {
			rows.width /= 2 // the real and imaginary parts are swapped separately
		}
	}
	return rows, nil
}

// Next reads the next row into dst, which holds RowBytes bytes. It
// returns io.EOF after the last row.
func (r *Rows) Next(dst []byte) error {
	if r.left == 0 {
		return io.EOF
	}
	if _, err := io.ReadFull(r.r, dst[:r.RowBytes]); err != nil {
		return fmt.Errorf("truncated .npy data: %w", noEOF(err))
	}
	if r.width > 0 {
		swapBytes(dst[:r.RowBytes], r.width)
	}
	r.left--
	return nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
