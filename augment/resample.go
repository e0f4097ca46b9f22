package augment

import (
	"encoding/binary"
	"image"
	"math"

	"github.com/disintegration/imaging"
)

// Resampling of opaque images in fixed point.
//
// resample computes what imaging.Resize computes with Catmull-Rom (the same
// weights, passes and rounding to 8 bits between the passes, results
// within 1 of imaging's), for two reasons. It can compute just a window of
// the output, which lets resize=256,crop=224 resample only the pixels the
// crop keeps. And it runs on the calling goroutine, where imaging fans out
// over GOMAXPROCS goroutines per call, which a pipeline that keeps every
// core busy with one image per worker does not need. Decoded photos are
// opaque, so it skips imaging's alpha weighting and uses integer weights
// as Pillow does; per core it runs at about imaging's speed. Images with
// any transparency go to imaging.Resize.

// simdPath names the loops the resampler runs: the scalar ones in this
// file or the SIMD ones of resample_simd.go (AVX-512) and
// resample_avx2.go. Integer sums are exact in any order, so every path
// gives the same bytes (TestResampleSIMD): the dataset does not depend on
// the CPU it was made on.
type simdPath uint8

const (
	scalarPath simdPath = iota
	avx2Path
	avx512Path
)

// simdPaths lists the paths, slowest first.
var simdPaths = []simdPath{scalarPath, avx2Path, avx512Path}

func (p simdPath) String() string {
	switch p {
	case avx2Path:
		return "AVX2"
	case avx512Path:
		return "AVX-512"
	}
	return "scalar"
}

// SIMD names the loops the resampler runs on this CPU: "AVX-512" or
// "AVX2" where the binary was built with GOEXPERIMENT=simd for amd64 and
// the CPU has them, else "scalar".
func SIMD() string { return cpuPath.String() }

// usePath selects the loops that run: cpuPath, the fastest this CPU has
// (resample_simd.go, resample_nosimd.go); tests set it to compare them.
// It is process-wide on purpose: every path writes the same bytes, so
// nothing a caller could choose changes a result, and threading a choice
// through every Apply would cost the hot path a parameter for tests'
// sake. Only tests write it, never while a resize runs.
var usePath = cpuPath

// weightBits is the fixed-point precision of the weights: with Catmull-Rom's
// small negative lobes, 255 times the sum of |weights| stays far below 2^31.
const weightBits = 22

// taps are the weights of one resampling pass: destination i reads n
// source pixels from start[i], weighted by w[i*n:(i+1)*n], which sum to
// exactly 1<<weightBits so that flat areas stay exact.
type taps struct {
	start []int
	n     int
	w     []int32

	// wide is the same weights for the SIMD horizontal pass, when it runs;
	// only taps made for that pass have them (Buffers.weights).
	wide wideTaps
}

// wideTaps are taps laid out for a SIMD horizontal pass over RGBA pixels
// (resample_simd.go): n is even and at least 4, start[i] ≤ srcSize-n, and
// every weight is repeated for the 4 bytes of its pixel, so destination i
// is the sum of the bytes from 4·start[i] times w[4·n·i:4·n·(i+1)], four
// pixels a vector and, when n is not a multiple of 4, two in the last.
// The extra taps weigh 0, so the sums do not change. (Padding to 4 made
// a fifth of the small bench photos' multiplies, and 3 in 8 of those
// with the most common count, 5, zeros.)
type wideTaps struct {
	start []int
	n     int
	w     []int32
}

// widen returns t laid out as wideTaps for a source of srcSize pixels,
// in reuse's memory where it is large enough; the zero wideTaps if the
// padded window does not fit in the source.
func widen(t taps, srcSize int, reuse wideTaps) wideTaps {
	n := max(4, (t.n+1)&^1)
	if n > srcSize {
		return wideTaps{}
	}
	dst := len(t.start)
	wt := wideTaps{start: grow(reuse.start, dst), n: n, w: grow(reuse.w, dst*n*4)}
	clear(wt.w)
	for i, s := range t.start {
		ws := wt.w[i*n*4 : (i+1)*n*4]
		p := min(s, srcSize-n)
		for k, w := range t.w[i*t.n : (i+1)*t.n] {
			u := s + k - p
			ws[4*u], ws[4*u+1], ws[4*u+2], ws[4*u+3] = w, w, w, w
		}
		wt.start[i] = p
	}
	return wt
}

