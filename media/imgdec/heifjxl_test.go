package imgdec

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prep-dev/prep/internal/testenv"
)

// heifJXLCase is a file made by a library's own encoder from a PNG.
type heifJXLCase struct {
	name   string
	format string // Info.Format: heif, avif, jxl
	src    string // the PNG's kind: rgb, rgba, grey
	w, h   int
	enc    []string // encoder and flags; IN and OUT are replaced
	dec    []string // the library's decoder to PNG, the reference
}

// TestHEIFAVIFJXL encodes photo crops with libheif's and libjxl's own
// tools, decodes them with prep and with the library's own decoder
// (heif-convert, djxl) to PNG, and compares every pixel: prep reads them
// as the library means them to be read, the colour conversion and the
// alpha included. Pillow 9.4 (Debian 12) reads none of the three, so the
// reference is the library's tool rather than Pillow.
func TestHEIFAVIFJXL(t *testing.T) {
	needTurbo(t) // cgo: libheif and libjxl are bound through it
	heifEnc := testenv.NeedCommand(t, "heif-enc", "libheif-examples")
	heifDec := testenv.NeedCommand(t, "heif-convert", "libheif-examples")
	cjxl := testenv.NeedCommand(t, "cjxl", "libjxl-tools")
	djxl := testenv.NeedCommand(t, "djxl", "libjxl-tools")
	if err := heifLib(); err != nil {
		testenv.Need(t, "libheif.so.1 ("+err.Error()+")", "apt install libheif1")
	}
	if err := jxlLib(); err != nil {
		testenv.Need(t, "libjxl ("+err.Error()+")", "apt install libjxl0.7")
	}
	heif := []string{heifDec, "IN", "OUT"}
	jxl := []string{djxl, "IN", "OUT"}
	cases := []heifJXLCase{
		{"HEIC RGB", "heif", "rgb", 96, 64, []string{heifEnc, "-q", "70", "IN", "-o", "OUT"}, heif},
		{"HEIC odd size", "heif", "rgb", 37, 23, []string{heifEnc, "-q", "90", "IN", "-o", "OUT"}, heif},
		{"HEIC with alpha", "heif", "rgba", 48, 40, []string{heifEnc, "-q", "70", "IN", "-o", "OUT"}, heif},
		// 10 bits from a 16-bit PNG: heif-convert writes 16 bits, of which
		// prep keeps the high byte.
		{"HEIC 10-bit", "heif", "rgb16", 40, 28, []string{heifEnc, "-b", "10", "-q", "80", "IN", "-o", "OUT"}, heif},
		{"AVIF RGB", "avif", "rgb", 96, 64, []string{heifEnc, "-A", "-q", "60", "IN", "-o", "OUT"}, heif},
		{"AVIF with alpha", "avif", "rgba", 33, 17, []string{heifEnc, "-A", "-q", "60", "IN", "-o", "OUT"}, heif},
		{"JPEG XL lossy", "jxl", "rgb", 96, 64, []string{cjxl, "IN", "OUT", "-d", "1"}, jxl},
		{"JPEG XL lossless", "jxl", "rgb", 37, 23, []string{cjxl, "IN", "OUT", "-d", "0"}, jxl},
		{"JPEG XL grey", "jxl", "grey", 40, 30, []string{cjxl, "IN", "OUT", "-d", "0"}, jxl},
		{"JPEG XL with alpha", "jxl", "rgba", 48, 40, []string{cjxl, "IN", "OUT", "-d", "0"}, jxl},
		// 16 bits, lossless: the high byte, where libjxl's 8-bit output
		// would round.
		{"JPEG XL 16-bit", "jxl", "rgb16", 40, 28, []string{cjxl, "IN", "OUT", "-d", "0"}, jxl},
		// cjxl keeps a JPEG's EXIF orientation (6: turn 90° clockwise) as
		// the codestream's, which libjxl applies: 40×28 decodes 28×40.
		{"JPEG XL from a turned JPEG", "jxl", "jpeg-orient6", 40, 28, []string{cjxl, "IN", "OUT"}, jxl},
	}
	dir := t.TempDir()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := filepath.Join(dir, fmt.Sprintf("%d.png", i))
			if c.src == "jpeg-orient6" {
				in = filepath.Join(dir, fmt.Sprintf("%d.jpg", i))
			}
			writeCasePNG(t, in, c.src, c.w, c.h)
			file := filepath.Join(dir, fmt.Sprintf("%d.%s", i, c.format))
			run(t, c.enc, in, file)
			ref := filepath.Join(dir, fmt.Sprintf("%d-ref.png", i))
			run(t, c.dec, file, ref)
			want, wide := readPNG(t, ref)
			if c.src == "rgb16" && !wide {
				t.Fatal("the reference decode is not 16-bit: the file holds no more than 8 bits")
			}
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			got, info, err := Decode(data, Options{})
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			defer Release(got)
			w, h := c.w, c.h
			if c.src == "jpeg-orient6" {
				w, h = h, w
			}
			if info.Format != c.format || info.Width != w || info.Height != h {
				t.Errorf("info %+v, want format %s, %dx%d", info, c.format, w, h)
			}
			if info.Opaque != (c.src != "rgba") {
				t.Errorf("opaque = %v for a %s source", info.Opaque, c.src)
			}
			if got.Rect != want.Rect {
				t.Fatalf("%v, reference %v", got.Rect, want.Rect)
			}
			for y := range h {
				for x := range w {
					g, w := got.NRGBAAt(x, y), want.NRGBAAt(x, y)
					if c.src != "rgba" {
						w.A = 255
					}
					if g != w {
						t.Fatalf("pixel (%d,%d) = %v, the library's own decoder gives %v", x, y, g, w)
					}
				}
			}
			// Cut short or damaged: an error naming the format, never a panic.
			name := map[string]string{"heif": "HEIF", "avif": "AVIF", "jxl": "JPEG XL"}[c.format]
			for _, cut := range []int{len(data) / 2, len(data) - 1, 40} {
				if _, _, err := Decode(data[:cut], Options{}); err == nil {
					t.Errorf("cut to %d bytes: no error", cut)
				} else if msg := err.Error(); !strings.HasPrefix(msg, "truncated "+name+": ") && !strings.HasPrefix(msg, "corrupt "+name+": ") {
					t.Errorf("cut to %d bytes: %q, want truncated or corrupt %s", cut, msg, name)
				}
			}
			// The size is checked against --max-pixels before decoding.
			if _, _, err := Decode(data, Options{MaxPixels: int64(w*h - 1)}); err == nil || !strings.Contains(err.Error(), "max-pixels") {
				t.Errorf("MaxPixels one short: err = %v", err)
			}
		})
	}
}

