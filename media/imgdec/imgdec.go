// Package imgdec decodes image files into 8-bit NRGBA images, upright
// (EXIF orientation applied), refusing oversized headers before decoding.
// The format is found from the content, never the file name: JPEG and PNG
// here, GIF, BMP, TIFF, WebP and PNM as other.go says.
//
// JPEGs go through libjpeg-turbo when the package is built with cgo (the default
// on Linux), which can also shrink them by M/8 in the DCT domain (scaleFor), and
// PNGs through libpng; the standard library's image/jpeg and image/png are the
// fallback and the reference.
//
// Decoded images may be handed back with Release once the caller is done with
// them: touching fresh memory costs more than decoding on small VMs.
package imgdec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"io"
	"math"
	"net/http"
)

// DefaultMaxPixels is the pixel limit used when Options.MaxPixels is 0.
const DefaultMaxPixels = 100_000_000

// Decoder names accepted by Options.Decoder.
const (
	DecoderAuto  = "auto"  // the C libraries when built in, else Go
	DecoderGo    = "go"    // the standard library only
	DecoderTurbo = "turbo" // libjpeg-turbo for JPEG, libpng for PNG; an error when not built in
)

// Options tune Decode. The zero value decodes at full size with the default
// pixel limit and the fastest decoder available.
type Options struct {
	// MaxPixels refuses images whose header declares more pixels; 0 means
	// DefaultMaxPixels. Negative disables the check.
	MaxPixels int64
	// MinSide lets the decoder deliver a smaller image whose shorter side is
	// still at least MinSide (JPEG DCT scaling by M/8, see scaleFor); 0
	// means full size. Resize the result with Info.Region to get the
	// geometry of the full image.
	MinSide int
	// ReducingGap, when positive, replaces the default scale rule with a
	// uniform one: the shorter side stays at least ReducingGap × MinSide,
	// leaving the last factor to the caller's resampling filter, as
	// Pillow's thumbnail(reducing_gap) does. For measurements.
	ReducingGap float64
	// Decoder is "auto" (or ""), "go" or "turbo".
	Decoder string
}

// Info describes the file as stored.
type Info struct {
	Format        string // "jpeg" or "png"
	Width, Height int    // as stored: before scaling and orientation
	// ScaleNum is the DCT scale used, in eighths (1..8; 8 is full size):
	// the decoded image is ⌈Width·ScaleNum/8⌉ × ⌈Height·ScaleNum/8⌉ before
	// orientation.
	ScaleNum int
	// Orientation is the EXIF orientation (1..8) found and applied; 1 when none.
	Orientation int
	// Opaque reports that every pixel of the decoded image has alpha 255
	// because of what the format stores: always for JPEG (the
	// libjpeg-turbo and image/jpeg paths alike), and for a PNG whose color
	// type has no alpha channel and which has no tRNS chunk. False means
	// only that the header does not say so.
	Opaque bool
	// Warning is set when libjpeg-turbo decoded a damaged JPEG (corrupt
	// entropy-coded data comes out as grey blocks, as with Pillow): its first
	// warning. image/jpeg refuses such files with an error instead.
	Warning string
}

// TurboAvailable reports whether libjpeg-turbo and libpng are built in.
func TurboAvailable() bool { return turboBuiltIn }

// WebPDecoder names the WebP decoder built in: libwebp with cgo, else
// golang.org/x/image/webp, whose lossy pixels differ from Pillow's.
func WebPDecoder() string { return webpDecoderName }

// OtherFormats names the formats decoded in Go in every build, and those
// no build decodes yet, for prep version.
const OtherFormats = "GIF, BMP, TIFF, PNM (Go)"

// Decode decodes an image file (JPEG, PNG, or another format of other.go)
// into an upright *image.NRGBA. Alpha is
// kept; 16-bit samples keep their high byte; grey, palette and CMYK images
// become RGB. Errors say what is wrong with the data.
func Decode(data []byte, opt Options) (*image.NRGBA, Info, error) {
	var info Info
	useTurbo := false
	switch opt.Decoder {
	case "", DecoderAuto:
		useTurbo = turboBuiltIn
	case DecoderGo:
	case DecoderTurbo:
		if !turboBuiltIn {
			return nil, info, errors.New("decoder \"turbo\" is not built in (build with CGO_ENABLED=1 and libjpeg62-turbo-dev and libpng-dev installed)")
		}
		useTurbo = true
	default:
		return nil, info, fmt.Errorf("unknown decoder %q (want auto, go or turbo)", opt.Decoder)
	}

	format, err := sniff(data)
	if err != nil {
		return nil, info, err
	}
	info.Format = format
	if format != "jpeg" && format != "png" {
		return decodeOther(format, data, opt.MaxPixels, info)
	}

	var cfg image.Config
	if w, h, ok := pngSize(data); format == "png" && ok {
		cfg.Width, cfg.Height = w, h
	} else if format == "png" {
		cfg, err = png.DecodeConfig(bytes.NewReader(data)) // for its error
	} else if w, h, ok := jpegSize(data); ok {
		cfg.Width, cfg.Height = w, h
	} else {
		cfg, err = jpeg.DecodeConfig(bytes.NewReader(data)) // for its error
	}
	if err != nil {
		return nil, info, corrupt(format, data, err)
	}
	info.Width, info.Height, info.ScaleNum = cfg.Width, cfg.Height, 8
	if err := checkSize(cfg.Width, cfg.Height, opt.MaxPixels); err != nil {
		return nil, info, err
	}
	info.Orientation = orientation(format, data)
	info.Opaque = format == "jpeg" || pngOpaque(data)

	var img *image.NRGBA
	switch {
	case format == "jpeg" && useTurbo:
		img, info.ScaleNum, info.Warning, err = decodeTurbo(data, cfg, opt.MinSide, opt.ReducingGap)
	case format == "png" && useTurbo && pngPlain(data):
		// libpng is the fast path; image/png, the reference, decides
		// every file libpng does not take cleanly (its own limits, a
		// warning), so that the decoder never changes a dataset.
		if img, err = decodePNG(data, cfg); err != nil {
			img, err = decodeGo(format, data)
		}
	default:
		img, err = decodeGo(format, data)
	}
	if err != nil {
		return nil, info, err
	}
	return applyOrientation(img, info.Orientation), info, nil
}

