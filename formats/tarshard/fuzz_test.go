package tarshard

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/png"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/prep-dev/prep/formats"
)

// fuzzShards writes a small PNG shard (RGB, grey, a clip, an extra field)
// and a WAV shard, and returns their bytes: seeds that reach Decode.
func fuzzShards(f *testing.F) [][]byte {
	withMask := imageSample("dog/002.png", 1, 5, 6, 3)
	withMask.Fields = append(withMask.Fields, formats.Field{Name: "mask",
		Tensor: formats.Tensor{DType: formats.Float32, Shape: []int{2, 3}, Data: pixels(5, 24)}})
	sets := []struct {
		format  formats.ShardFormat
		samples []formats.Sample
	}{
		{PNG(), []formats.Sample{imageSample("cat/001.jpg", 0, 4, 3, 3), imageSample("grey/a.png", 2, 3, 2),
			imageSample("video/clip.mp4#f0", 4, 2, 3, 2, 3), withMask}},
		{WAV(), []formats.Sample{audio("a.wav", formats.Int16, 6, 2, 8000), audio("b.wav", formats.Float32, 3, 1, 16000)}},
	}
	var out [][]byte
	for _, s := range sets {
		p, _ := writeShard(f, s.format, f.TempDir(), s.samples)
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// tarOf writes entries, each with a body of its Size, in format.
func tarOf(f *testing.F, format tar.Format, entries ...tar.Header) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		h.Format = format
		if err := tw.WriteHeader(&h); err != nil {
			f.Fatal(err)
		}
		if _, err := tw.Write(bytes.Repeat([]byte{'x'}, int(h.Size))); err != nil {
			f.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		f.Fatal(err)
	}
	return buf.Bytes()
}

// FuzzScan: Scan never panics; it hands out the same samples, or fails,
// whatever the chunk sizes and whether its Scanner has read another tar
// before; and where archive/tar reads the whole tar too, both list the
// same samples with the same bytes.
func FuzzScan(f *testing.F) {
	for _, b := range fuzzShards(f) {
		f.Add(b)
	}
	long := strings.Repeat("d", 120) + "/" + strings.Repeat("k", 90)
	for _, format := range []tar.Format{tar.FormatPAX, tar.FormatGNU, tar.FormatUSTAR} {
		name := long + ".png"
		if format == tar.FormatUSTAR {
			name = strings.Repeat("p", 120) + "/z.png" // split into prefix and name
		}
		f.Add(tarOf(f, format,
			tar.Header{Name: "a/", Typeflag: tar.TypeDir, Mode: 0o755},
			tar.Header{Name: "a/x.png", Size: 700, Mode: 0o644},
			tar.Header{Name: "a/x.cls", Size: 1, Mode: 0o644},
			tar.Header{Name: "a/y.json", Size: 0, Mode: 0o644},
			tar.Header{Name: name, Size: 3, Mode: 0o644}))
	}
	f.Add(tarOf(f, tar.FormatUSTAR, tar.Header{Name: "x.png", Size: 1, Mode: 0o644}, tar.Header{Name: "x.png", Size: 1, Mode: 0o644}))
	f.Add(tarOf(f, tar.FormatUSTAR, tar.Header{Name: "noext", Size: 1, Mode: 0o644}))
	// Headers claiming 3 GiB in a 2 KiB tar (TestClaimedSizeBounded).
	for _, typ := range []byte{tar.TypeReg, tar.TypeXHeader} {
		b := tarOf(f, tar.FormatUSTAR, tar.Header{Name: "x.png", Size: 1, Mode: 0o644})
		b[156] = typ
		setSize(b, 3<<30)
		f.Add(b)
	}
	warm := fuzzShards(f)[0]
	f.Fuzz(func(t *testing.T, data []byte) {
		want, wantErr := digest(func(fn func(string, map[string][]byte) error) error {
			return Read(bytes.NewReader(data), fn)
		})
		// One Scanner for every read, first of another tar, as a reader
		// keeps one from shard to shard.
		var s Scanner
		if err := s.Scan(&chunks{data: warm, n: 512}, func(string, map[string][]byte) error { return nil }); err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{7, 512, 1001, max(len(data), 1)} {
			got, err := digest(func(fn func(string, map[string][]byte) error) error {
				return s.Scan(&chunks{data: data, n: n}, fn)
			})
			if got != want || (err == nil) != (wantErr == nil) {
				t.Fatalf("chunks of %d: error %v\n%s\nRead: error %v\n%s", n, err, got, want, wantErr)
			}
		}
		if wantErr != nil {
			return
		}
		ref, err := digest(func(fn func(string, map[string][]byte) error) error {
			return archiveRead(bytes.NewReader(data), fn)
		})
		if err == nil && ref != want {
			t.Fatalf("Read:\n%s\narchive/tar:\n%s", want, ref)
		}
	})
}

// FuzzDecode: Decode never panics, and a sample it accepts has the
// primary field first and only valid tensors, none of them sharing memory
// with the members.
func FuzzDecode(f *testing.F) {
	for _, shard := range fuzzShards(f) {
		if err := Read(bytes.NewReader(shard), func(key string, m map[string][]byte) error {
			var primary, extra []byte
			ext := ""
			// A clip's first frame stands for it: one frame is a clip too.
			for _, x := range slices.Sorted(maps.Keys(m)) {
				switch {
				case primary == nil && (x == "png" || x == "wav" || isFrame(x)):
					ext, primary = x, bytes.Clone(m[x])
				case strings.HasSuffix(x, ".npy"):
					extra = bytes.Clone(m[x])
				}
			}
			f.Add(ext, primary, extra, bytes.Clone(m["cls"]), bytes.Clone(m["json"]))
			return nil
		}); err != nil {
			f.Fatal(err)
		}
	}
	f.Add("png", pngBomb(100000, 100000, 16, 2), []byte(nil), []byte(nil), []byte(nil))
	f.Add("0000.png", pngBomb(1<<31-1, 1<<31-1, 8, 6), []byte(nil), []byte("7"), []byte(`{"key": "k"}`))
	f.Fuzz(func(t *testing.T, ext string, primary, extra, cls, js []byte) {
		members := map[string][]byte{ext: primary}
		for x, b := range map[string][]byte{"mask.npy": extra, "cls": cls, "json": js} {
			if len(b) > 0 {
				members[x] = b
			}
		}
		s, err := Decode("k", members)
		if err != nil {
			return
		}
		if len(s.Fields) == 0 || s.Fields[0].Name != formats.DataField {
			t.Fatalf("no primary field first: %d fields", len(s.Fields))
		}
		for _, fl := range s.Fields {
			if err := fl.Validate(); err != nil {
				t.Fatalf("field %s: %v", fl.Name, err)
			}
			for _, d := range fl.Shape {
				if d < 0 {
					t.Fatalf("field %s: shape %v", fl.Name, fl.Shape)
				}
			}
			for x, b := range members {
				if overlaps(fl.Data, b) {
					t.Fatalf("field %s shares memory with member %s", fl.Name, x)
				}
			}
		}
	})
}

// overlaps reports whether a and b share memory.
func overlaps(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0, b0 := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return a0 < b0+uintptr(len(b)) && b0 < a0+uintptr(len(a))
}

// TestClaimedSizeBounded: FuzzScan found that a 2 KiB tar whose header
// claims a 3 GiB member made Scan allocate 3 GiB before finding the tar
// short (tens of seconds a read where fresh memory is slow to fault in),
// and that PAX records were read whatever size they claimed. Buffers now
// grow as the bytes arrive, and PAX records are bounded as archive/tar
// bounds them.
func TestClaimedSizeBounded(t *testing.T) {
	member := func(typ byte, size int64) []byte {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		if err := tw.WriteHeader(&tar.Header{Name: "x.png", Size: 1, Mode: 0o644, Format: tar.FormatUSTAR}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte("x"))
		tw.Close()
		b := buf.Bytes()
		b[156] = typ
		setSize(b, size) // and the checksum
		return b
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"member", member(tar.TypeReg, 3<<30), "read tar member x.png: unexpected EOF"},
		{"PAX records", member(tar.TypeXHeader, 3<<30), "over archive/tar's limit of 1048576"},
	} {
		for _, n := range []int{512, len(tc.data)} {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			var s Scanner
			err := s.Scan(&chunks{data: tc.data, n: n}, func(string, map[string][]byte) error { return nil })
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s, chunks of %d: error %v, want one with %q", tc.name, n, err, tc.want)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > 2*copyStep {
				t.Errorf("%s, chunks of %d: %d bytes allocated for a %d-byte tar", tc.name, n, got, len(tc.data))
			}
		}
	}
}

