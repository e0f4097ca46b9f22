package imgdec

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"unsafe"
)

// fuzzMaxPixels keeps decodes in the fuzz targets small and fast.
const fuzzMaxPixels = 1 << 16

// addFiles adds the files matching pattern in testdata/edge of at most
// max bytes to the corpus.
func addFiles(f *testing.F, pattern string, max int) {
	files, err := filepath.Glob(filepath.Join(edgeDir, pattern))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds for %s: %v", pattern, err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		if len(b) <= max {
			f.Add(b)
		}
	}
}

// pngOf builds a PNG from chunks (type, body) with valid CRCs.
func pngOf(chunks ...string) []byte {
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

// ihdr is an IHDR body: w x h, bit depth, color type.
func ihdr(w, h uint32, depth, ctype byte) string {
	b := binary.BigEndian.AppendUint32(nil, w)
	b = binary.BigEndian.AppendUint32(b, h)
	return string(append(b, depth, ctype, 0, 0, 0))
}

// FuzzPNGHeaders checks the PNG chunk walkers against the decoders:
// pngSize agrees with image/png's header; both decoders (libpng, where
// pngPlain lets it, and image/png) decode a PNG to the same pixels or
// both refuse it, since the decoder must never change a dataset; a
// decoded image has the size Info says; and pngOpaque never calls an
// image with a transparent pixel opaque.
func FuzzPNGHeaders(f *testing.F) {
	addFiles(f, "*.png", 8<<10)
	// A 2x1 grey image, its pixels in a zlib stream.
	var grey bytes.Buffer
	png.Encode(&grey, image.NewGray(image.Rect(0, 0, 2, 1)))
	var idat []byte
	walkPNG(grey.Bytes(), func(kind, body []byte) bool {
		if string(kind) == "IDAT" {
			idat = body
		}
		return true
	})
	f.Add(pngOf("IHDR", ihdr(2, 1, 8, 0), "IDAT", string(idat), "tRNS", "\x00\x07", "IEND", ""))       // tRNS after IDAT
	f.Add(pngOf("IHDR", ihdr(2, 1, 8, 0), "tRNS", "\x01\x00", "IDAT", string(idat), "IEND", ""))       // grey key out of range
	f.Add(pngOf("IHDR", ihdr(2, 1, 1, 3), "PLTE", "\x00\x00\x00\x01\x01\x01\x02\x02\x02", "IEND", "")) // palette too long
	f.Add(pngOf("IHDR", ihdr(1<<31, 1, 8, 2), "IEND", ""))
	f.Fuzz(func(t *testing.T, b []byte) {
		// The mutator cannot fix a CRC, without which the decoders look
		// no further than a changed chunk: fix them.
		b = fixCRCs(b)
		if w, h, ok := pngSize(b); ok {
			if cfg, err := png.DecodeConfig(bytes.NewReader(b)); err == nil && (cfg.Width != w || cfg.Height != h) {
				t.Fatalf("pngSize %dx%d, image/png %dx%d", w, h, cfg.Width, cfg.Height)
			}
		}
		pngPlain(b)
		goImg, goInfo, goErr := Decode(b, Options{MaxPixels: fuzzMaxPixels, Decoder: DecoderGo})
		checkDecoded(t, goImg, goInfo, goErr)
		if goErr == nil && goInfo.Format == "png" && pngOpaque(b) {
			for i := 3; i < len(goImg.Pix); i += 4 {
				if goImg.Pix[i] != 255 {
					t.Fatalf("pngOpaque, but pixel %d has alpha %d", i/4, goImg.Pix[i])
				}
			}
		}
		if !TurboAvailable() || goInfo.Format != "png" {
			return
		}
		img, info, err := Decode(b, Options{MaxPixels: fuzzMaxPixels, Decoder: DecoderTurbo})
		checkDecoded(t, img, info, err)
		switch {
		case (err == nil) != (goErr == nil):
			t.Fatalf("libpng path: %v; image/png: %v", err, goErr)
		case err == nil && (img.Rect != goImg.Rect || !bytes.Equal(img.Pix, goImg.Pix)):
			t.Fatalf("libpng path and image/png decode %v and %v to other pixels (pngPlain %v)", img.Rect, goImg.Rect, pngPlain(b))
		}
	})
}

// fixCRCs returns a copy of a PNG with the CRC of each whole chunk
// recomputed.
func fixCRCs(b []byte) []byte {
	b = bytes.Clone(b)
	for i := 8; i+12 <= len(b); {
		n := int(binary.BigEndian.Uint32(b[i:]))
		if n > len(b)-i-12 {
			break
		}
		binary.BigEndian.PutUint32(b[i+8+n:], crc32.ChecksumIEEE(b[i+4:i+8+n]))
		i += 12 + n
	}
	return b
}

// FuzzJPEGHeaders checks the JPEG marker walker: every segment it hands
// out lies inside the data, after the one before; jpegSize agrees with
// image/jpeg's header; and whichever decoder takes the file gives an
// image of the size Info says.
func FuzzJPEGHeaders(f *testing.F) {
	addFiles(f, "*.jpg", 8<<10)
	f.Add([]byte("\xff\xd8\xff\xff\xff\xc0\x00\x0b\x08\x00\x02\x00\x03\x01\x01\x11\x00\xff\xd9")) // fill bytes, SOF0 2x3
	f.Add([]byte("\xff\xd8\xff\xd0\xff\x01\xff\xc4\x00\x02\xff\xc2\x00\x08\x08\x00\x00\x00\x00")) // RST, TEM, empty DHT, SOF2 0x0
	f.Fuzz(func(t *testing.T, b []byte) {
		end := 0
		walkJPEG(b, func(marker byte, seg []byte) bool {
			start := int(uintptr(unsafe.Pointer(unsafe.SliceData(seg))) - uintptr(unsafe.Pointer(unsafe.SliceData(b))))
			if start < end || start+len(seg) > len(b) {
				t.Fatalf("segment %#x at %d+%d, after one ending at %d, in %d bytes", marker, start, len(seg), end, len(b))
			}
			end = start + len(seg)
			return true
		})
		if w, h, ok := jpegSize(b); ok {
			if cfg, err := jpeg.DecodeConfig(bytes.NewReader(b)); err == nil && (cfg.Width != w || cfg.Height != h) {
				t.Fatalf("jpegSize %dx%d, image/jpeg %dx%d", w, h, cfg.Width, cfg.Height)
			}
		}
		for _, dec := range decoders() {
			img, info, err := Decode(b, Options{MaxPixels: fuzzMaxPixels, Decoder: dec})
			checkDecoded(t, img, info, err)
		}
	})
}

// checkDecoded checks what Decode returned at full scale: an image or an
// error, and an image of the size Info says.
func checkDecoded(t *testing.T, img *image.NRGBA, info Info, err error) {
	t.Helper()
	if (img == nil) == (err == nil) {
		t.Fatalf("image %v with error %v", img != nil, err)
	}
	if err != nil {
		return
	}
	if w, h := info.Upright(); img.Rect.Dx() != w || img.Rect.Dy() != h || info.ScaleNum != 8 {
		t.Fatalf("decoded %v at scale %d/8, Info says %dx%d (orientation %d)", img.Rect, info.ScaleNum, w, h, info.Orientation)
	}
	if len(img.Pix) < img.Stride*(img.Rect.Dy()-1)+4*img.Rect.Dx() {
		t.Fatalf("%v image with stride %d holds %d bytes", img.Rect, img.Stride, len(img.Pix))
	}
}
