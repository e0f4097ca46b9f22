package imgdec

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/prep-dev/prep/internal/testenv"
	"golang.org/x/sys/cpu"
)

// pngSpec describes a PNG for TestPNGDecodersAgree to write: every color
// type and bit depth, interlaced or not, with a tRNS chunk or not.
type pngSpec struct {
	w, h, ctype, depth int
	interlace, trns    bool
	extra              int // image bytes past the last row
	// edit, if set, changes the chunks after IHDR before they are
	// written, to make malformed files.
	edit func([]pngChunk) []pngChunk
}

type pngChunk struct {
	typ  string
	data []byte
}

// channels per color type: grey, -, RGB, palette, grey+alpha, -, RGBA.
var pngChannels = map[int]int{0: 1, 2: 3, 3: 1, 4: 2, 6: 4}

// encode writes the PNG, its rows random (filter bytes included, so every
// filter runs) over a few sample values, so that tRNS's value occurs.
func (s pngSpec) encode(seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 2))
	sample := []byte{0x00, 0x07, 0xc8, 0xff}
	bpp := pngChannels[s.ctype] * s.depth // bits
	// tRNS's value, in 16 bits whatever the depth, as the format has it:
	// 7, or all ones below 3 bits.
	v := byte(min(7, 1<<s.depth-1))
	hi := byte(0)
	if s.depth == 16 {
		hi = v
	}
	var raw []byte
	rows := 0
	row := func(n int) {
		// Every other row unfiltered, so that its samples (tRNS's value
		// among them) are the decoded ones; the rest through filters.
		f := byte(0)
		if rows++; rows%2 == 0 {
			f = byte(1 + r.IntN(4))
		}
		raw = append(raw, f)
		if f == 0 && s.trns && s.depth >= 8 {
			for range n {
				for range pngChannels[s.ctype] {
					if s.depth == 16 {
						raw = append(raw, hi)
					}
					raw = append(raw, v)
				}
				if r.IntN(3) > 0 { // most pixels not transparent
					for k := range bpp / 8 {
						raw[len(raw)-1-k] = sample[r.IntN(4)]
					}
				}
			}
			return
		}
		for range (n*bpp + 7) / 8 {
			raw = append(raw, sample[r.IntN(4)]^byte(r.IntN(2)))
		}
	}
	if s.interlace {
		for _, p := range [7][4]int{{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4}, {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}} {
			pw, ph := (s.w-p[0]+p[2]-1)/p[2], (s.h-p[1]+p[3]-1)/p[3]
			if pw <= 0 || ph <= 0 {
				continue
			}
			for range ph {
				row(pw)
			}
		}
	} else {
		for range s.h {
			row(s.w)
		}
	}
	raw = append(raw, make([]byte, s.extra)...)
	var chunks []pngChunk
	chunk := func(typ string, data []byte) { chunks = append(chunks, pngChunk{typ, data}) }
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(s.w))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(s.h))
	il := byte(0)
	if s.interlace {
		il = 1
	}
	chunk("IHDR", append(ihdr, byte(s.depth), byte(s.ctype), 0, 0, il))
	if s.ctype == 3 {
		plte := make([]byte, 3<<s.depth)
		for i := range plte {
			plte[i] = byte(r.IntN(256))
		}
		chunk("PLTE", plte)
	}
	if s.trns {
		switch s.ctype {
		case 0:
			chunk("tRNS", []byte{hi, v})
		case 2:
			chunk("tRNS", []byte{hi, v, hi, v, hi, v})
		case 3:
			chunk("tRNS", []byte{0, 128, 255, 3}[:min(4, 1<<s.depth)]) // the first entries' alphas
		}
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(raw)
	zw.Close()
	chunk("IDAT", z.Bytes())
	chunk("IEND", nil)
	if s.edit != nil {
		chunks = append(chunks[:1], s.edit(chunks[1:])...)
	}
	var out bytes.Buffer
	out.WriteString("\x89PNG\r\n\x1a\n")
	for _, c := range chunks {
		binary.Write(&out, binary.BigEndian, uint32(len(c.data)))
		sum := crc32.NewIEEE()
		sum.Write([]byte(c.typ))
		sum.Write(c.data)
		out.WriteString(c.typ)
		out.Write(c.data)
		binary.Write(&out, binary.BigEndian, sum.Sum32())
	}
	return out.Bytes()
}

