package npy

import (
	"archive/zip"
	"bytes"
	"fmt"
	"testing"
)

// benchFile is a 2048×2048 float32 .npy (16 MiB) in the given descr and order.
func benchFile(descr string, fortran bool) []byte {
	order := "False"
	if fortran {
		order = "True"
	}
	hdr := fmt.Sprintf("{'descr': '%s', 'fortran_order': %s, 'shape': (2048, 2048), }", descr, order)
	hdr += string(bytes.Repeat([]byte(" "), 63-(10+len(hdr))%64)) + "\n"
	body := make([]byte, 2048*2048*4)
	for i := range body {
		body[i] = byte(i * 7)
	}
	return npyFile(1, hdr, body)
}

func benchNPZ(b *testing.B, method uint16) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "x.npy", Method: method})
	if err != nil {
		b.Fatal(err)
	}
	w.Write(benchFile("<f4", false))
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkCopy is the baseline: one copy of the same 16 MiB into fresh memory.
func BenchmarkCopy(b *testing.B) {
	data := benchFile("<f4", false)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		_ = bytes.Clone(data)
	}
}

func BenchmarkParse(b *testing.B) {
	for _, c := range []struct {
		name    string
		descr   string
		fortran bool
	}{
		{"le_c", "<f4", false},
		{"be_c", ">f4", false},
		{"le_fortran", "<f4", true},
		{"be_fortran", ">f4", true},
	} {
		b.Run(c.name, func(b *testing.B) {
			data := benchFile(c.descr, c.fortran)
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := Parse(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParseNPZ(b *testing.B) {
	for _, c := range []struct {
		name   string
		method uint16
	}{{"stored", zip.Store}, {"deflated", zip.Deflate}} {
		b.Run(c.name, func(b *testing.B) {
			data := benchNPZ(b, c.method)
			b.SetBytes(2048 * 2048 * 4)
			for b.Loop() {
				if _, err := ParseNPZ(data, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