// TestLargeMember checks copyOut's growing buffers on a member several
// times copyStep: the bytes archive/tar reads, whatever the chunk size,
// and no allocation but the key once the Scanner is warm.
func TestLargeMember(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := pixels(9, 3*copyStep+5)
	for _, m := range []struct {
		name string
		data []byte
	}{{"a/x.png", body}, {"a/x.cls", []byte("7")}} {
		if err := tw.WriteHeader(&tar.Header{Name: m.name, Size: int64(len(m.data)), Mode: 0o644}); err != nil {
			t.Fatal(err)
		}
		tw.Write(m.data)
	}
	tw.Close()
	data := buf.Bytes()
	want, err := digest(func(fn func(string, map[string][]byte) error) error {
		return archiveRead(bytes.NewReader(data), fn)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{512, 1001, readChunk, len(data)} {
		var s Scanner
		scan := func() {
			got, err := digest(func(fn func(string, map[string][]byte) error) error {
				return s.Scan(&chunks{data: data, n: n}, fn)
			})
			if err != nil || got != want {
				t.Fatalf("chunks of %d: error %v\n%s\nwant\n%s", n, err, got, want)
			}
		}
		scan()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		scan()
		runtime.ReadMemStats(&after)
		if got := after.TotalAlloc - before.TotalAlloc; got > 64<<10 {
			t.Errorf("chunks of %d: a warm Scanner allocated %d bytes", n, got)
		}
	}
}

// pngChunks builds a PNG from chunks (type, body) with valid CRCs.
func pngChunks(chunks ...string) []byte {
	b := []byte("\x89PNG\r\n\x1a\n")
	for i := 0; i+1 < len(chunks); i += 2 {
		kind, body := chunks[i], chunks[i+1]
		b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
		b = append(b, kind...)
		b = append(b, body...)
		b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE([]byte(kind+body)))
	}
	return b
}

// pngBomb is a 72-byte PNG whose header declares w×h pixels of depth bits
// and color type ctype, with the pixel data of a 2×1 grey image.
func pngBomb(w, h uint32, depth, ctype byte) []byte {
	var small bytes.Buffer
	png.Encode(&small, image.NewGray(image.Rect(0, 0, 2, 1)))
	b := small.Bytes()
	idat := b[8+25+8 : len(b)-12-4] // IHDR is 25 bytes with its length and CRC; then IDAT's header; IEND is 12
	ihdr := binary.BigEndian.AppendUint32(nil, w)
	ihdr = binary.BigEndian.AppendUint32(ihdr, h)
	ihdr = append(ihdr, depth, ctype, 0, 0, 0)
	return pngChunks("IHDR", string(ihdr), "IDAT", string(idat), "IEND", "")
}

// TestPNGBomb: a PNG member whose header declares far more pixels than
// its bytes could inflate to is refused before image/png allocates them
// (100000×100000 RGB at 16 bits killed the process with the runtime's
// out-of-memory error), while a genuine PNG compressed as far as deflate
// goes still decodes.
func TestPNGBomb(t *testing.T) {
	for _, b := range [][]byte{pngBomb(100000, 100000, 16, 2), pngBomb(50000, 50000, 8, 0)} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := Decode("k", map[string][]byte{"png": b})
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), "more than its 72 bytes can hold") {
			t.Errorf("error %v, want a refusal of the declared size", err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
			t.Errorf("%d bytes allocated to refuse a %d-byte PNG", got, len(b))
		}
	}
	// 2048×2048 black: about 1000:1, near deflate's limit.
	var zeros bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&zeros, image.NewGray(image.Rect(0, 0, 2048, 2048))); err != nil {
		t.Fatal(err)
	}
	s, err := Decode("k", map[string][]byte{"png": zeros.Bytes()})
	if err != nil {
		t.Fatalf("%d-byte PNG of 2048×2048: %v", zeros.Len(), err)
	}
	if got := s.Fields[0].Shape; !slices.Equal(got, []int{2048, 2048, 1}) {
		t.Fatalf("shape %v", got)
	}
	t.Logf("2048×2048 black: %d bytes, %.0f:1", zeros.Len(), float64(2048*2049)/float64(zeros.Len()))
}