// scaledSize is libjpeg's size of a side scaled by num/8: rounded up.
func scaledSize(side, num int) int { return (side*num + 7) / 8 }

// Upright returns the stored size with the EXIF orientation applied: the
// size of the full image that a scaled decode stands for.
func (i Info) Upright() (w, h int) {
	if i.Orientation >= 5 && i.Orientation <= 8 {
		return i.Height, i.Width
	}
	return i.Width, i.Height
}

// Region returns where the stored image lies in the pixel grid of the
// decoded (upright) image: [x0, x0+dx) × [y0, y0+dy). It is the whole
// grid unless the JPEG was scaled by M/8 < 1, whose sizes libjpeg rounds
// up, so that the last column and row (the first ones, where the EXIF
// orientation mirrors that axis) hold only part of a pixel of the image.
func (i Info) Region() (x0, y0, dx, dy float64) {
	m := i.ScaleNum
	if m <= 0 || m > 8 {
		m = 8
	}
	// Exact extents and rounded-up sizes, as stored.
	ex, ey := float64(i.Width*m)/8, float64(i.Height*m)/8
	nx, ny := float64(scaledSize(i.Width, m)), float64(scaledSize(i.Height, m))
	// Which stored axis each upright axis shows, and whether mirrored.
	var swap, flipX, flipY bool
	switch i.Orientation {
	case 2:
		flipX = true
	case 3:
		flipX, flipY = true, true
	case 4:
		flipY = true
	case 5:
		swap = true
	case 6:
		swap, flipX = true, true
	case 7:
		swap, flipX, flipY = true, true, true
	case 8:
		swap, flipY = true, true
	}
	if swap {
		ex, ey, nx, ny = ey, ex, ny, nx
	}
	if flipX {
		x0 = nx - ex
	}
	if flipY {
		y0 = ny - ey
	}
	return x0, y0, ex, ey
}

// pngOpaque reports whether a PNG's header chunks say it is opaque: a
// color type without alpha (grey, RGB, palette) and no tRNS chunk, which
// must come before the first IDAT. Anything it cannot read gives false.
func pngOpaque(data []byte) bool {
	ihdr, ok := pngIHDR(data)
	if !ok || ihdr[9] == 4 || ihdr[9] == 6 { // color types with alpha
		return false
	}
	opaque := false
	walkPNG(data, func(kind, _ []byte) bool {
		switch string(kind) {
		case "tRNS":
			return false
		case "IDAT":
			opaque = true
			return false
		}
		return true
	})
	return opaque
}

// pngPlain reports whether a PNG's PLTE and tRNS chunks follow the
// format's rules, which libpng and image/png read alike; where they break
// them libpng goes on without a word (a palette longer than the bit depth
// allows, a tRNS after IDAT) or reads them its own way (a grey key out of
// range), where image/png refuses the file or ignores the key.
func pngPlain(data []byte) bool {
	ihdr, ok := pngIHDR(data)
	if !ok {
		return true // the decoders' errors say what is wrong
	}
	depth, ctype := int(ihdr[8]), ihdr[9]
	maxSample := 1<<depth - 1
	plte, trns, idat, plain := -1, false, false, true
	walkPNG(data, func(kind, body []byte) bool {
		n := len(body)
		switch string(kind) {
		case "PLTE":
			plain = !(ctype == 0 || ctype == 4 || plte >= 0 || trns || idat || n%3 != 0 ||
				n/3 > 256 || (ctype == 3 && n/3 > 1<<depth))
			plte = n / 3
		case "tRNS":
			plain = !trns && !idat && trnsPlain(ctype, body, plte, maxSample)
			trns = true
		case "IDAT":
			idat = true
		}
		return plain
	})
	return plain
}

