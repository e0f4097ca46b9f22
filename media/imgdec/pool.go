package imgdec

import (
	"image"
	"math/bits"
	"sync"
)

// Freshly allocated memory is slow to touch on the target VMs (see
// DESIGN.md), so decoded pixel buffers are recycled through Release. Buffers
// are pooled by power-of-two capacity so any image fits a class, together
// with their image header, so that a decode through the pool allocates
// nothing.
const (
	minPoolClass = 16 // 64 KiB: smaller images are cheap to allocate
	maxPoolClass = 28 // 256 MiB
)

var pools [maxPoolClass + 1]sync.Pool

func class(n int) int { return bits.Len(uint(n - 1)) }

// newNRGBA returns a w×h image whose pixels may hold old data: callers
// overwrite every byte.
func newNRGBA(w, h int) *image.NRGBA {
	n := 4 * w * h
	c := class(n)
	if c < minPoolClass || c > maxPoolClass {
		return image.NewNRGBA(image.Rect(0, 0, w, h))
	}
	img, ok := pools[c].Get().(*image.NRGBA)
	if !ok {
		img = &image.NRGBA{Pix: make([]byte, n, 1<<c)}
	}
	img.Pix, img.Stride, img.Rect = img.Pix[:n], 4*w, image.Rect(0, 0, w, h)
	return img
}

// Release hands an image returned by Decode back for reuse: the next Decode
// may return the same *image.NRGBA, so the caller must not touch img
// afterwards. Calling it is optional: it saves allocating and page-faulting
// a new buffer for the next image of a similar size.
func Release(img *image.NRGBA) {
	if img == nil {
		return
	}
	c := cap(img.Pix)
	if c == 0 || c&(c-1) != 0 { // not one of ours
		return
	}
	k := class(c)
	if k < minPoolClass || k > maxPoolClass {
		return
	}
	pools[k].Put(img)
}
