package imgdec

import (
	"bytes"
	"image"
	"image/color"
	"image/gif"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"

	"github.com/prep-dev/prep/internal/testenv"
)

// makeOthers writes, with Pillow, one file of each mode and layout of the
// formats besides JPEG and PNG into a new folder, and returns it. Pillow
// cannot write every layout users meet (16-bit BMP, RLE, plain PNM, ...):
// those are built byte by byte, and Pillow reads them as the reference.
// Each file's name says what it holds; a name ending in ".refused" is one
// prep refuses.
func makeOthers(t *testing.T) string {
	t.Helper()
	py := testenv.NeedPython(t, "PIL", "numpy")
	dir := t.TempDir()
	const script = `
import struct, sys
import numpy as np
from PIL import Image
d = sys.argv[1]
rng = np.random.default_rng(7)
W, H = 37, 23
yy, xx = np.mgrid[0:H, 0:W]
rgb = np.stack([xx * 6, yy * 10, (xx + yy) * 4], -1) + rng.integers(0, 60, (H, W, 3))
rgb = Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8), "RGB")
alpha = Image.fromarray(((xx * 7 + yy * 3) % 256).astype(np.uint8), "L")
rgba = rgb.copy(); rgba.putalpha(alpha)
L = rgb.convert("L")
one = L.point(lambda v: 255 if v > 120 else 0).convert("1")
P = rgb.quantize(16)
Ptr = P.copy(); Ptr.info["transparency"] = 3
LA = L.copy().convert("LA"); LA.putalpha(alpha)
I16 = Image.fromarray((np.asarray(L).astype(np.uint16) * 257 + rng.integers(0, 200, (H, W))).astype(np.uint16))
frames = [rgb, rgb.transpose(Image.Transpose.FLIP_LEFT_RIGHT), L.convert("RGB")]
def exif(o):
    e = Image.Exif(); e[0x0112] = o; return e.tobytes()

# GIF
P.save(d + "/p.gif")
Ptr.save(d + "/p_trns.gif", transparency=3)
L.save(d + "/l.gif")
rgb.save(d + "/rgb_quantized.gif")
frames[0].save(d + "/anim.gif", save_all=True, append_images=frames[1:], duration=50, loop=0)
Ptr.save(d + "/anim_trns.gif", save_all=True, append_images=[P.transpose(Image.Transpose.FLIP_TOP_BOTTOM)], transparency=3)
# BMP
for name, im in [("1", one), ("l", L), ("p", P), ("rgb", rgb), ("rgba", rgba)]:
    im.save(d + "/%s.bmp" % name)
def bmp(bits, compression, rows, palette=b"", masks=b"", topdown=False, h=H, w=W):
    info = struct.pack("<IiiHHIIiiII", 40, w, -h if topdown else h, 1, bits, compression, len(rows), 0, 0, len(palette) // 4, 0)
    off = 14 + len(info) + len(masks) + len(palette)
    return b"BM" + struct.pack("<IHHI", off + len(rows), 0, 0, off) + info + masks + palette + rows
px = np.asarray(rgb).astype(np.uint32)
def rows16(fn):
    out = b""
    for y in range(H - 1, -1, -1):
        r = b"".join(struct.pack("<H", fn(*px[y, x])) for x in range(W))
        out += r + b"\0" * (-len(r) % 4)
    return out
open(d + "/rgb555.bmp", "wb").write(bmp(16, 0, rows16(lambda r, g, b: (r >> 3) << 10 | (g >> 3) << 5 | b >> 3)))
open(d + "/rgb565.bmp", "wb").write(bmp(16, 3, rows16(lambda r, g, b: (r >> 3) << 11 | (g >> 2) << 5 | b >> 3),
    masks=struct.pack("<III", 0xF800, 0x7E0, 0x1F)))
top = open(d + "/rgb.bmp", "rb").read()
top = top[:22] + struct.pack("<i", -H) + top[26:]
open(d + "/rgb_topdown.bmp", "wb").write(top)
pal = b"".join(bytes([b, g, r, 0]) for r, g, b in np.asarray(P.getpalette()[:48]).reshape(16, 3))
idx = np.asarray(P)
rle = b""
for y in range(H - 1, -1, -1):
    row = idx[y]
    x = 0
    while x < W:
        n = 1
        while x + n < W and n < 255 and row[x + n] == row[x]:
            n += 1
        if n >= 2 or W - x < 3:
            rle += bytes([n, row[x]]); x += n
        else:
            k = min(W - x, 5)
            rle += bytes([0, k]) + bytes(row[x:x + k].tolist()) + b"\0" * (k % 2); x += k
    rle += b"\0\0"
rle += b"\0\1"
open(d + "/p_rle8.bmp", "wb").write(bmp(8, 1, rle, palette=pal))
# TIFF
for name, im in [("1", one), ("l", L), ("p", P), ("rgb", rgb), ("rgba", rgba), ("i16", I16)]:
    im.save(d + "/%s.tif" % name)
LA.save(d + "/la.tif.refused", "TIFF")
for c in ["tiff_lzw", "tiff_adobe_deflate", "packbits"]:
    rgb.save(d + "/rgb_%s.tif" % c, compression=c)
    L.save(d + "/l_%s.tif" % c, compression=c)
one.save(d + "/1_group4.tif", compression="group4")
rgb.save(d + "/rgb_exif6.tiff", tiffinfo={0x0112: 6})
frames[0].save(d + "/multi.tif", save_all=True, append_images=frames[1:])
rgb.convert("CMYK").save(d + "/cmyk.tif.refused", "TIFF")
rgb.save(d + "/rgb_jpeg.tif.refused", "TIFF", compression="jpeg")
# WebP
rgb.save(d + "/lossy.webp", quality=80)
rgb.save(d + "/lossless.webp", lossless=True)
rgba.save(d + "/lossy_rgba.webp", quality=80)
rgba.save(d + "/lossless_rgba.webp", lossless=True)
L.save(d + "/l.webp")
rgb.save(d + "/exif6.webp", exif=exif(6))
frames[0].save(d + "/anim_lossy.webp", save_all=True, append_images=frames[1:], duration=50)
frames[0].save(d + "/anim_lossless.webp", save_all=True, append_images=frames[1:], duration=50, lossless=True)
rgb.save(d + "/webp_named.jpg", "WEBP")
# PNM
one.save(d + "/1.pbm"); L.save(d + "/l.pgm"); rgb.save(d + "/rgb.ppm")
I16.convert("I").save(d + "/i16.pgm")
a = np.asarray(rgb)
def plain(magic, maxval, vals):
    head = b"%s\n# a comment\n%d %d\n" % (magic, W, H) + (b"%d\n" % maxval if maxval else b"")
    return head + b"\n".join(b" ".join(b"%d" % v for v in row) for row in vals)
open(d + "/plain.pbm", "wb").write(b"P1\n%d %d\n" % (W, H) + b"\n".join(b"".join(b"0" if v else b"1" for v in row) for row in np.asarray(one)))
open(d + "/plain.pgm", "wb").write(plain(b"P2", 255, np.asarray(L)))
open(d + "/plain100.ppm", "wb").write(plain(b"P3", 100, (a.reshape(H, -1).astype(int) * 100) // 255))
open(d + "/max100.pgm", "wb").write(b"P5\n%d %d\n100\n" % (W, H) + ((np.asarray(L).astype(int) * 100) // 255).astype(np.uint8).tobytes())
open(d + "/max1000.ppm", "wb").write(b"P6 %d %d 1000 " % (W, H) + ((a.astype(int) * 1000) // 255).astype(">u2").tobytes())
open(d + "/max1000.pgm", "wb").write(b"P5 %d %d 1000\n" % (W, H) + ((np.asarray(L).astype(int) * 1000) // 255).astype(">u2").tobytes())
`
	cmd := exec.Command(py, "-c", script, dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python3 making the test images: %v\n%s", err, out)
	}
	return dir
}