// needTurbo stops t where libpng and libjpeg-turbo are not built in.
func needTurbo(t *testing.T) {
	t.Helper()
	testenv.NeedCgo(t, "libpng and libjpeg-turbo", TurboAvailable())
}

// TestPNGDecodersAgree decodes PNGs of every color type, bit depth,
// interlacing and transparency with image/png and with libpng: the
// pixels must be the same bytes (image/png is checked against Pillow in
// TestPixelsMatchPillow).
func TestPNGDecodersAgree(t *testing.T) {
	needTurbo(t)
	depths := map[int][]int{0: {1, 2, 4, 8, 16}, 2: {8, 16}, 3: {1, 2, 4, 8}, 4: {8, 16}, 6: {8, 16}}
	var specs []pngSpec
	for ctype, ds := range depths {
		for _, d := range ds {
			for _, il := range []bool{false, true} {
				for _, trns := range []bool{false, true} {
					if trns && ctype >= 4 {
						continue // alpha types have no tRNS
					}
					specs = append(specs, pngSpec{w: 13, h: 11, ctype: ctype, depth: d, interlace: il, trns: trns})
				}
			}
		}
	}
	specs = append(specs, pngSpec{w: 1, h: 1, ctype: 2, depth: 8, interlace: true},
		pngSpec{w: 3, h: 2, ctype: 6, depth: 16, interlace: true}, pngSpec{w: 9, h: 1, ctype: 3, depth: 1, interlace: true, trns: true})
	for i, s := range specs {
		name := fmt.Sprintf("%dx%d/ctype=%d/depth=%d/interlace=%v/trns=%v", s.w, s.h, s.ctype, s.depth, s.interlace, s.trns)
		t.Run(name, func(t *testing.T) {
			data := s.encode(uint64(i))
			want, winfo, err := Decode(data, Options{Decoder: DecoderGo})
			if err != nil {
				t.Fatalf("image/png: %v", err)
			}
			got, ginfo, err := Decode(data, Options{Decoder: DecoderTurbo})
			if err != nil {
				t.Fatalf("libpng: %v", err)
			}
			if s.trns && !hasAlpha(want) {
				t.Errorf("no pixel is transparent: the tRNS value never occurs")
			}
			if got.Rect != want.Rect || !bytes.Equal(got.Pix, want.Pix) || ginfo != winfo {
				t.Errorf("libpng gives %v %+v\n% x\nimage/png %v %+v\n% x", got.Rect, ginfo, got.Pix, want.Rect, winfo, want.Pix)
			}
		})
	}
}

func hasAlpha(img *image.NRGBA) bool {
	for i := 3; i < len(img.Pix); i += 4 {
		if img.Pix[i] != 0xff {
			return true
		}
	}
	return false
}

// TestPNGBeyondLibpng decodes PNGs past libpng's width limit (a million
// pixels, its default), which image/png reads: the turbo decoder falls
// back to it rather than lose the image (16-bit grey, which prep_png_fast
// leaves to libpng), or prep_png_fast, which has no such limit, decodes it
// (8-bit grey).
func TestPNGBeyondLibpng(t *testing.T) {
	needTurbo(t)
	for _, depth := range []int{16, 8} {
		data := pngSpec{w: 1_000_001, h: 1, ctype: 0, depth: depth}.encode(9)
		if _, err := decodeLibpng(data, image.Config{Width: 1_000_001, Height: 1}); err == nil {
			// Debian's libpng keeps the default limit: CI must reach the fallback.
			testenv.Need(t, "a libpng that refuses images over 1,000,000 pixels wide (its default limit)",
				"install Debian's libpng-dev (make deps), not a libpng built with larger user limits")
		}
		img := newNRGBA(1_000_001, 1)
		if fast := pngFast(data, img); fast != (depth == 8) {
			t.Errorf("depth %d: prep_png_fast took it: %v", depth, fast)
		}
		Release(img)
		want, _, err := Decode(data, Options{Decoder: DecoderGo})
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := Decode(data, Options{Decoder: DecoderTurbo})
		if err != nil || !bytes.Equal(got.Pix, want.Pix) {
			t.Fatalf("depth %d: turbo: err %v, same pixels as image/png: %v", depth, err, err == nil && bytes.Equal(got.Pix, want.Pix))
		}
	}
}

