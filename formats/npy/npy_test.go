package npy

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prep-dev/prep/formats"
)

const testdata = "../../testdata/npy"

// want is what numpy itself reported for a file or member (expected.json,
// written by testdata/npy/make_npy.py).
type want struct {
	DType   formats.DType    `json:"dtype"`
	Shape   []int            `json:"shape"`
	SHA256  string           `json:"sha256"`
	Members map[string]*want `json:"members"`
}

func loadExpected(t *testing.T) map[string]*want {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdata, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]*want
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func checkTensor(t *testing.T, name string, got formats.Tensor, w *want) {
	t.Helper()
	if got.DType != w.DType || !slices.Equal(got.Shape, w.Shape) {
		t.Errorf("%s: got %s%v, numpy says %s%v", name, got.DType, got.Shape, w.DType, w.Shape)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("%s: %v", name, err)
	}
	sum := sha256.Sum256(got.Data)
	if h := hex.EncodeToString(sum[:]); h != w.SHA256 {
		t.Errorf("%s: data sha256 %s, numpy's native C-order bytes have %s", name, h, w.SHA256)
	}
}

// TestNumpyFiles reads every file numpy wrote into testdata/npy/ok and
// compares dtype, shape and the bytes with what numpy reported.
func TestNumpyFiles(t *testing.T) {
	expected := loadExpected(t)
	files, err := filepath.Glob(filepath.Join(testdata, "ok", "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files: %v", err)
	}
	if len(files) != len(expected) {
		t.Errorf("%d files in ok/, %d in expected.json: rerun make_npy.py", len(files), len(expected))
	}
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			w := expected[name]
			if w == nil {
				t.Fatalf("%s is missing from expected.json", name)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			orig := bytes.Clone(data)
			if strings.HasSuffix(name, ".npz") {
				fields, err := ParseNPZ(data, 0)
				if err != nil {
					t.Fatal(err)
				}
				var names, wantNames []string
				for _, f := range fields {
					names = append(names, f.Name)
					if w.Members[f.Name] != nil {
						checkTensor(t, name+":"+f.Name, f.Tensor, w.Members[f.Name])
					}
				}
				for k := range w.Members {
					wantNames = append(wantNames, k)
				}
				sort.Strings(wantNames)
				if !slices.Equal(names, wantNames) {
					t.Errorf("fields %v, want %v (sorted)", names, wantNames)
				}
			} else {
				got, err := Parse(data)
				if err != nil {
					t.Fatal(err)
				}
				checkTensor(t, name, got, w)
			}
			if !bytes.Equal(data, orig) {
				t.Error("parsing modified the input")
			}
		})
	}
}

// TestRefused checks that what prep cannot read fails with a message that
// says why.
func TestRefused(t *testing.T) {
	for _, tc := range []struct{ file, msg string }{
		{"object.npy", "object arrays are not supported: prep never unpickles"},
		{"structured.npy", "structured dtypes"},
		{"structured_utf8_v3.npy", "structured dtypes"},
		{"unicode.npy", `string arrays (descr "<U2")`},
		{"bytes.npy", `string arrays (descr "|S2")`},
		{"datetime.npy", `datetime arrays (descr "<M8[D]")`},
		{"longdouble.npy", `extended-precision float (descr "<f16")`},
		{"truncated_data.npy", "truncated .npy data: shape [3 4] of float32 needs 48 bytes, the file holds 43"},
		{"truncated_header.npy", "truncated .npy header"},
		{"extra_bytes.npy", "size mismatch: shape [3 4] of float32 needs 48 bytes, the file holds 56"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(testdata, "bad", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Parse(data)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %v, want one containing %q", err, tc.msg)
			}
		})
	}
}

// npyFile builds a .npy file by hand, for header forms numpy does not write.
func npyFile(major byte, hdr string, body []byte) []byte {
	b := []byte(magic)
	b = append(b, major, 0)
	if major == 1 {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(hdr)))
	} else {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(hdr)))
	}
	b = append(b, hdr...)
	return append(b, body...)
}

