// Package npy decodes numpy's .npy and .npz files into tensors: every
// numeric dtype, either byte order, C or Fortran order, header versions
// 1.0, 2.0 and 3.0. The result is always little-endian and C-ordered.
// Object arrays are refused without being unpickled.
package npy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"unicode/utf8"

	"github.com/prep-dev/prep/formats"
)

// magic starts every .npy file.
const magic = "\x93NUMPY"

// Parse decodes one .npy file. When the file is already little-endian
// and C-ordered, the tensor's Data shares memory with data; otherwise it
// is a new, converted copy.
func Parse(data []byte) (formats.Tensor, error) {
	h, body, err := readHeader(data)
	if err != nil {
		return formats.Tensor{}, err
	}
	size := h.dtype.Size()
	want, err := h.dataBytes(int64(len(body)))
	if err != nil {
		return formats.Tensor{}, err
	}
	out, copied := body, false
	if h.fortran && len(h.shape) > 1 && want > 0 {
		out, copied = fortranToC(body, h.shape, size), true
	}
	if h.swap && want > 0 {
		if !copied {
			out = bytes.Clone(body)
		}
		if h.dtype == formats.Complex64 || h.dtype == formats.Complex128 {
			size /= 2 // the real and imaginary parts are swapped separately
		}
		swapBytes(out, size)
	}
	return formats.Tensor{DType: h.dtype, Shape: h.shape, Data: out}, nil
}

// dataBytes returns how many bytes the array's data takes, after
// checking that n, the bytes after the header, are exactly those.
func (h *header) dataBytes(n int64) (int, error) {
	// numpy refuses the shapes ArrayBytes does, empty or not.
	want, err := h.dtype.ArrayBytes(h.shape)
	if err != nil {
		return 0, fmt.Errorf("truncated .npy data: shape %v of %s is larger than the %d bytes the file holds", h.shape, h.dtype, n)
	}
	if int64(want) > n {
		return 0, fmt.Errorf("truncated .npy data: shape %v of %s needs %d bytes, the file holds %d", h.shape, h.dtype, want, n)
	}
	if int64(want) < n {
		return 0, fmt.Errorf(".npy data size mismatch: shape %v of %s needs %d bytes, the file holds %d", h.shape, h.dtype, want, n)
	}
	return want, nil
}

// readHeader checks the magic and version and returns the parsed header
// and the bytes after it.
func readHeader(data []byte) (*header, []byte, error) {
	if len(data) < 10 {
		if bytes.HasPrefix([]byte(magic), data[:min(len(data), len(magic))]) {
			return nil, nil, fmt.Errorf("truncated .npy header: the file holds only %d bytes", len(data))
		}
		return nil, nil, fmt.Errorf("not a .npy file: it does not start with %q", magic)
	}
	if string(data[:6]) != magic {
		return nil, nil, fmt.Errorf("not a .npy file: it does not start with %q", magic)
	}
	major, minor := data[6], data[7]
	var hlen, start int
	switch {
	case major == 1 && minor == 0:
		hlen, start = int(binary.LittleEndian.Uint16(data[8:])), 10
	case (major == 2 || major == 3) && minor == 0:
		if len(data) < 12 {
			return nil, nil, fmt.Errorf("truncated .npy header: the file holds only %d bytes", len(data))
		}
		hlen, start = int(binary.LittleEndian.Uint32(data[8:])), 12
	default:
		return nil, nil, fmt.Errorf("unsupported .npy format version %d.%d (prep reads 1.0, 2.0 and 3.0)", major, minor)
	}
	if hlen > len(data)-start {
		return nil, nil, fmt.Errorf("truncated .npy header: it needs %d bytes, the file holds %d after the preamble", hlen, len(data)-start)
	}
	text := data[start : start+hlen]
	// Version 3.0 exists for UTF-8 headers; 1.0 and 2.0 are latin-1, whose
	// non-ASCII bytes can only appear in structured field names, refused anyway.
	if major == 3 && !utf8.Valid(text) {
		return nil, nil, fmt.Errorf("bad .npy header: version 3.0 header is not valid UTF-8")
	}
	h, err := parseHeader(string(text))
	if err != nil {
		return nil, nil, err
	}
	return h, data[start+hlen:], nil
}

// fortranToC returns the C-order copy of a Fortran-order array: it walks
// the output in C order and gathers each element from its Fortran offset.
func fortranToC(src []byte, shape []int, size int) []byte {
	nd := len(shape)
	if nd == 2 {
		return transpose2D(src, shape[0], shape[1], size)
	}
	stride := make([]int, nd) // Fortran strides, in bytes
	s := size
	for k := range nd {
		stride[k] = s
		s *= shape[k]
	}
	dst := make([]byte, len(src))
	idx := make([]int, nd)
	inner, step := shape[nd-1], stride[nd-1]
	o, base := 0, 0
	for {
		p := base
		switch size {
		case 1:
			for range inner {
				dst[o] = src[p]
				o++
				p += step
			}
		case 4:
			for range inner {
				copy(dst[o:o+4], src[p:p+4])
				o += 4
				p += step
			}
		default:
			for range inner {
				copy(dst[o:o+size], src[p:p+size])
				o += size
				p += step
			}
		}
		k := nd - 2
		for ; k >= 0; k-- {
			idx[k]++
			base += stride[k]
			if idx[k] < shape[k] {
				break
			}
			base -= stride[k] * shape[k]
			idx[k] = 0
		}
		if k < 0 {
			return dst
		}
	}
}

// transpose2D returns the C-order copy of a Fortran-order rows×cols
// matrix. It works in tiles so that both the strided reads and the
// sequential writes stay in cache: twice as fast as a plain gather on
// large matrices.
func transpose2D(src []byte, rows, cols, size int) []byte {
	const tile = 32
	dst := make([]byte, len(src))
	for i0 := 0; i0 < rows; i0 += tile {
		i1 := min(i0+tile, rows)
		for j0 := 0; j0 < cols; j0 += tile {
			j1 := min(j0+tile, cols)
			for i := i0; i < i1; i++ {
				o := (i*cols + j0) * size
				p := (j0*rows + i) * size
				step := rows * size
				switch size {
				case 4:
					for j := j0; j < j1; j++ {
						copy(dst[o:o+4], src[p:p+4])
						o += 4
						p += step
					}
				default:
					for j := j0; j < j1; j++ {
						copy(dst[o:o+size], src[p:p+size])
						o += size
						p += step
					}
				}
			}
		}
	}
	return dst
}

// swapBytes reverses the byte order of every w-byte word of b in place.
func swapBytes(b []byte, w int) {
	switch w {
	case 2:
		for i := 0; i+1 < len(b); i += 2 {
			b[i], b[i+1] = b[i+1], b[i]
		}
	case 4:
		for i := 0; i+3 < len(b); i += 4 {
			binary.LittleEndian.PutUint32(b[i:], binary.BigEndian.Uint32(b[i:]))
		}
	case 8:
		for i := 0; i+7 < len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], binary.BigEndian.Uint64(b[i:]))
		}
	}
}