// TestPNGMalformedAgree decodes PNGs that break the format's rules in
// ways libpng passes over with at most a warning (a tRNS longer than the
// palette or with a key out of range, chunks out of place, too much image
// data): the turbo decoder must give what image/png gives, pixels or
// refusal, so that --decoder does not change a dataset.
func TestPNGMalformedAgree(t *testing.T) {
	needTurbo(t)
	find := func(cs []pngChunk, typ string) int {
		for i, c := range cs {
			if c.typ == typ {
				return i
			}
		}
		return -1
	}
	insert := func(cs []pngChunk, before string, c pngChunk) []pngChunk {
		i := find(cs, before)
		return append(cs[:i:i], append([]pngChunk{c}, cs[i:]...)...)
	}
	// set replaces a chunk's data, or inserts the chunk before IDAT.
	set := func(typ string, data []byte) func([]pngChunk) []pngChunk {
		return func(cs []pngChunk) []pngChunk {
			if i := find(cs, typ); i >= 0 {
				cs[i].data = data
				return cs
			}
			return insert(cs, "IDAT", pngChunk{typ, data})
		}
	}
	cases := []struct {
		name string
		spec pngSpec
	}{
		{"palette tRNS longer than PLTE", pngSpec{w: 13, h: 11, ctype: 3, depth: 1, trns: true, edit: set("tRNS", []byte{0, 128, 255})}},
		{"1-bit grey key 3", pngSpec{w: 13, h: 11, ctype: 0, depth: 1, edit: set("tRNS", []byte{0, 3})}},
		{"1-bit grey key 2", pngSpec{w: 13, h: 11, ctype: 0, depth: 1, edit: set("tRNS", []byte{0, 2})}},
		{"2-bit grey key 5", pngSpec{w: 13, h: 11, ctype: 0, depth: 2, edit: set("tRNS", []byte{0, 5})}},
		{"4-bit grey key 0x13", pngSpec{w: 13, h: 11, ctype: 0, depth: 4, edit: set("tRNS", []byte{0, 0x13})}},
		{"8-bit RGB key over 255", pngSpec{w: 13, h: 11, ctype: 2, depth: 8, edit: set("tRNS", []byte{1, 7, 0, 7, 0, 7})}},
		{"grey tRNS of 4 bytes", pngSpec{w: 13, h: 11, ctype: 0, depth: 8, edit: set("tRNS", []byte{0, 7, 0, 7})}},
		{"tRNS in RGBA", pngSpec{w: 13, h: 11, ctype: 6, depth: 8, edit: set("tRNS", []byte{0, 7, 0, 7, 0, 7})}},
		{"PLTE in grey", pngSpec{w: 13, h: 11, ctype: 0, depth: 8, edit: set("PLTE", []byte{1, 2, 3})}},
		{"PLTE longer than 1 bit allows", pngSpec{w: 13, h: 11, ctype: 3, depth: 1, edit: set("PLTE", make([]byte, 12))}},
		{"tRNS before PLTE", pngSpec{w: 13, h: 11, ctype: 3, depth: 2, edit: func(cs []pngChunk) []pngChunk {
			return insert(cs, "PLTE", pngChunk{"tRNS", []byte{0, 128}})
		}}},
		{"tRNS twice", pngSpec{w: 13, h: 11, ctype: 3, depth: 2, trns: true, edit: func(cs []pngChunk) []pngChunk {
			return insert(cs, "IDAT", pngChunk{"tRNS", []byte{9}})
		}}},
		{"tRNS after IDAT", pngSpec{w: 13, h: 11, ctype: 3, depth: 2, edit: func(cs []pngChunk) []pngChunk {
			return insert(cs, "IEND", pngChunk{"tRNS", []byte{0, 128}})
		}}},
		{"too much image data", pngSpec{w: 13, h: 11, ctype: 2, depth: 8, extra: 100}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := tc.spec.encode(uint64(100 + i))
			want, _, werr := Decode(data, Options{Decoder: DecoderGo})
			got, _, gerr := Decode(data, Options{Decoder: DecoderTurbo})
			switch {
			case (werr == nil) != (gerr == nil):
				t.Fatalf("image/png: %v; turbo: %v", werr, gerr)
			case werr != nil && werr.Error() != gerr.Error():
				t.Errorf("turbo refuses with %q, image/png with %q", gerr, werr)
			case werr == nil && !bytes.Equal(got.Pix, want.Pix):
				t.Errorf("turbo gives other pixels than image/png:\n% x\n% x", got.Pix, want.Pix)
			}
		})
	}
}