func TestHeaderForms(t *testing.T) {
	four := []byte{1, 2, 3, 4}
	for _, tc := range []struct {
		name  string
		major byte
		hdr   string
		body  []byte
		dtype formats.DType
		shape []int
		data  []byte
		err   string
	}{
		{"native order", 1, "{'descr': '=u2', 'fortran_order': False, 'shape': (2,), }\n", four, formats.Uint16, []int{2}, four, ""},
		{"no order", 1, "{'descr': 'i2', 'fortran_order': False, 'shape': (2,), }\n", four, formats.Int16, []int{2}, four, ""},
		{"big-endian", 2, "{'descr': '>u2', 'fortran_order': False, 'shape': (2,), }\n", four, formats.Uint16, []int{2}, []byte{2, 1, 4, 3}, ""},
		{"question mark bool", 1, "{'descr': '|?', 'fortran_order': False, 'shape': (4,), }\n", []byte{0, 1, 1, 0}, formats.Bool, []int{4}, []byte{0, 1, 1, 0}, ""},
		{"double quotes, other key order, no trailing comma", 1, `{"shape": (2, 2), "fortran_order": True, "descr": "|u1"}` + "\n", four, formats.Uint8, []int{2, 2}, []byte{1, 3, 2, 4}, ""},
		{"python 2 longs", 1, "{'descr': '<i1', 'fortran_order': False, 'shape': (2L, 2L), }      \n", four, formats.Int8, []int{2, 2}, four, ""},
		{"trailing comma in shape", 3, "{'descr': '<i1', 'fortran_order': False, 'shape': (2, 2,), }\n", four, formats.Int8, []int{2, 2}, four, ""},
		{"0-d", 1, "{'descr': '<u4', 'fortran_order': True, 'shape': (), }\n", four, formats.Uint32, []int{}, four, ""},
		{"escaped quote", 1, `{'descr': 'f\'4', 'fortran_order': False, 'shape': (1,), }`, four, "", nil, nil, `unsupported dtype descr "f'4"`},
		{"parenthesised int", 1, "{'descr': '<u4', 'fortran_order': False, 'shape': (1), }\n", four, "", nil, nil, "(1) is not a tuple"},
		{"negative dim", 1, "{'descr': '<u4', 'fortran_order': False, 'shape': (-1,), }\n", four, "", nil, nil, "non-negative integer"},
		{"huge dim", 1, "{'descr': '<u4', 'fortran_order': False, 'shape': (99999999999999999999,), }\n", four, "", nil, nil, "too large"},
		{"overflowing shape", 1, "{'descr': '<u4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 8), }\n", four, "", nil, nil, "larger than the 4 bytes"},
		{"duplicate key", 1, "{'descr': '<u4', 'descr': '<u4', 'fortran_order': False, 'shape': (1,), }\n", four, "", nil, nil, `duplicate key "descr"`},
		{"unknown key", 1, "{'descr': '<u4', 'fortran_order': False, 'shape': (1,), 'x': 1}\n", four, "", nil, nil, `unexpected key "x"`},
		{"missing key", 1, "{'descr': '<u4', 'shape': (1,), }\n", four, "", nil, nil, `no "fortran_order"`},
		{"lowercase bool", 1, "{'descr': '<u4', 'fortran_order': false, 'shape': (1,), }\n", four, "", nil, nil, "want True or False"},
		{"code", 1, "{'descr': __import__('os'), 'fortran_order': False, 'shape': (1,), }\n", four, "", nil, nil, "want a quoted string"},
		{"text after dict", 1, "{'descr': '<u4', 'fortran_order': False, 'shape': (1,), } x\n", four, "", nil, nil, "after the dictionary"},
		{"unterminated string", 1, "{'descr': '<u4", four, "", nil, nil, "unterminated string"},
		{"not a dict", 1, "['descr']\n", four, "", nil, nil, "must start with '{'"},
		{"bad utf-8 in v3", 3, "{'descr': '<u4\xff', 'fortran_order': False, 'shape': (1,), }\n", four, "", nil, nil, "not valid UTF-8"},
		{"version 4", 4, "{'descr': '<u4', 'fortran_order': False, 'shape': (1,), }\n", four, "", nil, nil, "unsupported .npy format version 4.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(npyFile(tc.major, tc.hdr, tc.body))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.DType != tc.dtype || !slices.Equal(got.Shape, tc.shape) || !bytes.Equal(got.Data, tc.data) {
				t.Errorf("got %s%v %v, want %s%v %v", got.DType, got.Shape, got.Data, tc.dtype, tc.shape, tc.data)
			}
		})
	}
}