// span is the part [off, off+size) of a source axis, in source pixels,
// that a resize maps onto the destination: the whole axis, or, for an
// image a decoder shrank by M/8 with its size rounded up (Source), the
// stored image without the fraction of a pixel beyond it. Mapping the
// whole rounded-up axis instead stretches the image by up to a pixel,
// which put the scaled decodes 5-15 dB further from the full decode.
type span struct{ off, size float64 }

// tapsScratch holds makeSpanTaps' temporaries from one call to the next.
type tapsScratch struct {
	full []int32
	ints []int
	fw   []float64
}

// grow returns s resliced to n elements if it has the room, else a new
// slice; the elements are not cleared.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// makeSpanTaps computes imaging's precomputeWeights for Catmull-Rom, in
// fixed point and padded to a common tap count, mapping the span sp of the
// source onto the destination, for destination pixels from to to-1 only
// (the window a crop keeps; index 0 of the result is from). Taps whose
// fixed-point weight is 0 are trimmed from both
// ends of every window before padding to the common count: imaging's
// window of 2·⌈scale·support⌉+1 pixels holds up to two pixels that weigh
// nothing (7 taps where Catmull-Rom reaches 5 pixels when shrinking by
// 1.04), and integer sums without them are the same. So are the sums of
// a window's pixels whatever the other pixels' tap counts: each pixel's
// weights are its own, and the padding weighs 0.
//
// scratch (nil: fresh memory) holds the temporaries and reuse's slices,
// where large enough, the result: on small photos computing the weights
// per image was 5% of a convert, fresh memory and pixels outside the crop
// included.
func makeSpanTaps(dstSize, srcSize int, sp span, from, to int, scratch *tapsScratch, reuse taps) taps {
	if scratch == nil {
		scratch = new(tapsScratch)
	}
	du := sp.size / float64(dstSize)
	scale := max(du, 1)
	ru := math.Ceil(scale * filter.Support)
	n0 := min(srcSize, 2*int(ru)+1)
	m := to - from
	scratch.full = grow(scratch.full, m*n0) // untrimmed windows, from start0
	scratch.ints = grow(scratch.ints, 3*m)
	scratch.fw = grow(scratch.fw, n0)
	full, fw := scratch.full, scratch.fw
	start0, lo, hi := scratch.ints[:m], scratch.ints[m:2*m], scratch.ints[2*m:] // lo, hi: nonzero taps, source indices
	n := 1
	for i := range m {
		v := from + i
		fu := sp.off + (float64(v)+0.5)*du - 0.5
		begin := max(0, int(math.Ceil(fu-ru)))
		end := min(srcSize-1, int(math.Floor(fu+ru)))
		// Keep the window inside the source; the extra taps weigh 0.
		start := min(begin, srcSize-n0)
		clear(fw)
		var sum float64
		for u := begin; u <= end; u++ {
			w := filter.Kernel((float64(u) - fu) / scale)
			fw[u-start] = w
			sum += w
		}
		ws := full[i*n0 : (i+1)*n0]
		var isum int32
		big := 0
		for k, w := range fw {
			if sum != 0 {
				w /= sum
			}
			ws[k] = int32(math.Round(w * (1 << weightBits)))
			isum += ws[k]
			if ws[k] > ws[big] {
				big = k
			}
		}
		ws[big] += 1<<weightBits - isum
		start0[i] = start
		a, b := 0, n0-1
		for a < b && ws[a] == 0 {
			a++
		}
		for b > a && ws[b] == 0 {
			b--
		}
		lo[i], hi[i] = start+a, start+b
		n = max(n, b-a+1)
	}
	t := taps{start: grow(reuse.start, m), n: n, w: grow(reuse.w, m*n)}
	clear(t.w)
	for i := range m {
		start := min(lo[i], srcSize-n)
		ws := t.w[i*n : (i+1)*n]
		for u := lo[i]; u <= hi[i]; u++ {
			ws[u-start] = full[i*n0+u-start0[i]]
		}
		t.start[i] = start
	}
	return t
}

// fixed8 rounds a fixed-point sum to 8 bits, clamping.
func fixed8(v int32) uint8 {
	v = (v + 1<<(weightBits-1)) >> weightBits
	return uint8(max(0, min(255, v)))
}

