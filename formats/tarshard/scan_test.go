package tarshard

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/prep-dev/prep/formats"
)

// archiveRead is what Read did before Scanner, through archive/tar: the
// reference Scanner must agree with.
func archiveRead(r io.Reader, fn func(key string, members map[string][]byte) error) error {
	tr := tar.NewReader(r)
	members := make(map[string][]byte)
	var key string
	flush := func() error {
		if len(members) == 0 {
			return nil
		}
		err := fn(key, members)
		clear(members)
		return err
	}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return flush()
		}
		if err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		dir, base := path.Split(hdr.Name)
		stem, ext, ok := strings.Cut(base, ".")
		if !ok {
			return fmt.Errorf("%s: no extension", hdr.Name)
		}
		if k := dir + stem; k != key || len(members) == 0 {
			if err := flush(); err != nil {
				return err
			}
			key = k
		}
		if members[ext], err = io.ReadAll(tr); err != nil {
			return err
		}
	}
}

// digest lists a tar's samples as a reader hands them out.
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

// rawTar writes entries in format, each body filled with its index.
func rawTar(t *testing.T, format tar.Format, entries ...tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i, h := range entries {
		h.Format = format
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(bytes.Repeat([]byte{byte(i)}, int(h.Size)))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// setSize writes size into the header block at the start of h, with its
// checksum.
func setSize(h []byte, size int64) {
	copy(h[124:136], fmt.Sprintf("%011o\x00", size))
	copy(h[148:156], "        ")
	var sum int64
	for _, c := range h[:512] {
		sum += int64(c)
	}
	copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
}

// TestScanMatchesArchiveTar checks Read, and a Scanner fed chunks of
// several sizes (splitting headers and members across chunks, and
// leaving headers unaligned), against archive/tar on a real shard and on
// tars with long names, folders, empty and odd-sized members.
func TestScanMatchesArchiveTar(t *testing.T) {
	shard, _ := writeShard(t, PNG(), t.TempDir(), imageSamples())
	real, err := os.ReadFile(shard)
	if err != nil {
		t.Fatal(err)
	}
	tars := map[string][]byte{"shard": real}
	long := strings.Repeat("d", 120) + "/" + strings.Repeat("k", 90)
	for _, f := range []tar.Format{tar.FormatPAX, tar.FormatGNU, tar.FormatUSTAR} {
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
		tars[f.String()] = rawTar(t, f, entries...)
	}
	// A folder whose size field is not 0: archive/tar reads no data for
	// it, nor may Scan.
	dir := rawTar(t, tar.FormatUSTAR, tar.Header{Name: "a/", Typeflag: tar.TypeDir, Mode: 0o755},
		tar.Header{Name: "a/x.png", Size: 700, Mode: 0o644}, tar.Header{Name: "a/x.cls", Size: 1, Mode: 0o644})
	setSize(dir, 1024)
	tars["folder with a size"] = dir
	// A GNU long name, then PAX records with another path, then the
	// member: the GNU name wins, in archive/tar.
	gnu := rawTar(t, tar.FormatGNU, tar.Header{Name: long + "-gnu.png", Size: 10, Mode: 0o644})
	pax := rawTar(t, tar.FormatPAX, tar.Header{Name: strings.Repeat("p", 150) + ".png", Size: 10, Mode: 0o644}) // too long for USTAR's split
	tars["GNU then PAX"] = append(slices.Clone(gnu[:512+(len(long)+len("-gnu.png")+1+511)/512*512]), pax...)
	for name, data := range tars {
		want, err := digest(func(fn func(string, map[string][]byte) error) error {
			return archiveRead(bytes.NewReader(data), fn)
		})
		if err != nil || want == "" {
			t.Fatalf("%s: archive/tar read %q, error %v", name, want, err)
		}
		got, err := digest(func(fn func(string, map[string][]byte) error) error {
			return Read(bytes.NewReader(data), fn)
		})
		if err != nil || got != want {
			t.Errorf("%s: Read: error %v\ngot\n%s\nwant\n%s", name, err, got, want)
		}
		var s Scanner // one for every read, as a reader keeps one
		for _, n := range []int{512, 1001, 3 * 512, 4096, len(data)} {
			got, err := digest(func(fn func(string, map[string][]byte) error) error {
				return s.Scan(&chunks{data: data, n: n}, fn)
			})
			if err != nil || got != want {
				t.Errorf("%s, chunks of %d: error %v\ngot\n%s\nwant\n%s", name, n, err, got, want)
			}
		}
	}
}

func TestReadErrors(t *testing.T) {
	good := rawTar(t, tar.FormatUSTAR, tar.Header{Name: "x.png", Size: 3000, Mode: 0o644}, tar.Header{Name: "x.cls", Size: 1, Mode: 0o644})
	corrupt := slices.Clone(good)
	corrupt[10] ^= 1 // the name, under the checksum
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"checksum", corrupt, "read tar: archive/tar: invalid tar header"},
		{"truncated body", good[:2000], "read tar member x.png: unexpected EOF"},
		{"truncated header", good[:3584+100], "read tar: unexpected EOF"},
		{"no extension", rawTar(t, tar.FormatUSTAR, tar.Header{Name: "x", Size: 1, Mode: 0o644}), "tar member x has no extension"},
		{"twice", rawTar(t, tar.FormatUSTAR, tar.Header{Name: "x.png", Size: 1, Mode: 0o644}, tar.Header{Name: "x.png", Size: 1, Mode: 0o644}), "tar member x.png appears twice"},
		{"parent", rawTar(t, tar.FormatUSTAR, tar.Header{Name: "a/../../x.png", Size: 1, Mode: 0o644}), "tar member a/../../x.png: the name leaves the shard's folder"},
		{"absolute", rawTar(t, tar.FormatUSTAR, tar.Header{Name: "/etc/x.png", Size: 1, Mode: 0o644}), "tar member /etc/x.png: the name leaves"},
		{"parent in PAX path", rawTar(t, tar.FormatPAX, tar.Header{Name: "../" + strings.Repeat("y", 120) + ".png", Size: 1, Mode: 0o644}), "the name leaves"},
		{"huge", func() []byte {
			b := rawTar(t, tar.FormatUSTAR, tar.Header{Name: "x.png", Size: 1, Mode: 0o644})
			setSize(b, MaxMember+1)
			return b
		}(), "tar member x.png claims 4294967297 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Read(bytes.NewReader(tc.data), func(string, map[string][]byte) error { return nil })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

// BenchmarkScan times a Scanner's own work on a 37 MB shard of 250
// 224×224×3 PNGs held in memory, the reads left out: what a tar pass
// costs over a raw one from the page cache.
func BenchmarkScan(b *testing.B) {
	samples := make([]formats.Sample, 250)
	for i := range samples {
		samples[i] = imageSample(fmt.Sprintf("s%03d", i), int64(i%10), 224, 224, 3)
	}
	p, _ := writeShard(b, PNG(), b.TempDir(), samples)
	data, err := os.ReadFile(p)
	if err != nil {
		b.Fatal(err)
	}
	var s Scanner
	n := 0
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if err := s.Scan(&chunks{data: data, n: len(data)}, func(string, map[string][]byte) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/sample")
}