// TestPNGFast checks which PNGs prep_png_fast (libdeflate) takes and that
// it gives image/png's pixels for them; the rest go to libpng, as the
// decoders' agreement tests check.
func TestPNGFast(t *testing.T) {
	needTurbo(t)
	split := func(parts int) func([]pngChunk) []pngChunk { // the IDAT in several chunks
		return func(cs []pngChunk) []pngChunk {
			var out []pngChunk
			for _, c := range cs {
				if c.typ != "IDAT" {
					out = append(out, c)
					continue
				}
				for i := range parts {
					out = append(out, pngChunk{"IDAT", c.data[i*len(c.data)/parts : (i+1)*len(c.data)/parts]})
				}
			}
			return out
		}
	}
	between := func(cs []pngChunk) []pngChunk { // an ancillary chunk between two IDATs
		cs = split(2)(cs)
		i := len(cs) - 2
		return append(cs[:i:i], append([]pngChunk{{"tEXt", []byte("a\x00b")}}, cs[i:]...)...)
	}
	text := func(cs []pngChunk) []pngChunk { return append([]pngChunk{{"tEXt", []byte("k\x00v")}}, cs...) }
	cases := []struct {
		name string
		spec pngSpec
		fast bool
	}{
		{"grey", pngSpec{w: 37, h: 9, ctype: 0, depth: 8}, true},
		{"grey+alpha", pngSpec{w: 37, h: 9, ctype: 4, depth: 8}, true},
		{"RGB", pngSpec{w: 37, h: 9, ctype: 2, depth: 8}, true},
		{"RGBA", pngSpec{w: 37, h: 9, ctype: 6, depth: 8}, true},
		{"RGB one pixel", pngSpec{w: 1, h: 1, ctype: 2, depth: 8}, true},
		{"RGB, 5 IDATs", pngSpec{w: 64, h: 30, ctype: 2, depth: 8, edit: split(5)}, true},
		{"RGB, a tEXt first", pngSpec{w: 20, h: 4, ctype: 2, depth: 8, edit: text}, true},
		{"RGB, tEXt between IDATs", pngSpec{w: 20, h: 4, ctype: 2, depth: 8, edit: between}, false},
		{"RGB, tRNS", pngSpec{w: 37, h: 9, ctype: 2, depth: 8, trns: true}, false},
		{"RGB interlaced", pngSpec{w: 37, h: 9, ctype: 2, depth: 8, interlace: true}, false},
		{"RGB 16-bit", pngSpec{w: 37, h: 9, ctype: 2, depth: 16}, false},
		{"palette", pngSpec{w: 37, h: 9, ctype: 3, depth: 8}, false},
		{"too much data", pngSpec{w: 37, h: 9, ctype: 2, depth: 8, extra: 1}, false},
	}
	for _, simd := range pngSIMDModes(t) {
		for i, c := range cases {
			t.Run(fmt.Sprintf("%s/simd=%v", c.name, simd), func(t *testing.T) {
				usePNGSIMD(simd)
				data := c.spec.encode(uint64(100 + i))
				img := newNRGBA(c.spec.w, c.spec.h)
				defer Release(img)
				fast := pngFast(data, img)
				if fast != c.fast {
					t.Fatalf("prep_png_fast took it: %v, want %v", fast, c.fast)
				}
				want, _, werr := Decode(data, Options{Decoder: DecoderGo})
				got, _, gerr := Decode(data, Options{Decoder: DecoderTurbo})
				if (werr == nil) != (gerr == nil) || werr == nil && !bytes.Equal(got.Pix, want.Pix) {
					t.Fatalf("turbo: %v; image/png: %v; same pixels: %v", gerr, werr, werr == nil && gerr == nil && bytes.Equal(got.Pix, want.Pix))
				}
				if fast && !bytes.Equal(img.Pix, want.Pix) {
					t.Errorf("prep_png_fast\n% x\nimage/png\n% x", img.Pix, want.Pix)
				}
			})
		}
	}
	usePNGSIMD(true)
	// Damage the RGB file: a byte of the IDAT changed, its CRC left
	// (refused by the CRC) or made right (refused by the zlib stream or
	// its Adler-32): never taken, and the decoders still agree.
	data := cases[2].spec.encode(102)
	at := bytes.Index(data, []byte("IDAT")) + 4 + 20
	for _, fixCRC := range []bool{false, true} {
		d := bytes.Clone(data)
		d[at] ^= 0x5a
		if fixCRC {
			start := bytes.Index(d, []byte("IDAT"))
			n := int(binary.BigEndian.Uint32(d[start-4:]))
			binary.BigEndian.PutUint32(d[start+4+n:], crc32.ChecksumIEEE(d[start:start+4+n]))
		}
		img := newNRGBA(37, 9)
		if pngFast(d, img) {
			t.Errorf("damaged IDAT (CRC fixed: %v) taken", fixCRC)
		}
		Release(img)
		_, _, werr := Decode(d, Options{Decoder: DecoderGo})
		_, _, gerr := Decode(d, Options{Decoder: DecoderTurbo})
		if (werr == nil) != (gerr == nil) {
			t.Errorf("damaged IDAT (CRC fixed: %v): turbo %v, image/png %v", fixCRC, gerr, werr)
		}
	}
}

