package imgdec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/gif"
)

// gifSize reads the logical screen's size, which Pillow's image has.
func gifSize(data []byte) (int, int, error) {
	if len(data) < 13 {
		return 0, 0, errTruncated
	}
	return int(binary.LittleEndian.Uint16(data[6:])), int(binary.LittleEndian.Uint16(data[8:])), nil
}

// gifFirst is what the blocks before the first frame's pixels say about it.
type gifFirst struct {
	palette     []byte // the frame's colour table (local, else global), 3 bytes an entry
	transparent int    // its transparent index; -1: none
	rect        image.Rectangle
}

// gifFrameInfo walks the blocks up to the first image descriptor, for
// what image/gif does not return: the palette entry of the transparent
// index (which it blanks).
func gifFrameInfo(data []byte) (gifFirst, error) {
	f := gifFirst{transparent: -1}
	i := 13
	var global []byte
	if flags := data[10]; flags&0x80 != 0 {
		n := 3 << (flags&7 + 1)
		if len(data) < i+n {
			return f, errTruncated
		}
		global, i = data[i:i+n], i+n
	}
	for {
		if i >= len(data) {
			return f, errTruncated
		}
		switch data[i] {
		case 0x21: // extension: label, then sub-blocks
			if i+2 > len(data) {
				return f, errTruncated
			}
			label := data[i+1]
			i += 2
			first := true
			for {
				if i >= len(data) {
					return f, errTruncated
				}
				n := int(data[i])
				if i+1+n > len(data) {
					return f, errTruncated
				}
				if label == 0xF9 && first && n >= 4 {
					f.transparent = -1
					if data[i+1]&1 != 0 {
						f.transparent = int(data[i+4])
					}
				}
				first = false
				i += 1 + n
				if n == 0 {
					break
				}
			}
		case 0x2C: // image descriptor
			if i+10 > len(data) {
				return f, errTruncated
			}
			d := data[i+1:]
			x, y := int(binary.LittleEndian.Uint16(d)), int(binary.LittleEndian.Uint16(d[2:]))
			w, h := int(binary.LittleEndian.Uint16(d[4:])), int(binary.LittleEndian.Uint16(d[6:]))
			f.rect = image.Rect(x, y, x+w, y+h)
			f.palette = global
			if flags := d[8]; flags&0x80 != 0 {
				n := 3 << (flags&7 + 1)
				if i+10+n > len(data) {
					return f, errTruncated
				}
				f.palette = data[i+10 : i+10+n]
			}
			return f, nil
		case 0x3B:
			return f, errors.New("the file has no image")
		default:
			return f, fmt.Errorf("unknown block type 0x%02x", data[i])
		}
	}
}

// decodeGIF decodes the first frame onto the logical screen as Pillow does:
// the screen starts as the transparent index where the frame has one, else
// index 0, and the frame's palette (local, else global) colours it all.
// The transparent index is kept as alpha 0.
func decodeGIF(data []byte, w, h int) (*image.NRGBA, bool, error) {
	first, err := gifFrameInfo(data)
	if err != nil {
		return nil, false, err
	}
	if len(first.palette) == 0 {
		return nil, false, errors.New("the first frame has no colour table")
	}
	m, err := gif.Decode(bytes.NewReader(data)) // the first frame only
	if err != nil {
		return nil, false, err
	}
	p, ok := m.(*image.Paletted)
	if !ok || p.Rect != first.rect {
		return nil, false, errors.New("the first frame does not match its descriptor")
	}
	fill := byte(0)
	if first.transparent >= 0 {
		fill = byte(first.transparent)
	}
	idx := make([]byte, w*h)
	for i := range idx {
		idx[i] = fill
	}
	r := p.Rect.Intersect(image.Rect(0, 0, w, h))
	for y := r.Min.Y; y < r.Max.Y; y++ {
		copy(idx[y*w+r.Min.X:y*w+r.Max.X], p.Pix[p.PixOffset(r.Min.X, y):])
	}
	pal := make([][4]uint8, len(first.palette)/3)
	for i := range pal {
		pal[i] = [4]uint8{first.palette[3*i], first.palette[3*i+1], first.palette[3*i+2], 0xFF}
	}
	if t := first.transparent; t >= 0 && t < len(pal) {
		pal[t][3] = 0
	}
	img := newNRGBA(w, h)
	fromPalette(img, idx, w, pal)
	return img, first.transparent < 0, nil
}
