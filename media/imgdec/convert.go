package imgdec

import (
	"image"
	"image/color"
	"sync"
)

// toNRGBA converts what image/jpeg and image/png return into 8-bit,
// non-premultiplied RGBA. 16-bit samples keep their high byte, as Pillow does.
func toNRGBA(m image.Image) *image.NRGBA {
	b := m.Bounds()
	if n, ok := m.(*image.NRGBA); ok && b.Min == (image.Point{}) {
		return n
	}
	w, h := b.Dx(), b.Dy()
	dst := newNRGBA(w, h) // every byte is written below
	switch s := m.(type) {
	case *image.YCbCr:
		for y := 0; y < h; y++ {
			row := dst.Pix[y*dst.Stride : y*dst.Stride+4*w]
			for x := 0; x < w; x++ {
				yi := s.YOffset(b.Min.X+x, b.Min.Y+y)
				ci := s.COffset(b.Min.X+x, b.Min.Y+y)
				r, g, bl := color.YCbCrToRGB(s.Y[yi], s.Cb[ci], s.Cr[ci])
				row[4*x], row[4*x+1], row[4*x+2], row[4*x+3] = r, g, bl, 0xFF
			}
		}
	case *image.Gray:
		for y := 0; y < h; y++ {
			src := s.Pix[(y)*s.Stride : (y)*s.Stride+w]
			row := dst.Pix[y*dst.Stride : y*dst.Stride+4*w]
			for x, v := range src {
				row[4*x], row[4*x+1], row[4*x+2], row[4*x+3] = v, v, v, 0xFF
			}
		}
	case *image.Gray16:
		for y := 0; y < h; y++ {
			src := s.Pix[y*s.Stride : y*s.Stride+2*w]
			row := dst.Pix[y*dst.Stride : y*dst.Stride+4*w]
			for x := 0; x < w; x++ {
				v := src[2*x] // big-endian: the high byte comes first
				row[4*x], row[4*x+1], row[4*x+2], row[4*x+3] = v, v, v, 0xFF
			}
		}
	case *image.RGBA:
		// Go's PNG decoder gives RGBA (premultiplied) for RGB and RGBA
		// files; opaque pixels copy as they are.
		for y := 0; y < h; y++ {
			src := s.Pix[s.PixOffset(b.Min.X, b.Min.Y+y):][:4*w]
			row := dst.Pix[y*dst.Stride : y*dst.Stride+4*w]
			for i := 0; i < len(src); i += 4 {
				r, g, bl, a := src[i], src[i+1], src[i+2], src[i+3]
				switch a {
				case 0xFF:
				case 0:
					r, g, bl = 0, 0, 0
				default: // as color.NRGBAModel does it
					a16 := uint32(a) * 0x101
					r = uint8(uint32(r) * 0x101 * 0xffff / a16 >> 8)
					g = uint8(uint32(g) * 0x101 * 0xffff / a16 >> 8)
					bl = uint8(uint32(bl) * 0x101 * 0xffff / a16 >> 8)
				}
				row[i], row[i+1], row[i+2], row[i+3] = r, g, bl, a
			}
		}
	case *image.NRGBA:
		for y := 0; y < h; y++ {
			copy(dst.Pix[y*dst.Stride:y*dst.Stride+4*w], s.Pix[y*s.Stride:])
		}
	case *image.NRGBA64:
		for y := 0; y < h; y++ {
			src := s.Pix[y*s.Stride : y*s.Stride+8*w]
			row := dst.Pix[y*dst.Stride : y*dst.Stride+4*w]
			for i := range row {
				row[i] = src[2*i]
			}
		}
	case *image.RGBA64:
		// PNG gives RGBA64 only for opaque 16-bit RGB, so no un-premultiplying.
		for y := 0; y < h; y++ {
			src := s.Pix[y*s.Stride : y*s.Stride+8*w]
			row := dst.Pix[y*dst.Stride : y*dst.Stride+4*w]
			for x := 0; x < w; x++ {
				if src[8*x+6] != 0xFF || src[8*x+7] != 0xFF {
					row[4*x], row[4*x+1], row[4*x+2], row[4*x+3] = nrgbaOf(s.At(b.Min.X+x, b.Min.Y+y))
					continue
				}
				row[4*x], row[4*x+1], row[4*x+2], row[4*x+3] = src[8*x], src[8*x+2], src[8*x+4], 0xFF
			}
		}
	case *image.Paletted:
		var pal [256][4]uint8
		for i, c := range s.Palette {
			if i < len(pal) {
				pal[i][0], pal[i][1], pal[i][2], pal[i][3] = nrgbaOf(c)
			}
		}
		for y := 0; y < h; y++ {
			src := s.Pix[y*s.Stride : y*s.Stride+w]
			row := dst.Pix[y*dst.Stride : y*dst.Stride+4*w]
			for x, i := range src {
				copy(row[4*x:4*x+4], pal[i][:])
			}
		}
	case *image.CMYK:
		for y := 0; y < h; y++ {
			src := s.Pix[y*s.Stride : y*s.Stride+4*w]
			row := dst.Pix[y*dst.Stride : y*dst.Stride+4*w]
			for x := 0; x < w; x++ {
				r, g, bl := color.CMYKToRGB(src[4*x], src[4*x+1], src[4*x+2], src[4*x+3])
				row[4*x], row[4*x+1], row[4*x+2], row[4*x+3] = r, g, bl, 0xFF
			}
		}
	default: // *image.RGBA and anything else: exact for opaque pixels
		for y := 0; y < h; y++ {
			row := dst.Pix[y*dst.Stride : y*dst.Stride+4*w]
			for x := 0; x < w; x++ {
				row[4*x], row[4*x+1], row[4*x+2], row[4*x+3] = nrgbaOf(m.At(b.Min.X+x, b.Min.Y+y))
			}
		}
	}
	return dst
}

