package imgdec

import (
	"encoding/binary"
	"fmt"
	"image"
)

// BMP, read as Pillow's BmpImagePlugin reads it: OS/2 v1 and Windows
// v3–v5 headers; 1-, 4- and 8-bit palettes (uncompressed, RLE4, RLE8),
// 16-bit 5-5-5 and 5-6-5, 24-bit, and 32-bit BGRX, or with the bitfield
// layouts Pillow takes (alpha only where the masks name one).

type bmpHeader struct {
	w, h        int
	topDown     bool
	bits        int
	compression uint32
	masks       [4]uint32 // r, g, b, a for BI_BITFIELDS
	palette     []byte    // entries of padding bytes, BGR first
	padding     int       // 3 (OS/2 v1) or 4
	offset      int       // of the pixels
}

func readBMPHeader(data []byte) (bmpHeader, error) {
	var hd bmpHeader
	le := binary.LittleEndian
	if len(data) < 18 {
		return hd, errTruncated
	}
	hd.offset = int(le.Uint32(data[10:]))
	size := int(le.Uint32(data[14:]))
	switch size {
	case 12, 40, 64, 108, 124:
	default:
		return hd, unsupported(fmt.Sprintf("unsupported BMP header size %d (Pillow reads 12, 40, 64, 108 and 124): convert it to PNG first", size))
	}
	if len(data) < 14+size {
		return hd, errTruncated
	}
	h := data[18 : 14+size]
	colors := 0
	switch size {
	case 12:
		hd.w, hd.h = int(le.Uint16(h)), int(le.Uint16(h[2:]))
		hd.bits = int(le.Uint16(h[6:]))
		hd.padding = 3
	case 40, 64, 108, 124:
		hd.w = int(le.Uint32(h))
		hy := le.Uint32(h[4:])
		if h[7] == 0xFF { // a negative height: rows top to bottom
			hd.topDown, hy = true, -hy
		}
		hd.h = int(hy)
		hd.bits = int(le.Uint16(h[10:]))
		hd.compression = le.Uint32(h[12:])
		colors = int(le.Uint32(h[28:]))
		hd.padding = 4
		if hd.compression == 3 { // BI_BITFIELDS
			if len(h) >= 52 {
				for i := range hd.masks {
					hd.masks[i] = le.Uint32(h[36+4*i:])
				}
			} else { // a v3 header: the three masks follow it
				if len(data) < 14+size+12 {
					return hd, errTruncated
				}
				for i := 0; i < 3; i++ {
					hd.masks[i] = le.Uint32(data[14+size+4*i:])
				}
			}
		}
	}
	if hd.w > 1<<24 || hd.h > 1<<24 {
		return hd, fmt.Errorf("impossible size %d×%d", hd.w, hd.h)
	}
	if colors == 0 && hd.bits < 24 {
		colors = 1 << hd.bits
	}
	if hd.bits <= 8 {
		if colors <= 0 || colors > 1<<16 {
			return hd, fmt.Errorf("unsupported palette size %d", colors)
		}
		start := 14 + size
		if hd.offset == start { // the offset points at the palette: skip it, as Pillow does
			hd.offset += 4 * colors
		}
		end := min(start+hd.padding*colors, len(data))
		hd.palette = data[start:end]
	}
	return hd, nil
}

func bmpSize(data []byte) (int, int, error) {
	hd, err := readBMPHeader(data)
	return hd.w, hd.h, err
}