func TestNotNPY(t *testing.T) {
	for _, data := range [][]byte{nil, []byte("\x93NUM"), []byte("PK\x03\x04 this is a zip"), []byte("\x93NUMPY\x01\x00\xff\xff{")} {
		if _, err := Parse(data); err == nil {
			t.Errorf("Parse(%q) succeeded", data)
		}
	}
}

// TestZeroCopy checks that little-endian C-order data, the common case,
// is not copied, from a .npy and from a stored .npz member.
func TestZeroCopy(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testdata, "ok", "f4_le.npy"))
	if err != nil {
		t.Fatal(err)
	}
	tn, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if &tn.Data[len(tn.Data)-1] != &data[len(data)-1] {
		t.Error("little-endian C-order .npy data was copied")
	}
	z, err := os.ReadFile(filepath.Join(testdata, "ok", "arrays_stored.npz"))
	if err != nil {
		t.Fatal(err)
	}
	fields, err := ParseNPZ(z, 0)
	if err != nil {
		t.Fatal(err)
	}
	x := fields[1] // a, x, y
	if x.Name != "x" || len(x.Data) == 0 || !inside(z, x.Data) {
		t.Errorf("stored member %s was copied", x.Name)
	}
}

func inside(outer, inner []byte) bool {
	for i := range outer {
		if &outer[i] == &inner[0] {
			return true
		}
	}
	return false
}

