package npy

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prep-dev/prep/formats"
)

// FuzzParseHeader feeds the header dictionary parser arbitrary text, which
// FuzzParse reaches only through a valid magic, version and length. What
// parseHeader accepts must mean the same thing written the way numpy
// writes it, and must make a whole file that Parse reads with that dtype
// and shape.
func FuzzParseHeader(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(testdata, "*", "*.npy"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no .npy seeds: %v", err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		if _, text, err := splitHeader(b); err == nil {
			f.Add(text)
		}
	}
	for _, s := range []string{
		`{"shape": (2, 2), "fortran_order": True, "descr": "|u1"}`,
		"{'descr': '<i1', 'fortran_order': False, 'shape': (2L, 2L), }      \n",
		"{'descr': '>c16', 'fortran_order': True, 'shape': (0, 3,), }\n",
		`{'descr': 'f\'4', 'fortran_order': False, 'shape': (1,), }`,
		"{'descr': '<u4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 8), }\n",
		"{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,), }\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		h, err := parseHeader(string(text))
		if err != nil {
			return
		}
		if h.dtype.Size() == 0 {
			t.Fatalf("accepted unknown dtype %q", h.dtype)
		}
		for _, d := range h.shape {
			if d < 0 {
				t.Fatalf("accepted negative dimension in %v", h.shape)
			}
		}
		canon := numpyHeader(h)
		h2, err := parseHeader(canon)
		if err != nil {
			t.Fatalf("numpy's form %q of an accepted header is refused: %v", canon, err)
		}
		if h2.dtype != h.dtype || h2.swap != h.swap || h2.fortran != h.fortran || !slices.Equal(h2.shape, h.shape) {
			t.Fatalf("%q reads as %+v, numpy's form %q as %+v", text, *h, canon, *h2)
		}
		checkWholeFile(t, text, h)
	})
}

// checkWholeFile wraps an accepted header in a version 1.0 file (3.0 when
// it is too long) with exactly the data it describes, and checks that
// Parse reads it as described. Headers of more than 1 MiB of data are
// only checked for the size they claim.
func checkWholeFile(t *testing.T, text []byte, h *header) {
	size := uint64(h.dtype.Size())
	nbytes, err := h.dtype.ArrayBytes(h.shape)
	n := uint64(nbytes) / size
	if err != nil || n > (1<<20)/size {
		return
	}
	major := byte(1)
	if len(text) > 0xFFFF {
		major = 3
	}
	if major == 3 && !utf8.Valid(text) {
		return
	}
	tn, err := Parse(npyFile(major, string(text), make([]byte, n*size)))
	if err != nil {
		t.Fatalf("header %q accepted, its file refused: %v", text, err)
	}
	if tn.DType != h.dtype || !slices.Equal(tn.Shape, h.shape) {
		t.Fatalf("header %q: Parse gives %s%v", text, tn.DType, tn.Shape)
	}
	if err := tn.Validate(); err != nil {
		t.Fatalf("header %q: invalid tensor: %v", text, err)
	}
}

// splitHeader returns a .npy file's preamble and header text.
func splitHeader(b []byte) (pre, text []byte, err error) {
	h, body, err := readHeader(b)
	if err != nil || h == nil {
		return nil, nil, err
	}
	start := 10
	if b[6] > 1 {
		start = 12
	}
	return b[:start], b[start : len(b)-len(body)], nil
}

// numpyHeader writes h as numpy's format.write_array_header does.
func numpyHeader(h *header) string {
	var b strings.Builder
	b.WriteString("{'descr': '")
	b.WriteString(descrOf(h.dtype, h.swap))
	b.WriteString("', 'fortran_order': ")
	if h.fortran {
		b.WriteString("True")
	} else {
		b.WriteString("False")
	}
	b.WriteString(", 'shape': (")
	for i, d := range h.shape {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(d))
	}
	if len(h.shape) == 1 {
		b.WriteByte(',')
	}
	b.WriteString("), }\n")
	return b.String()
}

// descrOf is numpy's type string for dtype in the given byte order.
func descrOf(dt formats.DType, bigEndian bool) string {
	code := map[formats.DType]string{
		formats.Bool: "b1", formats.Int8: "i1", formats.Uint8: "u1",
		formats.Int16: "i2", formats.Uint16: "u2", formats.Float16: "f2",
		formats.Int32: "i4", formats.Uint32: "u4", formats.Float32: "f4",
		formats.Int64: "i8", formats.Uint64: "u8", formats.Float64: "f8",
		formats.Complex64: "c8", formats.Complex128: "c16",
	}[dt]
	switch {
	case dt.Size() == 1:
		return "|" + code
	case bigEndian:
		return ">" + code
	}
	return "<" + code
}

// TestNumpyHeaderForm checks the fuzz target's reference writer against
// the headers numpy wrote for the test files.
func TestNumpyHeaderForm(t *testing.T) {
	for _, name := range []string{"ok/f4_le.npy", "ok/u2_be_fortran_33x65.npy", "ok/scalar_f8.npy", "ok/b1.npy"} {
		b, err := os.ReadFile(filepath.Join(testdata, name))
		if err != nil {
			t.Fatal(err)
		}
		_, text, err := splitHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		h, err := parseHeader(string(text))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := numpyHeader(h), strings.TrimRight(string(text), " \n")+"\n"; strings.TrimRight(got, "\n") != strings.TrimRight(want, "\n") {
			t.Errorf("%s: numpyHeader %q, numpy wrote %q", name, got, want)
		}
	}
}

// TestTooLargeEmpty: an empty array whose other dimensions overflow was
// read (0 bytes match a product that wraps to 0) into a tensor that
// formats.Tensor.Validate now refuses; numpy refuses to make one ("array
// is too big"). Parse follows numpy's rule, checked here against what
// numpy answered for each shape.
func TestTooLargeEmpty(t *testing.T) {
	for _, tc := range []struct {
		descr, shape string
		ok           bool
	}{
		{"|u1", "(4611686018427387904, 4, 0)", false},
		{"<f8", "(2305843009213693952, 0)", false},
		{"<f4", "(1099511627776, 0, 1048576)", true},
		{"|u1", "(4611686018427387904, 0)", true},
	} {
		tn, err := Parse(npyFile(1, "{'descr': '"+tc.descr+"', 'fortran_order': False, 'shape': "+tc.shape+", }\n", nil))
		if (err == nil) != tc.ok {
			t.Errorf("%s %s: error %v, want ok=%v", tc.descr, tc.shape, err, tc.ok)
		}
		if err == nil {
			if verr := tn.Validate(); verr != nil {
				t.Errorf("%s %s: accepted an invalid tensor: %v", tc.descr, tc.shape, verr)
			}
		}
	}
}
