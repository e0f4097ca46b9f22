package imgdec

import (
	"image"
)

// applyOrientation turns a decoded image upright according to the EXIF
// orientation o, the way Pillow's ImageOps.exif_transpose does.
func applyOrientation(src *image.NRGBA, o int) *image.NRGBA {
	if o <= 1 || o > 8 {
		return src
	}
	sw, sh := src.Rect.Dx(), src.Rect.Dy()
	dw, dh := sw, sh
	if o >= 5 { // 5..8 swap the axes
		dw, dh = sh, sw
	}
	dst := newNRGBA(dw, dh) // every byte is written below
	for dy := 0; dy < dh; dy++ {
		row := dst.Pix[dy*dst.Stride : dy*dst.Stride+4*dw]
		for dx := 0; dx < dw; dx++ {
			sx, sy := sourceOf(o, dx, dy, sw, sh)
			copy(row[4*dx:4*dx+4], src.Pix[sy*src.Stride+4*sx:])
		}
	}
	Release(src)
	return dst
}

// sourceOf maps a pixel of the upright image to the stored one.
func sourceOf(o, x, y, sw, sh int) (int, int) {
	switch o {
	case 2: // mirrored left-right
		return sw - 1 - x, y
	case 3: // turned 180°
		return sw - 1 - x, sh - 1 - y
	case 4: // mirrored top-bottom
		return x, sh - 1 - y
	case 5: // transposed
		return y, x
	case 6: // stored turned 90° anticlockwise: turn it clockwise
		return y, sh - 1 - x
	case 7: // transversed
		return sw - 1 - y, sh - 1 - x
	case 8: // stored turned 90° clockwise
		return sw - 1 - y, x
	}
	return x, y
}