// TestOtherFormatsMatchPillow decodes every file makeOthers writes and
// compares each pixel with Pillow's: exif_transpose, then convert("RGB")
// for the colour and convert("RGBA") for the alpha (pilReference), 16-bit
// grey by its high byte. Every layout must match exactly, lossy WebP
// included (libwebp decodes it, as for Pillow), except in a build without
// cgo, where WebP goes through golang.org/x/image/webp.
func TestOtherFormatsMatchPillow(t *testing.T) {
	dir := makeOthers(t)
	all, _ := filepath.Glob(filepath.Join(dir, "*"))
	var files []string
	for _, f := range all {
		if !strings.HasSuffix(f, ".refused") {
			files = append(files, f)
		}
	}
	sort.Strings(files)
	if len(files) < 49 {
		t.Fatalf("made %d files, want at least 49", len(files))
	}
	refs := pilUpright(t, files)
	formats := map[string]int{}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data := readFile(t, path)
			got, info, err := Decode(data, Options{})
			formats[info.Format]++
			if err != nil && !TurboAvailable() && strings.HasPrefix(filepath.Base(path), "anim") && info.Format == "webp" {
				return // golang.org/x/image/webp reads no animations
			}
			if err != nil {
				t.Fatal(err)
			}
			want := refs[path]
			if got.Rect != want.Rect {
				t.Fatalf("bounds %v, Pillow %v", got.Rect, want.Rect)
			}
			if info.Format == "webp" && !TurboAvailable() {
				// Lossy: 4.8 to 6.5 levels on these noisy images.
				if d := meanAbsDiff(got, want); d > 8 {
					t.Fatalf("mean abs diff %.3f from Pillow's, want <= 8 (golang.org/x/image/webp)", d)
				}
				return
			}
			for i := range got.Pix {
				if got.Pix[i] != want.Pix[i] {
					p := i / 4
					t.Fatalf("pixel (%d,%d) is %v, Pillow %v (mean abs diff %.3f)", p%want.Rect.Dx(), p/want.Rect.Dx(),
						got.Pix[4*p:4*p+4], want.Pix[4*p:4*p+4], meanAbsDiff(got, want))
				}
			}
			if info.Opaque {
				for i := 3; i < len(got.Pix); i += 4 {
					if got.Pix[i] != 0xFF {
						t.Fatalf("Info.Opaque, but pixel %d has alpha %d", i/4, got.Pix[i])
					}
				}
			}
		})
	}
	// The content, not the name, chose the decoder.
	if formats["webp"] != 9 || formats["gif"] != 6 || formats["bmp"] != 9 || formats["tiff"] != 15 || formats["pnm"] != 10 {
		t.Errorf("decoded by format: %v", formats)
	}
	if _, info, _ := Decode(readFile(t, filepath.Join(dir, "webp_named.jpg")), Options{}); info.Format != "webp" {
		t.Errorf("a WebP named .jpg decoded as %q", info.Format)
	}
}

