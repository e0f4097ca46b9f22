package imgdec

import (
	"bytes"
	"encoding/binary"
)

// orientation returns the EXIF orientation (1..8) of a JPEG or PNG file, or 1
// when it has none or it cannot be read: a broken EXIF block never makes an
// otherwise good image fail.
func orientation(format string, data []byte) int {
	var tiff []byte
	if format == "jpeg" {
		tiff = jpegExif(data)
	} else {
		tiff = pngExif(data)
	}
	if o := tiffOrientation(tiff); o >= 1 && o <= 8 {
		return o
	}
	return 1
}

// jpegExif returns the TIFF block of the first APP1 "Exif" segment.
func jpegExif(data []byte) []byte {
	var tiff []byte
	walkJPEG(data, func(marker byte, seg []byte) bool {
		if marker == 0xE1 && bytes.HasPrefix(seg, []byte("Exif\x00\x00")) {
			tiff = seg[6:]
			return false
		}
		return true
	})
	return tiff
}

// pngSize reads the size from the IHDR chunk without allocating
// (image/png.DecodeConfig builds a decoder); ok is false when the chunk is
// missing or declares an impossible size.
func pngSize(data []byte) (w, h int, ok bool) {
	ihdr, ok := pngIHDR(data)
	if !ok {
		return 0, 0, false
	}
	w, h = int(binary.BigEndian.Uint32(ihdr)), int(binary.BigEndian.Uint32(ihdr[4:]))
	return w, h, w > 0 && h > 0 && w <= 1<<31-1 && h <= 1<<31-1
}

// pngIHDR returns the body of the IHDR chunk, which must come first.
func pngIHDR(data []byte) ([]byte, bool) {
	const sig = 8
	if len(data) < sig+8+13 || string(data[sig+4:sig+8]) != "IHDR" {
		return nil, false
	}
	return data[sig+8 : sig+8+13], true
}

// walkPNG calls fn with each whole chunk's type and body, up to IEND,
// until fn returns false. (kind is bytes: switch on string(kind), which
// does not allocate.)
func walkPNG(data []byte, fn func(kind, body []byte) bool) {
	for i := 8; i+8 <= len(data); { // past the signature
		n := int(binary.BigEndian.Uint32(data[i:]))
		if n < 0 || n > len(data)-i-12 {
			return
		}
		kind := data[i+4 : i+8]
		if string(kind) == "IEND" || !fn(kind, data[i+8:i+8+n]) {
			return
		}
		i += 12 + n // length, type, body, CRC
	}
}

// jpegSize reads the frame size from the SOFn segment without allocating
// (image/jpeg.DecodeConfig builds a whole decoder); ok is false when there is
// none or it is malformed.
func jpegSize(data []byte) (w, h int, ok bool) {
	walkJPEG(data, func(marker byte, seg []byte) bool {
		switch marker {
		case 0xC4, 0xC8, 0xCC: // DHT, JPG, DAC share the SOFn range
			return true
		}
		if marker >= 0xC0 && marker <= 0xCF {
			if len(seg) >= 6 {
				h, w = int(binary.BigEndian.Uint16(seg[1:])), int(binary.BigEndian.Uint16(seg[3:]))
				ok = w > 0 && h > 0
			}
			return false
		}
		return true
	})
	return w, h, ok
}

// walkJPEG calls fn with each marker segment's body before the start of scan,
// until fn returns false.
func walkJPEG(data []byte, fn func(marker byte, seg []byte) bool) {
	i := 2 // past SOI
	for i+4 <= len(data) {
		if data[i] != 0xFF {
			return
		}
		marker := data[i+1]
		switch {
		case marker == 0xFF: // fill byte
			i++
			continue
		case marker == 0x01 || marker >= 0xD0 && marker <= 0xD8: // no length
			i += 2
			continue
		case marker == 0xDA || marker == 0xD9: // start of scan, end of image
			return
		}
		n := int(binary.BigEndian.Uint16(data[i+2:]))
		if n < 2 || i+2+n > len(data) {
			return
		}
		if !fn(marker, data[i+4:i+2+n]) {
			return
		}
		i += 2 + n
	}
}

// pngExif returns the body of the eXIf chunk, if any.
func pngExif(data []byte) []byte {
	var exif []byte
	walkPNG(data, func(kind, body []byte) bool {
		if string(kind) != "eXIf" {
			return true
		}
		// Some writers keep JPEG's "Exif\0\0" prefix; Pillow accepts it too.
		exif = bytes.TrimPrefix(body, []byte("Exif\x00\x00"))
		return false
	})
	return exif
}

// tiffOrientation reads tag 0x0112 from IFD0 of a TIFF block, in either byte
// order; 0 when absent or malformed.
func tiffOrientation(t []byte) int {
	if len(t) < 8 {
		return 0
	}
	var bo binary.ByteOrder
	switch string(t[:4]) {
	case "II*\x00":
		bo = binary.LittleEndian
	case "MM\x00*":
		bo = binary.BigEndian
	default:
		return 0
	}
	off := int64(bo.Uint32(t[4:]))
	if off < 8 || off+2 > int64(len(t)) {
		return 0
	}
	n := int64(bo.Uint16(t[off:]))
	for e := off + 2; e+12 <= int64(len(t)) && n > 0; e, n = e+12, n-1 {
		if bo.Uint16(t[e:]) != 0x0112 {
			continue
		}
		typ, count := bo.Uint16(t[e+2:]), bo.Uint32(t[e+4:])
		switch {
		case typ == 3 && count >= 1: // SHORT, stored inline
			return int(bo.Uint16(t[e+8:]))
		case typ == 4 && count >= 1: // LONG: seen from a few broken writers
			return int(bo.Uint32(t[e+8:]))
		}
		return 0
	}
	return 0
}
