package imgdec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// webpSize reads the canvas size from the first chunk: VP8X (extended:
// animation, alpha, metadata), VP8 (lossy) or VP8L (lossless).
func webpSize(data []byte) (int, int, error) {
	if len(data) < 30 {
		return 0, 0, errTruncated
	}
	le := binary.LittleEndian
	switch string(data[12:16]) {
	case "VP8X":
		w := int(le.Uint32(append(data[24:27:27], 0))) + 1
		h := int(le.Uint32(append(data[27:30:30], 0))) + 1
		return w, h, nil
	case "VP8 ":
		if !bytes.Equal(data[23:26], []byte{0x9d, 0x01, 0x2a}) {
			return 0, 0, errors.New("the VP8 frame has no start code")
		}
		return int(le.Uint16(data[26:]) & 0x3fff), int(le.Uint16(data[28:]) & 0x3fff), nil
	case "VP8L":
		if data[20] != 0x2f {
			return 0, 0, errors.New("the VP8L chunk has no signature")
		}
		b := le.Uint32(data[21:])
		return int(b&0x3fff) + 1, int(b>>14&0x3fff) + 1, nil
	}
	return 0, 0, fmt.Errorf("unknown first chunk %q", data[12:16])
}

// webpOrientation reads the EXIF chunk's orientation, as Pillow's
// exif_transpose does for a WebP.
func webpOrientation(data []byte) int {
	le := binary.LittleEndian
	for i := 12; i+8 <= len(data); {
		n := int(le.Uint32(data[i+4:]))
		if n < 0 || n > len(data)-i-8 {
			return 1
		}
		if string(data[i:i+4]) == "EXIF" {
			exif := data[i+8 : i+8+n]
			exif = bytes.TrimPrefix(exif, []byte("Exif\x00\x00"))
			return tiffOrientation(exif)
		}
		i += 8 + n + n&1 // chunks are padded to an even size
	}
	return 1
}
