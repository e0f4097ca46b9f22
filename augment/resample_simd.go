//go:build goexperiment.simd && amd64

package augment

import "simd/archsimd"

// The resampler's inner loops in AVX-512 and AVX2 (resample_avx2.go),
// through Go's experimental simd/archsimd package (GOEXPERIMENT=simd; the
// Makefile and Dockerfile set it). They compute the integer sums of the
// scalar loops in resample.go, 16 or 8 int32 lanes at a time: integer
// sums are exact in any order, so the bytes are the same on every
// machine, whichever path runs (TestResampleSIMD). Each lane is one byte
// of an RGBA pixel; the alpha lanes sum 255 times weights that add up to
// 1<<weightBits, which rounds to the 255 the scalar loops write. The
// loops end with VZEROUPPER (ClearAVXUpperBits): the SSE code that runs
// after them, Go's and libjpeg's, pays for every instruction while the
// upper halves of the vector registers hold data.

// cpuPath is the fastest path this CPU runs.
var cpuPath = func() simdPath {
	switch {
	case cpuHas(avx512Path):
		return avx512Path
	case cpuHas(avx2Path):
		return avx2Path
	}
	return scalarPath
}()

// cpuHas reports whether this CPU runs the loops of path p.
func cpuHas(p simdPath) bool {
	switch p {
	case avx2Path:
		return archsimd.X86.AVX2()
	case avx512Path:
		return archsimd.X86.AVX512()
	}
	return true
}

// vRowSIMD computes the vertical pass for one output row with the loops
// of usePath: out[i] = fixed8(Σ ws[k]·pix[off+k·stride+i]), alpha
// included. It returns how many bytes it did (a multiple of 16);
// vRowTail does the rest.
func vRowSIMD(out, pix []byte, off, stride int, ws []int32) int {
	switch usePath {
	case avx512Path:
		return vRow512(out, pix, off, stride, ws)
	case avx2Path:
		return vRowAVX2(out, pix, off, stride, ws)
	}
	return 0
}

// hRowSIMD computes the horizontal pass for the destination columns x0
// to x1 of one row into out (which starts at column x0) with the loops of
// usePath. It returns how many columns it did (a multiple of 4); the
// scalar loop does the rest.
func hRowSIMD(out, row []byte, wt wideTaps, x0, x1 int) int {
	switch usePath {
	case avx512Path:
		return hRow512(out, row, wt, x0, x1)
	case avx2Path:
		return hRowAVX2(out, row, wt, x0, x1)
	}
	return 0
}

// fixed8x16 is fixed8 on 16 lanes.
func fixed8x16(acc archsimd.Int32x16) archsimd.Uint8x16 {
	v := acc.Add(archsimd.BroadcastInt32x16(1 << (weightBits - 1))).ShiftAllRight(weightBits)
	v = v.Max(archsimd.BroadcastInt32x16(0)).Min(archsimd.BroadcastInt32x16(255))
	return v.TruncateToInt8().AsUint8x16()
}

// vRow512 is vRowSIMD in AVX-512, 32 bytes at a time, then 16. The sums
// stay in registers: no accumulator row to clear, load and store for
// every tap. Two vectors a step share each tap's loop work and weight
// broadcast: the pass took 0.2 of the scalar loops' time, against 0.26
// one vector a step.
func vRow512(out, pix []byte, off, stride int, ws []int32) int {
	i := 0
	for ; i+32 <= len(out); i += 32 {
		var a0, a1 archsimd.Int32x16
		o := off + i
		for _, w := range ws {
			v := archsimd.LoadUint8x32Slice(pix[o:])
			wv := archsimd.BroadcastInt32x16(w)
			a0 = a0.Add(v.GetLo().ExtendToUint32().AsInt32x16().Mul(wv))
			a1 = a1.Add(v.GetHi().ExtendToUint32().AsInt32x16().Mul(wv))
			o += stride
		}
		fixed8x16(a0).StoreSlice(out[i:])
		fixed8x16(a1).StoreSlice(out[i+16:])
	}
	for ; i+16 <= len(out); i += 16 {
		var acc archsimd.Int32x16
		o := off + i
		for _, w := range ws {
			px := archsimd.LoadUint8x16Slice(pix[o:]).ExtendToUint32().AsInt32x16()
			acc = acc.Add(px.Mul(archsimd.BroadcastInt32x16(w)))
			o += stride
		}
		fixed8x16(acc).StoreSlice(out[i:])
	}
	archsimd.ClearAVXUpperBits()
	return i
}

// hRow512 is hRowSIMD in AVX-512, four columns at a time: each column's
// taps are multiplied four pixels a vector with the wide taps, the
// vector's four partial pixels are summed, and four columns are rounded
// and stored together. The four columns' taps run in one loop, as in
// hRowAVX2: with a loop of their own each, the loops' control
// outweighed their multiplies with the 5 to 12 taps of small photos'
// downscales (BenchmarkResizePhotos, AVX-512: see docs/PERFORMANCE.md).
func hRow512(out, row []byte, wt wideTaps, x0, x1 int) int {
	// Locals rather than wt's fields: copies of the struct in the loop
	// were made with SSE moves, which with the AVX-512 registers' upper
	// halves in use cost 6 times the whole pass.
	n, starts, ws := wt.n*4, wt.start[x0:x1], wt.w[x0*wt.n*4:x1*wt.n*4]
	x := 0
	for ; x+4 <= len(starts); x += 4 {
		s0, s1 := row[starts[x]*4:][:n], row[starts[x+1]*4:][:n]
		s2, s3 := row[starts[x+2]*4:][:n], row[starts[x+3]*4:][:n]
		w0, w1 := ws[x*n:][:n], ws[(x+1)*n:][:n]
		w2, w3 := ws[(x+2)*n:][:n], ws[(x+3)*n:][:n]
		var a, b, c, d archsimd.Int32x16
		k := 0
		for ; k+16 <= n; k += 16 {
			a = a.Add(mulPixels16(s0[k:k+16], w0[k:k+16]))
			b = b.Add(mulPixels16(s1[k:k+16], w1[k:k+16]))
			c = c.Add(mulPixels16(s2[k:k+16], w2[k:k+16]))
			d = d.Add(mulPixels16(s3[k:k+16], w3[k:k+16]))
		}
		a8, b8 := a.GetLo().Add(a.GetHi()), b.GetLo().Add(b.GetHi())
		c8, d8 := c.GetLo().Add(c.GetHi()), d.GetLo().Add(d.GetHi())
		if k < n { // the last two pixels (wideTaps), in half vectors
			a8, b8 = a8.Add(mulLast2(s0, w0)), b8.Add(mulLast2(s1, w1))
			c8, d8 = c8.Add(mulLast2(s2, w2)), d8.Add(mulLast2(s3, w3))
		}
		ab := a8.Select128FromPair(0, 2, b8).Add(a8.Select128FromPair(1, 3, b8))
		cd := c8.Select128FromPair(0, 2, d8).Add(c8.Select128FromPair(1, 3, d8))
		var v archsimd.Int32x16
		fixed8x16(v.SetLo(ab).SetHi(cd)).StoreSlice(out[x*4:])
	}
	archsimd.ClearAVXUpperBits()
	return x
}

// mulPixels16 returns the four RGBA pixels of src (16 bytes) weighted by
// ws (four weights a pixel), one lane a byte.
func mulPixels16(src []byte, ws []int32) archsimd.Int32x16 {
	return archsimd.LoadUint8x16Slice(src).ExtendToUint32().AsInt32x16().Mul(archsimd.LoadInt32x16Slice(ws))
}
