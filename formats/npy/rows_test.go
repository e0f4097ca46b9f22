package npy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRows reads every test array row by row: the rows of a C-order
// array are Parse's bytes, a Fortran-order one is refused, and a bad file
// fails with Parse's error.
func TestRows(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testdata, "*", "*.npy"))
	if err != nil || len(files) < 30 {
		t.Fatalf("found %d .npy files (%v)", len(files), err)
	}
	read := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want, perr := Parse(data)
		rows, err := NewRows(bytes.NewReader(data), int64(len(data)))
		name := filepath.Base(filepath.Dir(f)) + "/" + filepath.Base(f)
		switch {
		case perr != nil:
			if err == nil || err.Error() != perr.Error() {
				t.Errorf("%s: %v, Parse says %v", name, err, perr)
			}
			continue
		case errors.Is(err, ErrFortran):
			if !strings.Contains(name, "fortran") {
				t.Errorf("%s: refused as Fortran order", name)
			}
			continue
		case err != nil:
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(want.Shape) == 0 {
			if len(rows.Shape) != 0 || rows.Next(nil) != io.EOF {
				t.Errorf("%s: a 0-d array has rows", name)
			}
			continue
		}
		var got []byte
		row := make([]byte, rows.RowBytes)
		for {
			err := rows.Next(row)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got = append(got, row...)
		}
		if rows.DType != want.DType || !slices.Equal(rows.Shape, want.Shape) || !bytes.Equal(got, want.Data) {
			t.Errorf("%s: rows of %s%v differ from Parse's %s%v", name, rows.DType, rows.Shape, want.DType, want.Shape)
		}
		read++
	}
	if read < 20 {
		t.Errorf("read %d arrays row by row", read)
	}
	// A file that ends inside its rows, though its size said otherwise (cut
	// while being read).
	text := "{'descr': '|u1', 'fortran_order': False, 'shape': (20000, 100), }"
	text += strings.Repeat(" ", 117-len(text)) + "\n"
	file := append([]byte(magic+"\x01\x00\x76\x00"+text), make([]byte, 2000000)...)
	rows, err := NewRows(bytes.NewReader(file[:1500000]), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	row, n := make([]byte, rows.RowBytes), 0
	for err == nil {
		if err = rows.Next(row); err == nil {
			n++
		}
	}
	if n != 14998 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("%d rows, then %v; want 14998 (1,499,872 bytes after the header), then unexpected EOF", n, err)
	}
}