// opaque reports whether every pixel of img has alpha 255. It reads 8
// bytes (two pixels) at a time: a byte at a time it took 2% of a convert.
func opaque(img *image.NRGBA) bool {
	const alpha = 0xFF000000FF000000 // the alpha bytes of two pixels, little-endian
	w := img.Rect.Dx() * 4
	for y := img.Rect.Min.Y; y < img.Rect.Max.Y; y++ {
		row := img.Pix[img.PixOffset(img.Rect.Min.X, y):][:w]
		a := uint64(alpha)
		i := 0
		for ; i+32 <= len(row); i += 32 {
			a &= binary.LittleEndian.Uint64(row[i:]) & binary.LittleEndian.Uint64(row[i+8:]) &
				binary.LittleEndian.Uint64(row[i+16:]) & binary.LittleEndian.Uint64(row[i+24:])
		}
		for ; i+8 <= len(row); i += 8 {
			a &= binary.LittleEndian.Uint64(row[i:])
		}
		if a&alpha != alpha || (i < len(row) && row[i+3] != 255) {
			return false
		}
	}
	return true
}

// resample resizes img to w x h (both positive) with the Catmull-Rom
// filter, into memory of buf (nil: fresh memory).
func resample(img *image.NRGBA, w, h int, buf *Buffers) *image.NRGBA {
	return resampleWindow(img, w, h, image.Rect(0, 0, w, h), Source{}, buf)
}

// resampleWindow returns the window win (inside (0,0)-(w,h)) of img
// resized to w x h, computing only the pixels in the window: every output
// pixel depends on its own weights alone, so the bytes are those of the
// full resize, cropped.
//
// src, when set, says which part of img's pixel grid the resize maps
// (Source); the zero Source maps all of it. src.Opaque skips the scan for
// alpha.
func resampleWindow(img *image.NRGBA, w, h int, win image.Rectangle, src Source, buf *Buffers) *image.NRGBA {
	sw, sh := img.Rect.Dx(), img.Rect.Dy()
	spx, spy := src.spans(sw, sh)
	if !src.Opaque && !opaque(img) {
		out := imaging.Resize(img, w, h, filter)
		if win == out.Rect {
			return out
		}
		return cropPad(out, win, buf)
	}
	// The source rows the window's rows read.
	var tv taps
	rows := [2]int{win.Min.Y, win.Max.Y}
	sameW := sw == w && spx == span{0, float64(sw)}
	sameH := sh == h && spy == span{0, float64(sh)}
	if !sameH {
		tv = buf.weights(h, sh, spy, win.Min.Y, win.Max.Y, false)
		// Not just the first and last rows' windows: a window's start is
		// its first nonzero weight, and a weight that rounds to 0 can
		// move a start back past the next row's (a 126-row source
		// upscaled to 258 rows read past its window and panicked).
		rows = [2]int{tv.start[0], tv.start[0] + tv.n}
		for _, st := range tv.start {
			rows = [2]int{min(rows[0], st), max(rows[1], st+tv.n)}
		}
	}
	// Views rather than SubImage, so that they can stay on the stack.
	rs := view(img, image.Rect(0, rows[0], sw, rows[1]).Add(img.Rect.Min))
	if sameW {
		cols := view(&rs, image.Rect(win.Min.X, 0, win.Max.X, rs.Rect.Dy()).Add(rs.Rect.Min))
		if sameH {
			// No pass runs and cols is a view of the input: copy, so that
			// the result never aliases the input.
			return cropPad(&cols, image.Rect(0, 0, cols.Rect.Dx(), cols.Rect.Dy()), buf)
		}
		return resampleV(&cols, tv, rows[0], 0, win.Dy(), buf)
	}
	// The taps are the window's: their index 0 is its first column, row.
	wide := resampleH(&rs, buf.weights(w, sw, spx, win.Min.X, win.Max.X, true), 0, win.Dx(), buf)
	if sameH {
		return wide
	}
	return resampleV(wide, tv, rows[0], 0, win.Dy(), buf)
}

// view is img.SubImage(r) as a value.
func view(img *image.NRGBA, r image.Rectangle) image.NRGBA {
	r = r.Intersect(img.Rect)
	if r.Empty() {
		return image.NRGBA{}
	}
	return image.NRGBA{Pix: img.Pix[img.PixOffset(r.Min.X, r.Min.Y):], Stride: img.Stride, Rect: r}
}

