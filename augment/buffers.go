package augment

import "image"

// Buffers lets successive calls of Recipe.ApplyBuffers reuse the memory of
// their intermediate and final images, and the resampling weights, rather
// than allocate them for every sample: on the target VMs touching fresh
// memory costs more than resampling it (DESIGN.md). The zero value is
// ready; a Buffers is not safe for concurrent use, so give each worker its
// own.
type Buffers struct {
	imgs []*image.NRGBA // the first used are handed out in this call
	used int
	acc  []int32
	taps map[tapsKey]taps
}

// tapsKey names a set of weights: destination and source size, the span
// of the source mapped, and whether they carry the SIMD layout.
type tapsKey struct {
	dst, src int
	sp       span
	wide     bool
}

// maxTaps bounds the weights kept: a dataset of many image sizes would
// otherwise keep one set per size pair.
const maxTaps = 64

// reset starts a call: every buffer handed out before may be reused.
func (b *Buffers) reset() {
	if b != nil {
		b.used = 0
	}
}

// image returns a w×h image whose pixels may hold old data, so callers
// must write every byte. Within one call each image has its own memory;
// a nil b allocates.
func (b *Buffers) image(w, h int) *image.NRGBA {
	if b == nil {
		return image.NewNRGBA(image.Rect(0, 0, w, h))
	}
	n := 4 * w * h
	if b.used == len(b.imgs) {
		b.imgs = append(b.imgs, new(image.NRGBA))
	}
	img := b.imgs[b.used]
	b.used++
	if cap(img.Pix) < n {
		img.Pix = make([]byte, n)
	}
	img.Pix, img.Stride, img.Rect = img.Pix[:n], 4*w, image.Rect(0, 0, w, h)
	return img
}

// accum returns a zeroed accumulator of n values.
func (b *Buffers) accum(n int) []int32 {
	if b == nil {
		return make([]int32, n)
	}
	if cap(b.acc) < n {
		b.acc = make([]int32, n)
	}
	b.acc = b.acc[:n]
	clear(b.acc)
	return b.acc
}

// weights returns makeSpanTaps(dstSize, srcSize, sp), computed once per
// size pair and span. wide also lays them out for the SIMD horizontal pass
// (taps.wide) where it runs: only resampleH reads that layout, which costs
// about 4 times the weights' memory.
func (b *Buffers) weights(dstSize, srcSize int, sp span, wide bool) taps {
	wide = wide && usePath != scalarPath // the scalar passes share one layout
	k := tapsKey{dstSize, srcSize, sp, wide}
	if b != nil {
		if t, ok := b.taps[k]; ok {
			return t
		}
	}
	t := makeSpanTaps(dstSize, srcSize, sp)
	if wide {
		t.wide = widen(t, srcSize)
	}
	if b == nil {
		return t
	}
	if b.taps == nil || len(b.taps) >= maxTaps {
		b.taps = map[tapsKey]taps{}
	}
	b.taps[k] = t
	return t
}