func decodeBMP(data []byte, w, h int) (*image.NRGBA, bool, error) {
	hd, err := readBMPHeader(data)
	if err != nil {
		return nil, false, err
	}
	if hd.offset < 0 || hd.offset > len(data) {
		return nil, false, errTruncated
	}
	px := data[hd.offset:]
	switch hd.compression {
	case 0, 3:
	case 1, 2:
		if hd.bits != 8 && hd.bits != 4 || hd.compression == 1 && hd.bits != 8 || hd.compression == 2 && hd.bits != 4 {
			return nil, false, fmt.Errorf("RLE compression with %d bits a pixel", hd.bits)
		}
		return bmpRLE(hd, px, w, h)
	default:
		return nil, false, fmt.Errorf("unsupported BMP compression %d", hd.compression)
	}
	layout, alpha, err := bmpLayout(hd)
	if err != nil {
		return nil, false, err
	}
	stride := ((w*hd.bits + 31) >> 3) &^ 3
	if len(px) < stride*h {
		return nil, false, errTruncated
	}
	img := newNRGBA(w, h)
	var pal [][4]uint8
	if hd.bits <= 8 {
		pal = bmpPalette(hd)
	}
	row := make([]byte, w)
	for y := 0; y < h; y++ {
		sy := h - 1 - y // bottom-up unless the height was negative
		if hd.topDown {
			sy = y
		}
		src := px[sy*stride : (sy+1)*stride]
		dst := img.Pix[y*img.Stride : y*img.Stride+4*w]
		if hd.bits <= 8 {
			per := 8 / hd.bits
			for x := range row {
				b := src[x/per]
				shift := 8 - hd.bits*(x%per+1)
				row[x] = b >> shift & (1<<hd.bits - 1)
			}
			one := image.NRGBA{Pix: dst, Stride: 4 * w, Rect: image.Rect(0, 0, w, 1)}
			fromPalette(&one, row, w, pal)
			continue
		}
		for x := 0; x < w; x++ {
			d := dst[4*x : 4*x+4]
			switch hd.bits {
			case 16:
				v := int(binary.LittleEndian.Uint16(src[2*x:]))
				if layout == "BGR;16" {
					d[0], d[1], d[2] = uint8((v>>11&31)*255/31), uint8((v>>5&63)*255/63), uint8((v&31)*255/31)
				} else {
					d[0], d[1], d[2] = uint8((v>>10&31)*255/31), uint8((v>>5&31)*255/31), uint8((v&31)*255/31)
				}
				d[3] = 0xFF
			case 24:
				d[0], d[1], d[2], d[3] = src[3*x+2], src[3*x+1], src[3*x], 0xFF
			case 32:
				s := src[4*x : 4*x+4]
				switch layout {
				case "BGRX", "BGRA":
					d[0], d[1], d[2], d[3] = s[2], s[1], s[0], s[3]
				case "XBGR", "ABGR":
					d[0], d[1], d[2], d[3] = s[3], s[2], s[1], s[0]
				case "RGBA":
					d[0], d[1], d[2], d[3] = s[0], s[1], s[2], s[3]
				}
				if !alpha {
					d[3] = 0xFF
				}
			}
		}
	}
	return img, !alpha, nil
}

// bmpLayout names Pillow's raw mode for a file's bits and masks, and
// whether it has alpha; what Pillow refuses is refused.
func bmpLayout(hd bmpHeader) (string, bool, error) {
	if hd.compression == 0 {
		switch hd.bits {
		case 1, 4, 8:
			return "P", false, nil
		case 16:
			return "BGR;15", false, nil
		case 24:
			return "BGR", false, nil
		case 32:
			return "BGRX", false, nil
		}
		return "", false, fmt.Errorf("unsupported BMP pixel depth %d", hd.bits)
	}
	m := hd.masks
	switch {
	case hd.bits == 32 && m == [4]uint32{0xFF0000, 0xFF00, 0xFF, 0}:
		return "BGRX", false, nil
	case hd.bits == 32 && m == [4]uint32{0xFF000000, 0xFF0000, 0xFF00, 0}:
		return "XBGR", false, nil
	case hd.bits == 32 && m == [4]uint32{0xFF000000, 0xFF0000, 0xFF00, 0xFF}:
		return "ABGR", true, nil
	case hd.bits == 32 && m == [4]uint32{0xFF, 0xFF00, 0xFF0000, 0xFF000000}:
		return "RGBA", true, nil
	case hd.bits == 32 && (m == [4]uint32{0xFF0000, 0xFF00, 0xFF, 0xFF000000} || m == [4]uint32{}):
		return "BGRA", true, nil
	case hd.bits == 24 && [3]uint32(m[:3]) == [3]uint32{0xFF0000, 0xFF00, 0xFF}:
		return "BGR", false, nil
	case hd.bits == 16 && [3]uint32(m[:3]) == [3]uint32{0xF800, 0x7E0, 0x1F}:
		return "BGR;16", false, nil
	case hd.bits == 16 && [3]uint32(m[:3]) == [3]uint32{0x7C00, 0x3E0, 0x1F}:
		return "BGR;15", false, nil
	}
	return "", false, fmt.Errorf("unsupported BMP bitfields layout (%d bits, masks %#x)", hd.bits, m)
}