// resampleH resizes the width of an opaque image with the taps t, for the
// destination columns x0 to x1.
func resampleH(img *image.NRGBA, t taps, x0, x1 int, buf *Buffers) *image.NRGBA {
	w, h, n := x1-x0, img.Rect.Dy(), t.n
	dst := buf.image(w, h)
	for y := range h {
		row := img.Pix[img.PixOffset(img.Rect.Min.X, img.Rect.Min.Y+y):][:img.Rect.Dx()*4]
		out := dst.Pix[y*dst.Stride:][:w*4]
		done := 0
		if usePath != scalarPath && t.wide.w != nil {
			done = hRowSIMD(out, row, t.wide, x0, x1)
		}
		for x := done; x < w; x++ {
			r, g, b := dot3(row[t.start[x0+x]*4:][:n*4], t.w[(x0+x)*n:][:n])
			d := out[x*4:][:4]
			d[0], d[1], d[2], d[3] = fixed8(r), fixed8(g), fixed8(b), 255
		}
	}
	return dst
}

// dot3 returns the weighted sums of the R, G and B bytes of the RGBA
// pixels in src. It is most of the cost of a resize, and a function of
// its own because inside resampleH's loops the compiler kept the sums on
// the stack (5% slower).
func dot3(src []byte, ws []int32) (r, g, b int32) {
	// Two taps a step.
	for len(ws) >= 2 && len(src) >= 8 {
		w0, w1 := ws[0], ws[1]
		r += w0*int32(src[0]) + w1*int32(src[4])
		g += w0*int32(src[1]) + w1*int32(src[5])
		b += w0*int32(src[2]) + w1*int32(src[6])
		ws, src = ws[2:], src[8:]
	}
	if len(ws) == 1 && len(src) >= 3 {
		r += ws[0] * int32(src[0])
		g += ws[0] * int32(src[1])
		b += ws[0] * int32(src[2])
	}
	return r, g, b
}

// resampleV resizes the height of an opaque image with the taps t, for the
// destination rows y0 to y1; img's first row is source row base. It works
// a row at a time so that every pass reads the source sequentially, and
// adds four source rows a pass over all four channels (alpha is computed
// and dropped): the plain loop over bytes, without per-pixel slicing, ran
// 1.5 times as fast as three channels a pixel. Integer sums are exact in
// any order, so the bytes do not change.
func resampleV(img *image.NRGBA, t taps, base, y0, y1 int, buf *Buffers) *image.NRGBA {
	w, h, n := img.Rect.Dx(), y1-y0, t.n
	dst := buf.image(w, h)
	var acc []int32
	if usePath == scalarPath {
		acc = buf.accum(w * 4)
	}
	row := func(y int) []byte {
		return img.Pix[img.PixOffset(img.Rect.Min.X, img.Rect.Min.Y+y-base):][:w*4]
	}
	for y := range h {
		ws, first := t.w[(y0+y)*n:][:n], t.start[y0+y]
		if usePath != scalarPath {
			out := dst.Pix[y*dst.Stride:][:w*4]
			off := img.PixOffset(img.Rect.Min.X, img.Rect.Min.Y+first-base)
			done := vRowSIMD(out, img.Pix, off, img.Stride, ws)
			vRowTail(out[done:], img.Pix, off+done, img.Stride, ws)
			continue
		}
		clear(acc)
		k := 0
		for ; k+3 < n; k += 4 {
			w0, w1, w2, w3 := ws[k], ws[k+1], ws[k+2], ws[k+3]
			r0, r1, r2, r3 := row(first+k), row(first+k+1), row(first+k+2), row(first+k+3)
			r1, r2, r3 = r1[:len(r0)], r2[:len(r0)], r3[:len(r0)]
			a := acc[:len(r0)]
			for i, v := range r0 {
				a[i] += w0*int32(v) + w1*int32(r1[i]) + w2*int32(r2[i]) + w3*int32(r3[i])
			}
		}
		for ; k < n; k++ {
			wk, r0 := ws[k], row(first+k)
			a := acc[:len(r0)]
			for i, v := range r0 {
				a[i] += wk * int32(v)
			}
		}
		out := dst.Pix[y*dst.Stride:][:w*4]
		for x := range w {
			a, d := acc[x*4:][:3], out[x*4:][:4]
			d[0], d[1], d[2], d[3] = fixed8(a[0]), fixed8(a[1]), fixed8(a[2]), 255
		}
	}
	return dst
}

// vRowTail is the vertical pass for the bytes of one output row that
// vRowSIMD leaves: out[i] gets the sum over k of ws[k] times
// pix[off+k·stride+i], off being a multiple of 4 (a pixel's R), and alpha
// 255.
func vRowTail(out, pix []byte, off, stride int, ws []int32) {
	for i := range out {
		if i%4 == 3 {
			out[i] = 255
			continue
		}
		var a int32
		for k, w := range ws {
			a += w * int32(pix[off+k*stride+i])
		}
		out[i] = fixed8(a)
	}
}
