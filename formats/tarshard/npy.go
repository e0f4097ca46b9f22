package tarshard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/prep-dev/prep/formats"
)

// Fields after the primary one become NAME.npy members, which WebDataset
// decodes with numpy. The header is format version 1.0.

var npyDescr = map[formats.DType]string{
	formats.Bool: "|b1", formats.Int8: "|i1", formats.Uint8: "|u1",
	formats.Int16: "<i2", formats.Uint16: "<u2", formats.Float16: "<f2",
	formats.Int32: "<i4", formats.Uint32: "<u4", formats.Float32: "<f4",
	formats.Int64: "<i8", formats.Uint64: "<u8", formats.Float64: "<f8",
	formats.Complex64: "<c8", formats.Complex128: "<c16",
}

const npyMagic = "\x93NUMPY\x01\x00"

// npyHeader returns the magic, version, header length and header dict,
// padded so the data starts on a 64-byte boundary as numpy does.
func npyHeader(t formats.Tensor) ([]byte, error) {
	descr, ok := npyDescr[t.DType]
	if !ok {
		return nil, fmt.Errorf("no npy type for %s", t.DType)
	}
	var shape strings.Builder
	shape.WriteByte('(')
	for i, d := range t.Shape {
		if i > 0 {
			shape.WriteString(", ")
		}
		shape.WriteString(strconv.Itoa(d))
	}
	if len(t.Shape) == 1 {
		shape.WriteByte(',')
	}
	shape.WriteByte(')')
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape.String())
	total := len(npyMagic) + 2 + len(dict) + 1
	pad := (64 - total%64) % 64
	if len(dict)+pad+1 > 0xFFFF {
		return nil, fmt.Errorf("npy header for shape %v too long", t.Shape)
	}
	b := make([]byte, 0, total+pad)
	b = append(b, npyMagic...)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(dict)+pad+1))
	b = append(b, dict...)
	b = append(b, bytes.Repeat([]byte{' '}, pad)...)
	return append(b, '\n'), nil
}

// decodeNpy reads an npy file written by npyHeader (version 1.0, C order,
// little-endian); the tensor's data aliases b.
func decodeNpy(b []byte) (formats.Tensor, error) {
	var t formats.Tensor
	if len(b) < 10 || string(b[:8]) != npyMagic {
		return t, errors.New("not an npy 1.0 file")
	}
	n := int(binary.LittleEndian.Uint16(b[8:]))
	if len(b) < 10+n {
		return t, errors.New("npy header truncated")
	}
	dict := string(b[10 : 10+n])
	descr, ok := between(dict, "'descr': '", "'")
	if !ok {
		return t, fmt.Errorf("npy header %q has no descr", dict)
	}
	for d, s := range npyDescr {
		if s == descr {
			t.DType = d
		}
	}
	if t.DType == "" {
		return t, fmt.Errorf("npy dtype %q not supported", descr)
	}
	if !strings.Contains(dict, "'fortran_order': False") {
		return t, errors.New("npy in Fortran order not supported")
	}
	shape, ok := between(dict, "'shape': (", ")")
	if !ok {
		return t, fmt.Errorf("npy header %q has no shape", dict)
	}
	t.Shape = []int{}
	for f := range strings.SplitSeq(shape, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		d, err := strconv.Atoi(f)
		if err != nil {
			return t, fmt.Errorf("npy shape (%s): %w", shape, err)
		}
		t.Shape = append(t.Shape, d)
	}
	t.Data = b[10+n:]
	return t, t.Validate()
}

func between(s, open, close string) (string, bool) {
	_, rest, ok := strings.Cut(s, open)
	if !ok {
		return "", false
	}
	v, _, ok := strings.Cut(rest, close)
	return v, ok
}