func zipOf(t *testing.T, members map[string][]byte, method uint16) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	names := make([]string, 0, len(members))
	for n := range members {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: n, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(members[n])
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestNPZRefused(t *testing.T) {
	good, err := os.ReadFile(filepath.Join(testdata, "ok", "f4_le.npy"))
	if err != nil {
		t.Fatal(err)
	}
	stored, err := os.ReadFile(filepath.Join(testdata, "ok", "arrays_stored.npz"))
	if err != nil {
		t.Fatal(err)
	}
	corrupt := bytes.Clone(stored)
	corrupt[bytes.Index(corrupt, []byte("NUMPY"))+200] ^= 0xff // inside the first member's data
	deflated, err := os.ReadFile(filepath.Join(testdata, "ok", "arrays_deflated.npz"))
	if err != nil {
		t.Fatal(err)
	}
	bad, err := os.ReadFile(filepath.Join(testdata, "bad", "object.npy"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		err  string
	}{
		{"not a zip", good, "not an .npz (zip) archive"},
		{"empty archive", zipOf(t, nil, zip.Store), "holds no arrays"},
		{"member not npy", zipOf(t, map[string][]byte{"x.npy": good, "notes.txt": []byte("hi")}, zip.Store), `member "notes.txt" is not a .npy array`},
		{"object member", zipOf(t, map[string][]byte{"x.npy": good, "y.npy": bad}, zip.Deflate), "member y.npy: object arrays are not supported"},
		{"corrupt stored member", corrupt, "checksum mismatch"},
		{"truncated", deflated[:len(deflated)/2], "not an .npz (zip) archive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseNPZ(tc.data, 0)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}

// TestParseNPZInflateLimit: deflated members that claim more than the
// limit are refused before anything is inflated; stored members, slices
// of the file, do not count.
func TestParseNPZInflateLimit(t *testing.T) {
	zeros := npyOf(t, 8<<20) // 8 MiB of zeros deflate to about 8 KiB
	deflated := zipOf(t, map[string][]byte{"x.npy": zeros}, zip.Deflate)
	stored := zipOf(t, map[string][]byte{"x.npy": zeros}, zip.Store)
	for _, tc := range []struct {
		name  string
		data  []byte
		limit int64
		err   string
	}{
		{"no limit", deflated, 0, ""},
		{"under", deflated, 9 << 20, ""},
		{"over", deflated, 4 << 20, "its compressed members inflate to 8.0 MiB from a 0.0 MiB file, over the limit of 4.0 MiB a sample (--max-sample-bytes"},
		{"stored", stored, 4 << 20, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fields, err := ParseNPZ(tc.data, tc.limit)
			if tc.err == "" {
				if err != nil || len(fields) != 1 || len(fields[0].Data) != 8<<20 {
					t.Fatalf("error %v, %d fields; want x of 8 MiB", err, len(fields))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}

// npyOf is an .npy file of n zero bytes (uint8, 1-d).
func npyOf(t *testing.T, n int) []byte {
	t.Helper()
	header := fmt.Sprintf("{'descr': '|u1', 'fortran_order': False, 'shape': (%d,), }", n)
	header += strings.Repeat(" ", 64-(10+len(header)+1)%64) + "\n"
	out := append([]byte("\x93NUMPY\x01\x00"), byte(len(header)), byte(len(header)>>8))
	out = append(out, header...)
	return append(out, make([]byte, n)...)
}

// seeds adds every testdata file matching pattern to the fuzz corpus.
func seeds(f *testing.F, pattern string) {
	files, err := filepath.Glob(filepath.Join(testdata, "*", pattern))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds for %s: %v", pattern, err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzParse: Parse never panics, and what it accepts is a valid tensor;
// Rows reads the same rows, or refuses with Parse's error (a Fortran-order
// array aside).
func FuzzParse(f *testing.F) {
	seeds(f, "*.npy")
	f.Fuzz(func(t *testing.T, data []byte) {
		tn, err := Parse(data)
		rows, rerr := NewRows(bytes.NewReader(data), int64(len(data)))
		switch {
		case err != nil:
			if rerr == nil || rerr.Error() != err.Error() {
				t.Fatalf("Parse: %v; NewRows: %v", err, rerr)
			}
			return
		case errors.Is(rerr, ErrFortran):
		case rerr != nil:
			t.Fatalf("Parse took it, NewRows: %v", rerr)
		default:
			var got []byte
			for {
				row := make([]byte, rows.RowBytes)
				if err := rows.Next(row); err == io.EOF {
					break
				} else if err != nil {
					t.Fatalf("row %d: %v", len(got)/max(rows.RowBytes, 1), err)
				}
				got = append(got, row...)
			}
			if len(tn.Shape) > 0 && !bytes.Equal(got, tn.Data) {
				t.Fatalf("rows differ from Parse's data")
			}
		}
		if err := tn.Validate(); err != nil {
			t.Fatalf("accepted an invalid tensor: %v", err)
		}
	})
}

// FuzzParseNPZ: ParseNPZ never panics, and what it accepts is valid.
func FuzzParseNPZ(f *testing.F) {
	seeds(f, "*.npz")
	f.Fuzz(func(t *testing.T, data []byte) {
		fields, err := ParseNPZ(data, 64<<20)
		if err != nil {
			return
		}
		for _, fl := range fields {
			if err := fl.Validate(); err != nil {
				t.Fatalf("accepted an invalid member %s: %v", fl.Name, err)
			}
		}
	})
}