// writeCasePNG writes a w×h crop of a test photo as an RGB, RGBA (alpha
// varying), grey or 16-bit PNG, or (jpeg-orient6) as a JPEG whose EXIF
// says to turn it 90° clockwise.
func writeCasePNG(t *testing.T, path, kind string, w, h int) {
	t.Helper()
	photo, _, err := Decode(readTestdata(t, "everyday/coffee.png"), Options{Decoder: DecoderGo})
	if err != nil {
		t.Fatal(err)
	}
	defer Release(photo)
	var m image.Image
	switch kind {
	case "grey":
		g := image.NewGray(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				g.Set(x, y, photo.At(x+40, y+30))
			}
		}
		m = g
	case "rgb16":
		n := image.NewNRGBA64(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				c := photo.NRGBAAt(x+40, y+30)
				// Low bytes that vary, so that 16 bits are not 8 shifted.
				n.SetNRGBA64(x, y, color.NRGBA64{uint16(c.R)<<8 | uint16(x*7), uint16(c.G)<<8 | uint16(y*5), uint16(c.B) << 8, 0xffff})
			}
		}
		m = n
	default:
		n := image.NewNRGBA(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				c := photo.NRGBAAt(x+40, y+30)
				if kind == "rgba" {
					c.A = uint8(255 - 4*x - y)
				}
				n.SetNRGBA(x, y, c)
			}
		}
		m = n
	}
	var buf bytes.Buffer
	if kind == "jpeg-orient6" {
		if err := jpeg.Encode(&buf, m, &jpeg.Options{Quality: 90}); err != nil {
			t.Fatal(err)
		}
		// An APP1 Exif segment after SOI: a little-endian TIFF header and
		// one IFD entry, Orientation (0x0112, SHORT) = 6.
		exif := []byte("\xff\xe1\x00\x22Exif\x00\x00II*\x00\x08\x00\x00\x00\x01\x00\x12\x01\x03\x00\x01\x00\x00\x00\x06\x00\x00\x00\x00\x00\x00\x00")
		b := append(append([]byte{0xff, 0xd8}, exif...), buf.Bytes()[2:]...)
		buf.Reset()
		buf.Write(b)
	} else if err := png.Encode(&buf, m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "images", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// readPNG reads a reference PNG as 8-bit NRGBA (a 16-bit one by its high
// byte), and whether it had 16-bit samples.
func readPNG(t *testing.T, path string) (*image.NRGBA, bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := image.NewNRGBA(m.Bounds())
	for y := m.Bounds().Min.Y; y < m.Bounds().Max.Y; y++ {
		for x := m.Bounds().Min.X; x < m.Bounds().Max.X; x++ {
			out.Set(x, y, color.NRGBAModel.Convert(m.At(x, y)))
		}
	}
	switch m.(type) {
	case *image.RGBA64, *image.NRGBA64, *image.Gray16:
		return out, true
	}
	return out, false
}

// run runs cmd with IN and OUT replaced by in and out.
func run(t *testing.T, cmd []string, in, out string) {
	t.Helper()
	args := make([]string, len(cmd))
	for i, a := range cmd {
		args[i] = map[string]string{"IN": in, "OUT": out}[a]
		if args[i] == "" {
			args[i] = a
		}
	}
	if b, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, b)
	}
}

