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
	// taps are the weights computed, most recently used first; their
	// memory is reused for new ones once maxTaps are kept.
	taps    []cachedTaps
	scratch tapsScratch
}

// tapsKey names a set of weights: destination and source size, the span
// of the source mapped, the destination window [from, to) they are for,
// and whether they carry the SIMD layout.
type tapsKey struct {
	dst, src int
	sp       span
	from, to int
	wide     bool
}

type cachedTaps struct {
	key tapsKey
	t   taps
}

// maxTaps bounds the weights kept: datasets of one size (or a few) hit
// them every time; for photos of many sizes they are computed per image,
// and keeping more only held memory (64 sets kept 10 MB a worker, a
// fifth of a small-photo run's heap). It must be at least 2: a resize
// uses two sets at once, and the second must not reuse the first's
// memory (the one used last is never the one reused).
const maxTaps = 8

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

// weights returns makeSpanTaps(dstSize, srcSize, sp, from, to): the
// weights of destination pixels from to to-1 (index 0 is from), computed
// once per size pair, span and window. wide also lays them out for the
// SIMD horizontal pass (taps.wide) where it runs: only resampleH reads
// that layout, which costs about 4 times the weights' memory.
func (b *Buffers) weights(dstSize, srcSize int, sp span, from, to int, wide bool) taps {
	wide = wide && usePath != scalarPath // the scalar passes share one layout
	k := tapsKey{dstSize, srcSize, sp, from, to, wide}
	if b == nil {
		t := makeSpanTaps(dstSize, srcSize, sp, from, to, nil, taps{})
		if wide {
			t.wide = widen(t, srcSize, wideTaps{})
		}
		return t
	}
	for i, c := range b.taps {
		if c.key == k {
			copy(b.taps[1:i+1], b.taps[:i]) // most recent first
			b.taps[0] = c
			return c.t
		}
	}
	var reuse taps // the least recently used set's memory
	if len(b.taps) < maxTaps {
		b.taps = append(b.taps, cachedTaps{})
	} else {
		reuse = b.taps[len(b.taps)-1].t
	}
	copy(b.taps[1:], b.taps[:len(b.taps)-1])
	t := makeSpanTaps(dstSize, srcSize, sp, from, to, &b.scratch, reuse)
	if wide {
		t.wide = widen(t, srcSize, reuse.wide)
	}
	b.taps[0] = cachedTaps{k, t}
	return t
}
