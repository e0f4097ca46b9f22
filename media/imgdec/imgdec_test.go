package imgdec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prep-dev/prep/internal/testenv"
)

const edgeDir = "../../testdata/edge"
const imagesDir = "../../testdata/images"

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decoders lists every decoder this build has, so each test covers both.
func decoders() []string {
	if TurboAvailable() {
		return []string{DecoderGo, DecoderTurbo}
	}
	return []string{DecoderGo}
}

func TestDecodeEdge(t *testing.T) {
	tests := []struct {
		file        string
		w, h        int // upright
		orientation int
		format      string
		err         string // substring; "" for success
		goErr       string // the Go decoder's error, where it differs
	}{
		{file: "rgba16.png", w: 37, h: 23, orientation: 1, format: "png"},
		{file: "rgb16.png", w: 37, h: 23, orientation: 1, format: "png"},
		{file: "grey16.png", w: 37, h: 23, orientation: 1, format: "png"},
		{file: "palette.png", w: 40, h: 30, orientation: 1, format: "png"},
		{file: "palette_trns.png", w: 40, h: 30, orientation: 1, format: "png"},
		{file: "grey.png", w: 40, h: 30, orientation: 1, format: "png"},
		{file: "grey_alpha.png", w: 40, h: 30, orientation: 1, format: "png"},
		{file: "rgb_trns.png", w: 24, h: 16, orientation: 1, format: "png"},
		{file: "exif_6.png", w: 20, h: 30, orientation: 6, format: "png"},
		{file: "cmyk.jpg", w: 48, h: 32, orientation: 1, format: "jpeg"},
		{file: "cmyk_420.jpg", w: 48, h: 32, orientation: 1, format: "jpeg", goErr: "Go decoder lacks (luma/chroma subsampling ratio): decode it with libjpeg-turbo"},
		{file: "ycck_420.jpg", w: 48, h: 32, orientation: 1, format: "jpeg", goErr: "Go decoder lacks (luma/chroma subsampling ratio): decode it with libjpeg-turbo"},
		{file: "exif_1.jpg", w: 64, h: 40, orientation: 1, format: "jpeg"},
		{file: "exif_2.jpg", w: 64, h: 40, orientation: 2, format: "jpeg"},
		{file: "exif_3.jpg", w: 64, h: 40, orientation: 3, format: "jpeg"},
		{file: "exif_4.jpg", w: 64, h: 40, orientation: 4, format: "jpeg"},
		{file: "exif_5.jpg", w: 40, h: 64, orientation: 5, format: "jpeg"},
		{file: "exif_6.jpg", w: 40, h: 64, orientation: 6, format: "jpeg"},
		{file: "exif_7.jpg", w: 40, h: 64, orientation: 7, format: "jpeg"},
		{file: "exif_8.jpg", w: 40, h: 64, orientation: 8, format: "jpeg"},
		{file: "empty.jpg", err: "empty file (0 bytes)"},
		{file: "text.jpg", err: "not an image prep decodes (55 bytes, content looks like text/plain; charset=utf-8): prep reads JPEG, PNG, GIF, BMP, TIFF, WebP, PNM, HEIF, AVIF and JPEG XL by their content"},
		{file: "tiny.gif", w: 8, h: 8, orientation: 1, format: "gif"},
		{file: "truncated.jpg", err: "truncated JPEG"},
		{file: "truncated.png", err: "truncated PNG"},
		{file: "huge_header.png", format: "png", err: "image declares 30000×20000 = 600 Mpixel, over the 100 Mpixel limit (--max-pixels)"},
	}
	for _, dec := range decoders() {
		for _, tt := range tests {
			t.Run(dec+"/"+tt.file, func(t *testing.T) {
				img, info, err := Decode(readFile(t, filepath.Join(edgeDir, tt.file)), Options{Decoder: dec})
				want := tt.err
				if dec == DecoderGo && tt.goErr != "" {
					want = tt.goErr
				}
				if want != "" {
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Fatalf("err = %v, want it to contain %q", err, want)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := img.Rect; got != image.Rect(0, 0, tt.w, tt.h) {
					t.Errorf("bounds %v, want %dx%d", got, tt.w, tt.h)
				}
				if info.Orientation != tt.orientation || info.Format != tt.format || info.ScaleNum != 8 {
					t.Errorf("info %+v, want orientation %d format %s scale 1", info, tt.orientation, tt.format)
				}
			})
		}
	}
}

func TestDecodeOptions(t *testing.T) {
	photo := readFile(t, filepath.Join(imagesDir, "space", "rocket.jpg"))
	tests := []struct {
		name string
		opt  Options
		err  string
	}{
		{"limit", Options{MaxPixels: 200_000}, "image declares 640×427 = 0.3 Mpixel, over the 0.2 Mpixel limit (--max-pixels)"},
		{"no limit", Options{MaxPixels: -1}, ""},
		{"exact limit", Options{MaxPixels: 640 * 427}, ""},
		{"bad decoder", Options{Decoder: "pil"}, `unknown decoder "pil" (want auto, go or turbo)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Decode(photo, tt.opt)
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || err.Error() != tt.err) {
				t.Fatalf("err = %v, want %q", err, tt.err)
			}
		})
	}
}

// TestCheckSize: the pixel limit holds for sizes whose product overflows
// int64 (a PNM header declared 2e10 × 7e8, which wrapped to a small
// product, passed, and panicked in make; found by FuzzHEIFJXL).
func TestCheckSize(t *testing.T) {
	for _, tt := range []struct {
		w, h  int
		limit int64
		err   string
	}{
		{640, 427, 640 * 427, ""},
		{640, 428, 640 * 427, "image declares 640×428 = 0.3 Mpixel, over the 0.3 Mpixel limit (--max-pixels)"},
		{20_000_000_000, 700_000_000, DefaultMaxPixels, "image declares 20000000000×700000000 = more than 9.2e12 Mpixel, over the 100 Mpixel limit (--max-pixels)"},
		{1 << 40, 1 << 40, 0, "image declares 1099511627776×1099511627776 = more than 9.2e12 Mpixel, over the 100 Mpixel limit (--max-pixels)"},
		{1 << 40, 1 << 40, -1, ""}, // no limit
		{0, 5, 0, "image declares an empty size 0×5"},
	} {
		err := checkSize(tt.w, tt.h, tt.limit)
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || err.Error() != tt.err) {
			t.Errorf("checkSize(%d, %d, %d) = %v, want %q", tt.w, tt.h, tt.limit, err, tt.err)
		}
	}
}

// pilReference decodes files with Pillow: ImageOps.exif_transpose, then
// convert("RGBA"); 16-bit grey keeps its high byte (Pillow's own I→RGBA clips).
// It returns each file's raw RGBA pixels and size.
func pilReference(t *testing.T, files []string) map[string]*image.NRGBA {
	t.Helper()
	py := testenv.NeedPython(t, "PIL", "numpy")
	const script = `
import json, sys
import numpy as np
from PIL import Image, ImageOps
out, res = sys.argv[1], {}
for i, path in enumerate(sys.argv[2:]):
    im = Image.open(path)
    im = ImageOps.exif_transpose(im)
    if im.mode in ("I", "I;16", "I;16B"):
        im = Image.fromarray((np.asarray(im) >> 8).astype(np.uint8), "L")
    im = im.convert("RGBA")
    raw = "%s/%d.rgba" % (out, i)
    open(raw, "wb").write(im.tobytes())
    res[path] = [raw, im.size[0], im.size[1]]
json.dump(res, sys.stdout)
`
	return runPillow(t, py, script, files)
}

// runPillow runs a Pillow reference script (argv: a folder, then the
// files; it writes each file's raw RGBA pixels there and prints
// {path: [raw file, width, height]}) and reads its images back.
func runPillow(t *testing.T, py, script string, files []string) map[string]*image.NRGBA {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(py, append([]string{"-c", script, dir}, files...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3 reference: %v\n%s", err, stderr.String())
	}
	var res map[string][3]any
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	refs := map[string]*image.NRGBA{}
	for path, r := range res {
		w, h := int(r[1].(float64)), int(r[2].(float64))
		m := image.NewNRGBA(image.Rect(0, 0, w, h))
		m.Pix = readFile(t, r[0].(string))
		refs[path] = m
	}
	return refs
}

// meanAbsDiff compares RGB channels (and alpha) of two same-sized images.
func meanAbsDiff(a, b *image.NRGBA) float64 {
	var sum int64
	for i := range a.Pix {
		d := int64(a.Pix[i]) - int64(b.Pix[i])
		if d < 0 {
			d = -d
		}
		sum += d
	}
	return float64(sum) / float64(len(a.Pix))
}

func TestPixelsMatchPillow(t *testing.T) {
	// PNGs are lossless: pixels must be identical. JPEG decoders differ in
	// IDCT and chroma upsampling, so there a small mean difference is allowed;
	// a wrong rotation or colour conversion gives tens of levels.
	lossless := []string{"rgba16.png", "rgb16.png", "grey16.png", "palette.png", "palette_trns.png",
		"grey.png", "grey_alpha.png", "rgb_trns.png", "exif_6.png"}
	lossy := []string{"cmyk.jpg", "cmyk_420.jpg", "ycck_420.jpg", "exif_1.jpg", "exif_2.jpg", "exif_3.jpg", "exif_4.jpg",
		"exif_5.jpg", "exif_6.jpg", "exif_7.jpg", "exif_8.jpg"}
	var files []string
	for _, f := range append(lossless, lossy...) {
		files = append(files, filepath.Join(edgeDir, f))
	}
	photos, _ := filepath.Glob(filepath.Join(imagesDir, "*", "*"))
	files = append(files, photos...)
	refs := pilReference(t, files)

	for _, dec := range decoders() {
		for _, path := range files {
			t.Run(dec+"/"+strings.TrimPrefix(path, "../../testdata/"), func(t *testing.T) {
				if dec == DecoderGo && strings.Contains(path, "_420.jpg") {
					return // the Go decoder refuses these (TestDecodeEdge)
				}
				got, _, err := Decode(readFile(t, path), Options{Decoder: dec})
				if err != nil {
					t.Fatal(err)
				}
				want := refs[path]
				if got.Rect != want.Rect {
					t.Fatalf("bounds %v, Pillow %v", got.Rect, want.Rect)
				}
				d := meanAbsDiff(got, want)
				if strings.HasSuffix(path, ".png") {
					if d != 0 {
						t.Fatalf("pixels differ from Pillow's (mean abs diff %.3f)", d)
					}
					return
				}
				if d > 1.5 {
					t.Fatalf("mean abs diff %.3f from Pillow's, want <= 1.5", d)
				}
			})
		}
	}
}

func TestPhotos(t *testing.T) {
	photos, _ := filepath.Glob(filepath.Join(imagesDir, "*", "*"))
	if len(photos) < 6 {
		t.Fatalf("found %d photos under %s, want at least 6", len(photos), imagesDir)
	}
	for _, p := range photos {
		cfg, _, err := image.DecodeConfig(bytes.NewReader(readFile(t, p)))
		if err != nil {
			t.Fatal(p, err)
		}
		img, info, err := Decode(readFile(t, p), Options{Decoder: DecoderGo})
		if err != nil {
			t.Fatal(p, err)
		}
		if info.Width != cfg.Width || info.Height != cfg.Height || img.Rect.Dx() != cfg.Width || img.Rect.Dy() != cfg.Height {
			t.Errorf("%s: info %+v, image %v, header %dx%d", p, info, img.Rect, cfg.Width, cfg.Height)
		}
	}
}

func TestDecodeCorrupt(t *testing.T) {
	photo := readFile(t, filepath.Join(imagesDir, "space", "rocket.jpg"))
	png := readFile(t, filepath.Join(imagesDir, "everyday", "coffee.png"))
	badCRC := bytes.Clone(png)
	badCRC[30] ^= 0xFF // inside IHDR's CRC
	garbledPNG := bytes.Clone(png)
	for i := len(png) / 2; i < len(png)/2+64; i++ {
		garbledPNG[i] ^= 0x55 // inside IDAT's data: its CRC no longer matches
	}
	tests := []struct {
		name string
		data []byte
		err  string
	}{
		{"jpeg without frame", []byte("\xff\xd8\xff\xe0\x00\x04ab\xff\xd9"), "corrupt JPEG: "},
		{"jpeg cut in its header", photo[:300], "truncated JPEG: the file ends after 300 bytes without its end marker"},
		{"png bad checksum", badCRC, "corrupt PNG: png: invalid format: invalid checksum"},
		{"png signature only", png[:8], "truncated PNG: the file ends after 8 bytes"},
		{"png cut in its data", png[:len(png)/2], fmt.Sprintf("truncated PNG: the file ends after %d bytes", len(png)/2)},
		{"png garbled data", garbledPNG, "corrupt PNG: png: invalid format: invalid checksum"},
	}
	garbled := bytes.Clone(photo)
	for i := len(garbled) / 2; i < len(garbled)/2+2000; i++ {
		garbled[i] = 0xFF // inside the entropy-coded data
	}
	if _, _, err := Decode(garbled, Options{Decoder: DecoderGo}); err == nil || err.Error() != "corrupt JPEG: invalid JPEG format: missing 0xff00 sequence" {
		t.Errorf("go: garbled scan: err = %v", err)
	}
	if TurboAvailable() {
		img, info, err := Decode(garbled, Options{Decoder: DecoderTurbo})
		if err != nil || img == nil || !strings.HasPrefix(info.Warning, "Corrupt JPEG data") {
			t.Errorf("turbo: garbled scan: err = %v, warning %q; want an image and a warning", err, info.Warning)
		}
		if _, info, _ := Decode(photo, Options{Decoder: DecoderTurbo}); info.Warning != "" {
			t.Errorf("turbo: good photo: warning %q", info.Warning)
		}
	}
	for _, dec := range decoders() {
		for _, tt := range tests {
			t.Run(dec+"/"+tt.name, func(t *testing.T) {
				img, _, err := Decode(tt.data, Options{Decoder: dec})
				if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
					t.Fatalf("err = %v, want prefix %q", err, tt.err)
				}
				if img != nil {
					t.Fatal("image returned with an error")
				}
			})
		}
	}
}

// TestRGBAFastPathMatchesColorModel checks the *image.RGBA conversion
// against the standard library's for every alpha.
func TestRGBAFastPathMatchesColorModel(t *testing.T) {
	src := image.NewRGBA(image.Rect(0, 0, 256, 3))
	for x := 0; x < 256; x++ {
		for y := 0; y < 3; y++ {
			a := uint8(x)
			v := uint8(int(a) * (y + 1) / 4)
			src.SetRGBA(x, y, color.RGBA{v, v / 2, a, a})
		}
	}
	got := toNRGBA(src)
	for x := 0; x < 256; x++ {
		for y := 0; y < 3; y++ {
			want := color.NRGBAModel.Convert(src.At(x, y)).(color.NRGBA)
			if g := got.NRGBAAt(x, y); g != want {
				t.Fatalf("(%d,%d): %v, want %v", x, y, g, want)
			}
		}
	}
}