// pngSIMDModes lists the unfiltering loops to test: the scalar one, and
// the SIMD one where this CPU has SSE4.1.
func pngSIMDModes(t *testing.T) []bool {
	if !usePNGSIMD(true) {
		if cpu.X86.HasSSE41 {
			t.Fatal("the CPU has SSE4.1, but prep_png_fast does not use it")
		}
		return []bool{false}
	}
	return []bool{true, false}
}

// TestPNGFastPhotos re-encodes real photos with image/png (whose encoder
// picks each row's filter, Paeth often) as RGB, RGBA and grey:
// prep_png_fast must take them and give image/png's pixels. Photos, unlike
// TestPNGFast's random bytes, have the Paeth predictor's ties.
func TestPNGFastPhotos(t *testing.T) {
	needTurbo(t)
	for _, name := range []string{"everyday/chelsea.jpg", "science/retina.jpg", "everyday/coffee.png"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "images", name))
		if err != nil {
			t.Fatal(err)
		}
		src, _, err := Decode(data, Options{Decoder: DecoderGo})
		if err != nil {
			t.Fatal(err)
		}
		translucent := image.NewNRGBA(src.Rect)
		copy(translucent.Pix, src.Pix)
		for i := 3; i < len(translucent.Pix); i += 4 {
			translucent.Pix[i] = byte(i / 4)
		}
		grey := image.NewGray(src.Rect)
		for y := range src.Rect.Dy() {
			for x := range src.Rect.Dx() {
				grey.Set(x, y, src.At(x, y))
			}
		}
		for kind, m := range map[string]image.Image{"RGB": src, "RGBA": translucent, "grey": grey} {
			var buf bytes.Buffer
			if err := png.Encode(&buf, m); err != nil {
				t.Fatal(err)
			}
			want, _, err := Decode(buf.Bytes(), Options{Decoder: DecoderGo})
			if err != nil {
				t.Fatal(err)
			}
			for _, simd := range pngSIMDModes(t) {
				usePNGSIMD(simd)
				img := newNRGBA(want.Rect.Dx(), want.Rect.Dy())
				if !pngFast(buf.Bytes(), img) {
					t.Errorf("%s as %s (SIMD %v): not taken", name, kind, simd)
				} else if !bytes.Equal(img.Pix, want.Pix) {
					t.Errorf("%s as %s (SIMD %v): prep_png_fast's pixels differ from image/png's", name, kind, simd)
				}
				Release(img)
			}
			usePNGSIMD(true)
			Release(want)
		}
		Release(src)
	}
}