// TestHEIFRefLoop: a HEIC whose alpha grid takes as its tile the image it
// is the alpha of, and one whose reference box after that is damaged
// (FuzzHEIFJXL's find: libheif 1.15 recursed without end, hanging or
// crashing the process), are refused before libheif sees them; the seed
// they were mutated from is not.
func TestHEIFRefLoop(t *testing.T) {
	good, bad, at := loopedHEIC(t)
	cut := bytes.Clone(bad)
	cut[at+10] = 0xf9 // and the auxl box after it claims 4 GB
	// The looped copy with its first reference box's size 0 ("to the
	// end"): read by the boxes' sizes, the loop is out of sight; libheif
	// reads the references one after another and meets it.
	first := bytes.Index(bad, []byte("\x00\x00\x00\x0edimg\x00\x02\x00\x01\x00\x01"))
	if first < 0 {
		t.Fatal("the seed's first reference is not as made")
	}
	hidden := bytes.Clone(bad)
	hidden[first+3] = 0
	for _, tt := range []struct {
		name string
		data []byte
		loop bool
	}{{"seed", good, false}, {"looped", bad, true}, {"damaged", cut, true}, {"hidden", hidden, true}} {
		if got := heifRefLoop(tt.data); got != tt.loop {
			t.Errorf("%s: heifRefLoop = %v, want %v", tt.name, got, tt.loop)
		}
	}
	needTurbo(t)
	for _, d := range [][]byte{bad, cut, hidden} {
		if _, _, err := Decode(d, Options{}); err == nil || err.Error() != "corrupt HEIF: "+errHEIFLoop.Error() {
			t.Errorf("looped HEIC: %v", err)
		}
	}
	if img, _, err := Decode(good, Options{}); err != nil {
		t.Errorf("seed: %v", err)
	} else {
		Release(img)
	}
}

// loopedHEIC returns the seed HEIC and a copy whose alpha grid's tile is
// the image it is the alpha of (FuzzHEIFJXL's first find), and where in
// them that reference is.
func loopedHEIC(t testing.TB) (good, bad []byte, at int) {
	t.Helper()
	good = seed(t, "s.heic")
	at = bytes.Index(good, []byte("dimg\x00\x04\x00\x01\x00\x03")) // alpha grid 4 <- tile 3
	if at < 0 {
		t.Fatal("the seed's iref is not as made")
	}
	bad = bytes.Clone(good)
	bad[at+9] = 2 // its tile is now item 2, the image it is the alpha of
	return good, bad, at
}

// FuzzHEIFJXL feeds libheif and libjxl, through prep's bindings, mutated
// 12×8 HEIC, AVIF and JPEG XL files (testdata/seeds, made by heif-enc and
// cjxl): an error or an image of the declared size, never a crash of this
// process or an image over the pixel limit. They are decoded as prep
// decodes them, in child processes (isolate.go), where a crash of either
// library refuses the file; heifRefLoop also runs here, for the fuzzer to
// see what it covers.
func FuzzHEIFJXL(f *testing.F) {
	for _, name := range []string{"s.heic", "s.avif", "s.jxl"} {
		f.Add(seed(f, name))
	}
	isolate(f)
	// Go's fuzzing calls a worker hung after 10 s on one input: a child
	// is stopped well before, even on a file tried twice (a crash of
	// libheif's recursion takes 1.4–2.3 s here), and its file refused.
	defer func(d time.Duration) { childTimeout = d }(childTimeout)
	childTimeout = 3 * time.Second
	f.Fuzz(func(t *testing.T, data []byte) {
		heifRefLoop(data)
		fuzzDecode(t, data)
	})
}