// nrgbaOf converts one colour without the premultiplied round trip where the
// colour is already non-premultiplied (palette entries with tRNS are).
func nrgbaOf(c color.Color) (r, g, b, a uint8) {
	switch c := c.(type) {
	case color.NRGBA:
		return c.R, c.G, c.B, c.A
	case color.NRGBA64:
		return uint8(c.R >> 8), uint8(c.G >> 8), uint8(c.B >> 8), uint8(c.A >> 8)
	}
	n := color.NRGBAModel.Convert(c).(color.NRGBA)
	return n.R, n.G, n.B, n.A
}

// cmykToRGBA turns libjpeg's CMYK output, 4 bytes a pixel in place, into
// opaque RGBA with the conversion image/jpeg's CMYK images get
// (color.CMYKToRGB), after undoing Adobe's inverted storage.
func cmykToRGBA(img *image.NRGBA, inverted bool) {
	var inv uint8
	if inverted {
		inv = 0xFF
	}
	t := cmykTable()
	w, h := img.Rect.Dx(), img.Rect.Dy()
	for y := 0; y < h; y++ {
		row := img.Pix[y*img.Stride : y*img.Stride+4*w]
		for len(row) >= 4 {
			p := row[:4:4]
			k := uint16(p[3] ^ inv)
			p[0], p[1], p[2], p[3] = t[uint16(p[0]^inv)<<8|k], t[uint16(p[1]^inv)<<8|k], t[uint16(p[2]^inv)<<8|k], 0xFF
			row = row[4:]
		}
	}
}

// cmykTable returns the table t[ink<<8|black] of the channel
// color.CMYKToRGB makes of an ink and the black: each of its channels
// depends on those two alone. Looked up rather than computed per pixel,
// whose divisions made converting a CMYK photo cost about as much as
// decoding it (1% of a convert of the small bench photos, 2% of them
// CMYK). Built on first use, 64 KiB.
var cmykTable = sync.OnceValue(func() *[1 << 16]uint8 {
	t := new([1 << 16]uint8)
	for ink := range 256 {
		for k := range 256 {
			r, _, _ := color.CMYKToRGB(uint8(ink), 0, 0, uint8(k))
			t[ink<<8|k] = r
		}
	}
	return t
})