// bmpPalette reads the colour table; entries are BGR(X).
func bmpPalette(hd bmpHeader) [][4]uint8 {
	n := len(hd.palette) / hd.padding
	pal := make([][4]uint8, min(n, 256))
	for i := range pal {
		e := hd.palette[i*hd.padding:]
		pal[i] = [4]uint8{e[2], e[1], e[0], 0xFF}
	}
	return pal
}

// bmpRLE decodes RLE8 and RLE4 pixels as Pillow's BmpRleDecoder does: runs
// and absolute runs fill rows bottom-up, an end of line pads the row with
// index 0, a delta skips with index 0; data that ends before the last
// pixel is refused.
func bmpRLE(hd bmpHeader, px []byte, w, h int) (*image.NRGBA, bool, error) {
	rle4 := hd.compression == 2
	total := w * h
	out := make([]byte, 0, total)
	x, i := 0, 0
	for len(out) < total {
		if i+2 > len(px) {
			break
		}
		n, b := int(px[i]), px[i+1]
		i += 2
		if n > 0 {
			if x+n > w {
				n = max(0, w-x)
			}
			for k := 0; k < n; k++ {
				switch {
				case !rle4:
					out = append(out, b)
				case k%2 == 0:
					out = append(out, b>>4)
				default:
					out = append(out, b&0x0F)
				}
			}
			x += n
			continue
		}
		switch b {
		case 0: // end of line
			for len(out)%w != 0 {
				out = append(out, 0)
			}
			x = 0
		case 1: // end of bitmap
			i = len(px)
		case 2: // delta
			if i+2 > len(px) {
				i = len(px)
				break
			}
			right, up := int(px[i]), int(px[i+1])
			i += 2
			for k := 0; k < right+up*w && len(out) < total; k++ {
				out = append(out, 0)
			}
			x = len(out) % w
		default: // absolute: b pixels follow
			count := int(b)
			nbytes := count
			if rle4 {
				nbytes = count / 2
			}
			end := min(i+nbytes, len(px))
			for _, v := range px[i:end] {
				if rle4 {
					out = append(out, v>>4, v&0x0F)
				} else {
					out = append(out, v)
				}
			}
			short := end-i < nbytes
			i = end
			if short {
				i = len(px)
				break
			}
			x += count
			if (hd.offset+i)%2 != 0 { // word alignment, counted from the file's start
				i++
			}
		}
	}
	if len(out) < total {
		return nil, false, fmt.Errorf("%w: the RLE data gives %d of %d pixels", errTruncated, len(out), total)
	}
	out = out[:total]
	if !hd.topDown { // rows stored bottom-up
		for y := 0; y < h/2; y++ {
			a, b := out[y*w:(y+1)*w], out[(h-1-y)*w:(h-y)*w]
			for k := range a {
				a[k], b[k] = b[k], a[k]
			}
		}
	}
	img := newNRGBA(w, h)
	fromPalette(img, out, w, bmpPalette(hd))
	return img, true, nil
}
