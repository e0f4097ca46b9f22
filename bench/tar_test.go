package bench

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prep-dev/prep/formats/tarshard"
)

// digest lists a tar's samples as tarshard.Read or readTar hands them out.
func digest(read func(fn func(string, map[string][]byte) error) error) (string, error) {
	var b strings.Builder
	err := read(func(key string, m map[string][]byte) error {
		exts := make([]string, 0, len(m))
		for e := range m {
			exts = append(exts, e)
		}
		slices.Sort(exts)
		fmt.Fprintf(&b, "%s:", key)
		for _, e := range exts {
			sum := sha256.Sum256(m[e])
			fmt.Fprintf(&b, " %s=%d/%s", e, len(m[e]), hex.EncodeToString(sum[:4]))
		}
		b.WriteByte('\n')
		return nil
	})
	return b.String(), err
}

func writeRawTar(t *testing.T, path string, format tar.Format, entries ...tar.Header) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i, h := range entries {
		h.Format = format
		body := bytes.Repeat([]byte{byte(i)}, int(h.Size))
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(body)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReadTarMatchesTarshard checks readTar against tarshard.Read on real
// shards and on tars with long names, folders and odd sizes, with chunk
// sizes that split headers and members of one sample across reads.
func TestReadTarMatchesTarshard(t *testing.T) {
	dir := t.TempDir()
	writeTar(t, dir, 1, 9, 20, 30)
	long := strings.Repeat("d", 120) + "/" + strings.Repeat("k", 90)
	files := []string{filepath.Join(dir, "shard-000000.tar")}
	for _, f := range []tar.Format{tar.FormatPAX, tar.FormatGNU, tar.FormatUSTAR} {
		name := filepath.Join(dir, f.String()+".tar")
		entries := []tar.Header{
			{Name: "a/", Typeflag: tar.TypeDir, Mode: 0o755},
			{Name: "a/x.png", Size: 5000, Mode: 0o644},
			{Name: "a/x.cls", Size: 1, Mode: 0o644},
			{Name: "a/y.png", Size: 0, Mode: 0o644},
			{Name: "a/y.json", Size: 512, Mode: 0o644},
		}
		if f != tar.FormatUSTAR {
			entries = append(entries, tar.Header{Name: long + ".png", Size: 70000, Mode: 0o644}, tar.Header{Name: long + ".cls", Size: 3, Mode: 0o644})
		} else {
			// USTAR splits a long name into prefix and name.
			entries = append(entries, tar.Header{Name: strings.Repeat("p", 120) + "/z.png", Size: 700, Mode: 0o644})
		}
		writeRawTar(t, name, f, entries...)
		files = append(files, name)
	}
	for _, path := range files {
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := digest(func(fn func(string, map[string][]byte) error) error {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			return tarshard.Read(f, fn)
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, chunk := range []int{align, 3 * align, DefaultChunk} {
			for _, direct := range []bool{false, true} {
				got, err := digest(func(fn func(string, map[string][]byte) error) error {
					f, err := openFile(path, direct)
					if err != nil {
						return err
					}
					defer f.Close()
					return readTar(&tarSource{s: f.span(newBuffer(chunk), 0, info.Size())}, fn)
				})
				if err != nil || got != want {
					t.Errorf("%s, chunk %d, direct %v: error %v\ngot\n%s\nwant\n%s", filepath.Base(path), chunk, direct, err, got, want)
				}
			}
		}
	}
}

func TestReadTarErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.tar")
	writeRawTar(t, good, tar.FormatUSTAR, tar.Header{Name: "x.png", Size: 3000, Mode: 0o644}, tar.Header{Name: "x.cls", Size: 1, Mode: 0o644})
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	corrupt := slices.Clone(b)
	corrupt[10] ^= 1 // the name, under the checksum
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"checksum", corrupt, "read tar: archive/tar: invalid tar header"},
		{"truncated body", b[:2000], "(is the shard truncated?)"},
		{"no extension", func() []byte {
			p := filepath.Join(dir, "noext.tar")
			writeRawTar(t, p, tar.FormatUSTAR, tar.Header{Name: "x", Size: 1, Mode: 0o644})
			b, _ := os.ReadFile(p)
			return b
		}(), "tar member x has no extension"},
		{"twice", func() []byte {
			p := filepath.Join(dir, "twice.tar")
			writeRawTar(t, p, tar.FormatUSTAR, tar.Header{Name: "x.png", Size: 1, Mode: 0o644}, tar.Header{Name: "x.png", Size: 1, Mode: 0o644})
			b, _ := os.ReadFile(p)
			return b
		}(), "tar member x.png appears twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name+".bad")
			if err := os.WriteFile(p, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := openFile(p, false)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			size := int64(len(tc.data))
			if tc.name == "truncated body" {
				size = int64(len(b)) // what the manifest recorded
			}
			err = readTar(&tarSource{s: f.span(newBuffer(align), 0, size)}, func(string, map[string][]byte) error { return nil })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

// BenchmarkReadTarParse times readTar's own work on a 37 MB shard of 250
// 224×224×3 PNGs held in memory, the reads left out: what a tar pass costs
// over a raw one from the page cache (about 3.5 ms for this shard here).
func BenchmarkReadTarParse(b *testing.B) {
	dir := b.TempDir()
	writeTar(b, dir, 1, 250, 224, 224)
	data, err := os.ReadFile(filepath.Join(dir, "shard-000000.tar"))
	if err != nil {
		b.Fatal(err)
	}
	var t tarState
	samples := 0
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		// A span with nothing left to read: the source hands out data and
		// then ends.
		src := &tarSource{s: &span{}, cur: data}
		if err := t.read(src, func(string, map[string][]byte) error { samples++; return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(samples), "ns/sample")
}
