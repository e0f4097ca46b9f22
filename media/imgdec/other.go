package imgdec

import (
	"errors"
	"fmt"
	"image"
	"io"
	"slices"
	"strings"
)

// The formats besides JPEG and PNG: GIF, BMP, TIFF, WebP, PNM, HEIF, AVIF
// and JPEG XL. Each
// gives the RGB of Pillow's Image.open(f).convert("RGB") (the alpha, where
// the file has one, is kept as for PNG), upright as ImageOps.exif_transpose
// makes it, and only its first frame: multi-frame GIF, TIFF and WebP files
// give the frame Pillow opens on. 16-bit grey keeps its high byte, as for
// PNG (Pillow's own I;16 → RGB clips every value above 255 to white);
// 16-bit RGB is Pillow's high byte too.
//
// Why these decoders:
//   - WebP: libwebp through cgo (webp_cgo.go), the library Pillow uses, with
//     its animation decoder as Pillow's WebPImagePlugin does: lossy WebP
//     upsamples chroma with libwebp's "fancy" filter, which
//     golang.org/x/image/webp lacks (its pixels differ by several levels),
//     so the pure-Go decoder is only the fallback of a build without cgo.
//   - GIF: image/gif (exact: palette indices), with the palette entry of the
//     transparent index read back from the file (image/gif blanks it) and
//     the frame placed on the logical screen as Pillow does.
//   - BMP and PNM: small parsers here following Pillow's BmpImagePlugin and
//     PpmImagePlugin (golang.org/x/image/bmp lacks 1-, 4- and 16-bit, RLE
//     and bitfields files).
//   - HEIF and AVIF: libheif, JPEG XL: libjxl (heif_cgo.go, jxl_cgo.go),
//     loaded at run time so that prep runs where they are not installed.
//     Pillow 9.4 (Debian 12) reads none of the three; their pixels are
//     those of each library's own tool (heif-convert, djxl), with which
//     the tests compare them.
//   - TIFF: golang.org/x/image/tiff (none, LZW, Deflate, PackBits, CCITT;
//     grey, palette, RGB, RGBA at 1–16 bits), exact against Pillow's
//     libtiff on every layout the tests make; CMYK and JPEG-compressed TIFFs
//     are refused with the reason (see tiff.go).
//
// Measured on a 640×427 photo (2 shared cores, ms a decode, Pillow's
// open+convert in brackets): lossy WebP 4.9 (7.2; x/image/webp 11.1),
// lossless WebP 4.1 (6.8), GIF 4.0 (2.4), BMP 1.2 (1.8), LZW TIFF 13.4
// (5.3), PPM 2.0 (1.6). TIFF through libtiff and a faster PNM/GIF path are
// what to do if those formats ever weigh in a dataset.
//
// Each checks the declared size against the pixel limit before it
// allocates anything of that size.

// otherFormat is one of the formats besides JPEG and PNG.
type otherFormat struct {
	name string // for messages: "GIF"
	// size reads the declared size from the header.
	size func(data []byte) (w, h int, err error)
	// decode returns the first frame as NRGBA, and whether the format
	// says it is opaque.
	decode func(data []byte, w, h int) (img *image.NRGBA, opaque bool, err error)
	// orientation returns the EXIF orientation, 1..8; nil: the format has none.
	orientation func(data []byte) int
}

var otherFormats = map[string]otherFormat{
	"gif":  {name: "GIF", size: gifSize, decode: decodeGIF},
	"bmp":  {name: "BMP", size: bmpSize, decode: decodeBMP},
	"pnm":  {name: "PNM", size: pnmSize, decode: decodePNM},
	"tiff": {name: "TIFF", size: tiffSize, decode: decodeTIFF, orientation: tiffFileOrientation},
	"webp": {name: "WebP", size: webpSize, decode: decodeWebP, orientation: webpOrientation},
	// libheif and libjxl rotate and mirror as the file says: no EXIF step.
	"heif": {name: "HEIF", size: heifSizeOf("HEIF"), decode: decodeHEIFOf("HEIF")},
	"avif": {name: "AVIF", size: heifSizeOf("AVIF"), decode: decodeHEIFOf("AVIF")},
	"jxl":  {name: "JPEG XL", size: jxlSize, decode: decodeJXL},
}

func decodeOther(format string, data []byte, maxPixels int64, info Info) (*image.NRGBA, Info, error) {
	if p := isolation.Load(); p != nil && slices.Contains(isolatedFormats, format) {
		return p.decode(format, data, maxPixels, info)
	}
	f := otherFormats[format]
	w, h, err := f.size(data)
	if err != nil {
		return nil, info, damaged(f.name, data, err)
	}
	info.Width, info.Height, info.ScaleNum, info.Orientation = w, h, 8, 1
	if err := checkSize(w, h, maxPixels); err != nil {
		return nil, info, err
	}
	if f.orientation != nil {
		if o := f.orientation(data); o >= 1 && o <= 8 {
			info.Orientation = o
		}
	}
	img, opaque, err := f.decode(data, w, h)
	if err != nil {
		return nil, info, damaged(f.name, data, err)
	}
	if r := img.Rect; r.Min != (image.Point{}) || r.Dx() != w || r.Dy() != h {
		Release(img)
		return nil, info, fmt.Errorf("corrupt %s: the header declares %d×%d but the image is %d×%d", f.name, w, h, r.Dx(), r.Dy())
	}
	info.Opaque = opaque
	return applyOrientation(img, info.Orientation), info, nil
}

// errTruncated marks data that ends before the image does.
var errTruncated = errors.New("the data ends early")

// unsupported is a well-formed file in a layout prep does not read: its
// message stands as it is.
type unsupported string

func (u unsupported) Error() string { return string(u) }

// damaged words a decoder error: truncated where the data ended early,
// corrupt otherwise.
func damaged(name string, data []byte, err error) error {
	var u unsupported
	if errors.As(err, &u) {
		return err
	}
	if errors.Is(err, errTruncated) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		strings.Contains(err.Error(), "truncated") || strings.Contains(err.Error(), "not enough") {
		return fmt.Errorf("truncated %s: the image ends before its last pixel (%d bytes): %w", name, len(data), err)
	}
	return fmt.Errorf("corrupt %s: %w", name, err)
}

// fromPalette expands palette indices into NRGBA: pal holds RGBA entries,
// an index past its end is black (Pillow's palettes are zero-padded).
func fromPalette(dst *image.NRGBA, idx []byte, stride int, pal [][4]uint8) {
	var full [256][4]uint8
	for i := range full {
		full[i][3] = 0xFF
	}
	copy(full[:], pal)
	w, h := dst.Rect.Dx(), dst.Rect.Dy()
	for y := 0; y < h; y++ {
		src := idx[y*stride : y*stride+w]
		row := dst.Pix[y*dst.Stride : y*dst.Stride+4*w]
		for x, i := range src {
			copy(row[4*x:4*x+4], full[i][:])
		}
	}
}