// TestOtherFormatsRefuse: the layouts prep does not read, sizes over the
// pixel limit and damaged files are refused with the reason, naming the
// format; none panics.
func TestOtherFormatsRefuse(t *testing.T) {
	dir := makeOthers(t)
	for name, want := range map[string]string{
		"cmyk.tif.refused":     "unsupported TIFF layout (color model; ",
		"rgb_jpeg.tif.refused": "unsupported TIFF layout (compression value 7; ",
		"la.tif.refused":       "unsupported TIFF layout (grey with 2 samples a pixel, as grey+alpha; ",
	} {
		_, _, err := Decode(readFile(t, filepath.Join(dir, name)), Options{})
		if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "convert it to PNG first") {
			t.Errorf("%s: err = %v, want %q...", name, err, want)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, path := range files {
		if strings.HasSuffix(path, ".refused") {
			continue
		}
		data := readFile(t, path)
		_, info, err := Decode(data, Options{MaxPixels: 37*23 - 1})
		if err == nil || !strings.Contains(err.Error(), "over the 0.0 Mpixel limit (--max-pixels)") {
			t.Errorf("%s: with a limit below its size: err = %v", path, err)
		}
		name := otherFormats[info.Format].name
		cuts := []int{len(data) / 2, len(data) - 40}
		if strings.HasPrefix(filepath.Base(path), "anim") || strings.HasPrefix(filepath.Base(path), "multi") {
			cuts = []int{200} // within the first frame: later ones are not read
		}
		for _, cut := range cuts {
			_, _, err := Decode(data[:cut], Options{})
			if err == nil {
				t.Errorf("%s cut to %d bytes: no error", filepath.Base(path), cut)
				continue
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "truncated "+name+": ") && !strings.HasPrefix(msg, "corrupt "+name+": ") {
				t.Errorf("%s cut to %d bytes: err = %q, want truncated or corrupt %s", filepath.Base(path), cut, msg, name)
			}
		}
	}
	// HEIF, AVIF and JPEG XL go by their content to libheif and libjxl
	// (TestHEIFAVIFJXL), which refuse these stubs; a build without cgo
	// refuses the formats, naming the build.
	heif, avif, jxl := "corrupt HEIF: libheif: ", "corrupt AVIF: libheif: ", "corrupt JPEG XL: libjxl: "
	if !turboBuiltIn {
		heif, avif, jxl = "unsupported image format (HEIF): this prep was built without cgo",
			"unsupported image format (AVIF): this prep was built without cgo",
			"unsupported image format (JPEG XL): this prep was built without cgo"
	}
	for _, tt := range []struct{ data, err string }{
		{"\x00\x00\x00\x1cftypavif\x00\x00\x00\x00", avif},
		{"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00", heif},
		{"\xff\x0a\xfa\x7f", jxl},
		{"P6\n", "truncated PNM: "},
		{"BM", "truncated BMP: "},
		{"GIF89a\x01\x00\x01\x00\x00\x00\x00\x3b", "corrupt GIF: the file has no image"},
	} {
		if _, _, err := Decode([]byte(tt.data), Options{}); err == nil || !strings.HasPrefix(err.Error(), tt.err) {
			t.Errorf("%q: err = %v, want %q...", tt.data, err, tt.err)
		}
	}
}

// pilUpright decodes files as pilReference does, but leaves TIFFs to
// Pillow's own orientation: Pillow 9.4 turns a TIFF upright as it loads it,
// and ImageOps.exif_transpose would turn it again.
func pilUpright(t *testing.T, files []string) map[string]*image.NRGBA {
	t.Helper()
	py := testenv.NeedPython(t, "PIL", "numpy")
	const script = `
import json, sys
import numpy as np
from PIL import Image, ImageOps
out, res = sys.argv[1], {}
for i, path in enumerate(sys.argv[2:]):
    im = Image.open(path)
    if im.format != "TIFF":
        im = ImageOps.exif_transpose(im)
    if im.mode in ("I", "I;16", "I;16B"):
        im = Image.fromarray((np.asarray(im) >> 8).astype(np.uint8), "L")
    rgb, a = im.convert("RGB"), im.convert("RGBA").getchannel("A")
    rgb.putalpha(a)
    raw = "%s/%d.rgba" % (out, i)
    open(raw, "wb").write(rgb.tobytes())
    res[path] = [raw, im.size[0], im.size[1]]
json.dump(res, sys.stdout)
`
	return runPillow(t, py, script, files)
}

// FuzzOtherFormats feeds the GIF, BMP, TIFF, WebP and PNM decoders
// (libwebp included, in a cgo build) damaged and hostile files: none may
// panic or crash, a decode is the size its header declares (upright), and
// nothing over the pixel limit is decoded.
func FuzzOtherFormats(f *testing.F) {
	src := image.NewPaletted(image.Rect(0, 0, 5, 3), color.Palette{color.Black, color.White, color.RGBA{200, 10, 30, 255}})
	src.Pix[4], src.Pix[7] = 1, 2
	var b bytes.Buffer
	gif.Encode(&b, src, nil)
	f.Add(bytes.Clone(b.Bytes()))
	b.Reset()
	tiff.Encode(&b, src, &tiff.Options{Compression: tiff.Deflate})
	f.Add(bytes.Clone(b.Bytes()))
	b.Reset()
	tiff.Encode(&b, image.NewNRGBA64(image.Rect(0, 0, 4, 2)), nil)
	f.Add(bytes.Clone(b.Bytes()))
	b.Reset()
	bmp.Encode(&b, src)
	f.Add(bytes.Clone(b.Bytes()))
	f.Add([]byte("P6\n# c\n2 1\n1000\n\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b"))
	f.Add([]byte("P1 3 2 101 0 1 0"))
	f.Add([]byte("P4\n9 2\n\xff\x80\x00\x00"))
	f.Add([]byte("RIFFj\x00\x00\x00WEBPVP8X\n\x00\x00\x00\x10\x00\x00\x00\x04\x00\x00\x02\x00\x00ALPH\x0e\x00\x00\x00\x01\x0f\xf0\xc0\xff\x88\x88\xf0\x8e\x8f\x88\xfeG\x01VP8 6\x00\x00\x00\xf0\x01\x00\x9d\x01*\x05\x00\x03\x00\x02\xc0L%\xb0\x02t\xba\x01\xf8\x00\x04L\x00\x00\xfe\xae\xa4\\\x95\x88\xa1_\xf8U\xb8b\x19\xaa\xff\xe6\xd3\xebP\xa3\x83\xd3]\xdc~\xe4\x80\x00\x00"))
	f.Add([]byte("RIFF\"\x00\x00\x00WEBPVP8L\x16\x00\x00\x00/\x04\x80\x00\x10\x0f0\xc8_\xf8\x1f\x8f\x07\xfe\x87\x16\xde\xf1\x11\xd1\xff("))
	f.Fuzz(fuzzDecode)
}

// fuzzDecode is the check of the decoders' fuzz targets: an error, or an
// image within the pixel limit, of the size its header declares.
func fuzzDecode(t *testing.T, data []byte) {
	img, info, err := Decode(data, Options{MaxPixels: fuzzMaxPixels})
	if err != nil {
		return
	}
	if int64(info.Width)*int64(info.Height) > fuzzMaxPixels {
		t.Fatalf("decoded %d×%d, over the limit", info.Width, info.Height)
	}
	if w, h := info.Upright(); img.Rect != image.Rect(0, 0, w, h) {
		t.Fatalf("%s decoded to %v, header %d×%d, orientation %d", info.Format, img.Rect, info.Width, info.Height, info.Orientation)
	}
	Release(img)
}