// trnsPlain reports whether a tRNS body fits the color type: a key in
// range for grey and RGB, no more alphas than palette entries.
func trnsPlain(ctype byte, body []byte, plte, maxSample int) bool {
	switch ctype {
	case 0, 2:
		samples := 1 // a grey key; RGB has 3
		if ctype == 2 {
			samples = 3
		}
		if len(body) != 2*samples {
			return false
		}
		for i := 0; i < len(body); i += 2 {
			if int(binary.BigEndian.Uint16(body[i:])) > maxSample {
				return false
			}
		}
		return true
	case 3:
		return plte >= 0 && len(body) <= plte
	}
	return false
}

// sniff names the format from the first bytes (the extension only chose
// the file), and for anything it cannot decode says what the data looks
// like instead.
func sniff(data []byte) (string, error) {
	switch {
	case len(data) == 0:
		return "", errors.New("empty file (0 bytes)")
	case bytes.HasPrefix(data, []byte{0xFF, 0xD8, 0xFF}):
		return "jpeg", nil
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return "png", nil
	case bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")):
		return "gif", nil
	case bytes.HasPrefix(data, []byte("BM")):
		return "bmp", nil
	case bytes.HasPrefix(data, []byte("II*\x00")), bytes.HasPrefix(data, []byte("MM\x00*")):
		return "tiff", nil
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return "webp", nil
	case len(data) >= 3 && data[0] == 'P' && data[1] >= '1' && data[1] <= '6' && isPNMSpace(data[2]):
		return "pnm", nil
	}
	if kind := isobmffKind(data); kind != "" {
		return kind, nil
	}
	if bytes.HasPrefix(data, []byte{0xFF, 0x0A}) || bytes.HasPrefix(data, []byte("\x00\x00\x00\x0cJXL \r\n\x87\n")) {
		return "jxl", nil
	}
	kind := http.DetectContentType(data)
	return "", fmt.Errorf("not an image prep decodes (%d bytes, content looks like %s): prep reads JPEG, PNG, GIF, BMP, TIFF, WebP, PNM, HEIF, AVIF and JPEG XL by their content", len(data), kind)
}

// isobmffKind names an AVIF ("avif") or HEIF ("heif") file from its ftyp
// box, or "".
func isobmffKind(data []byte) string {
	if len(data) < 12 || string(data[4:8]) != "ftyp" {
		return ""
	}
	switch string(data[8:12]) {
	case "avif", "avis":
		return "avif"
	case "heic", "heix", "heim", "heis", "hevc", "hevx", "mif1", "msf1":
		return "heif"
	}
	return ""
}

func checkSize(w, h int, limit int64) error {
	if w <= 0 || h <= 0 {
		return fmt.Errorf("image declares an empty size %d×%d", w, h)
	}
	if limit == 0 {
		limit = DefaultMaxPixels
	}
	// w > limit/h is w·h > limit without the product, which overflows
	// int64 for headers that declare billions on each side (FuzzHEIFJXL
	// found a PNM of 2e10 × 7e8 that passed and panicked in make).
	if limit > 0 && int64(w) > limit/int64(h) {
		n := "more than 9.2e12"
		if int64(w) <= math.MaxInt64/int64(h) {
			n = mpix(int64(w) * int64(h))
		}
		return fmt.Errorf("image declares %d×%d = %s Mpixel, over the %s Mpixel limit (--max-pixels)",
			w, h, n, mpix(limit))
	}
	return nil
}

func mpix(n int64) string {
	if n%1_000_000 == 0 {
		return fmt.Sprint(n / 1_000_000)
	}
	return fmt.Sprintf("%.1f", float64(n)/1e6)
}

// corrupt words a decoder error. Truncation, the most common damage, shows
// as a missing end marker whatever the decoder says about it.
func corrupt(format string, data []byte, err error) error {
	name, end := "JPEG", []byte{0xFF, 0xD9}
	if format == "png" {
		name, end = "PNG", []byte("IEND\xaeB`\x82")
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || !bytes.HasSuffix(bytes.TrimRight(data, "\x00"), end) {
		return fmt.Errorf("truncated %s: the file ends after %d bytes without its end marker (%v)", name, len(data), err)
	}
	return fmt.Errorf("corrupt %s: %w", name, err)
}

func decodeGo(format string, data []byte) (*image.NRGBA, error) {
	var m image.Image
	var err error
	if format == "jpeg" {
		m, err = jpeg.Decode(bytes.NewReader(data))
	} else {
		m, err = png.Decode(bytes.NewReader(data))
	}
	var unsupported jpeg.UnsupportedError
	if errors.As(err, &unsupported) {
		return nil, fmt.Errorf("JPEG uses a feature the Go decoder lacks (%s): decode it with libjpeg-turbo (--decoder auto in a cgo build)", string(unsupported))
	}
	if err != nil {
		return nil, corrupt(format, data, err)
	}
	return toNRGBA(m), nil
}
