//go:build goexperiment.simd && amd64

package augment

import "simd/archsimd"

// The resampler's loops in AVX2, for the CPUs without AVX-512 (many cloud
// VM types): the sums of resample_simd.go's AVX-512 loops, in 8 int32
// lanes a vector rather than 16. resample_simd.go picks the path.

// packBytes picks, in each 128-bit half, the low byte of every 16-bit
// lane into the half's first 8 bytes (VPSHUFB; -1 writes 0).
var packBytes = [32]int8{
	0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1,
	0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1,
}

// packDwords puts the 4-byte groups that packBytes leaves back in order
// (VPERMD): lanes 0-3 and 4-7 of the first vector, then of the second.
var packDwords = [8]uint32{0, 4, 1, 5, 2, 3, 6, 7}

// packer holds the index vectors of fixed8x8x2, loaded once a row.
type packer struct {
	bytes  archsimd.Int8x32
	dwords archsimd.Uint32x8
}

func newPacker() packer {
	return packer{archsimd.LoadInt8x32(&packBytes), archsimd.LoadUint32x8(&packDwords)}
}

// fixed8x8x2 is fixed8 on the 16 lanes of lo and hi, lo's 8 bytes first.
// AVX2 has no instruction that narrows int32 to bytes: VPACKUSDW narrows
// to uint16, clamping negatives to 0 (so only 255 is clamped here), and
// interleaves lo and hi by 128-bit half, which the two shuffles undo.
func (p packer) fixed8x8x2(lo, hi archsimd.Int32x8) archsimd.Uint8x16 {
	round, top := archsimd.BroadcastInt32x8(1<<(weightBits-1)), archsimd.BroadcastInt32x8(255)
	lo = lo.Add(round).ShiftAllRight(weightBits).Min(top)
	hi = hi.Add(round).ShiftAllRight(weightBits).Min(top)
	w := lo.SaturateToUint16ConcatGrouped(hi).AsUint8x32().PermuteOrZeroGrouped(p.bytes)
	return w.AsInt32x8().Permute(p.dwords).AsUint8x32().GetLo()
}

// widen8 zero-extends the 16 bytes of v to two vectors of int32, the low
// 8 bytes first.
func widen8(v archsimd.Uint8x16) (lo, hi archsimd.Int32x8) {
	lo = v.ExtendLo8ToUint32().AsInt32x8()
	hi = v.AsInt32x4().PermuteScalars(2, 3, 2, 3).AsUint8x16().ExtendLo8ToUint32().AsInt32x8()
	return lo, hi
}

// vRowAVX2 is vRowSIMD in AVX2, 32 bytes at a time, then 16, the sums in
// registers as in vRow512. Four vectors a step share each tap's loop work
// and weight broadcast: the pass took 0.22 of the scalar loops' time,
// against 0.3 two vectors a step.
func vRowAVX2(out, pix []byte, off, stride int, ws []int32) int {
	p := newPacker()
	i := 0
	for ; i+32 <= len(out); i += 32 {
		var a0, a1, a2, a3 archsimd.Int32x8
		o := off + i
		for _, w := range ws {
			v := archsimd.LoadUint8x32Slice(pix[o:])
			wv := archsimd.BroadcastInt32x8(w)
			b0, b1 := widen8(v.GetLo())
			b2, b3 := widen8(v.GetHi())
			a0, a1, a2, a3 = a0.Add(b0.Mul(wv)), a1.Add(b1.Mul(wv)), a2.Add(b2.Mul(wv)), a3.Add(b3.Mul(wv))
			o += stride
		}
		p.fixed8x8x2(a0, a1).StoreSlice(out[i:])
		p.fixed8x8x2(a2, a3).StoreSlice(out[i+16:])
	}
	for ; i+16 <= len(out); i += 16 {
		var lo, hi archsimd.Int32x8
		o := off + i
		for _, w := range ws {
			a, b := widen8(archsimd.LoadUint8x16Slice(pix[o:]))
			wv := archsimd.BroadcastInt32x8(w)
			lo, hi = lo.Add(a.Mul(wv)), hi.Add(b.Mul(wv))
			o += stride
		}
		p.fixed8x8x2(lo, hi).StoreSlice(out[i:])
	}
	archsimd.ClearAVXUpperBits()
	return i
}

// hRowAVX2 is hRowSIMD in AVX2, four columns at a time as in hRow512:
// each column's sums come as two partial pixels, which are added, and
// the four columns are rounded and stored together. The four columns'
// taps run in one loop, four pixels of each a step: with a loop of their
// own each, the loops' control and slice arithmetic outweighed
// their multiplies, with the 8 to 12 taps of the usual downscale.
func hRowAVX2(out, row []byte, wt wideTaps, x0, x1 int) int {
	// Locals rather than wt's fields, as in hRow512.
	n, starts, ws := wt.n*4, wt.start[x0:x1], wt.w[x0*wt.n*4:x1*wt.n*4]
	p := newPacker()
	x := 0
	for ; x+4 <= len(starts); x += 4 {
		s0, s1 := row[starts[x]*4:][:n], row[starts[x+1]*4:][:n]
		s2, s3 := row[starts[x+2]*4:][:n], row[starts[x+3]*4:][:n]
		w0, w1 := ws[x*n:][:n], ws[(x+1)*n:][:n]
		w2, w3 := ws[(x+2)*n:][:n], ws[(x+3)*n:][:n]
		var a, b, c, d archsimd.Int32x8
		k := 0
		for ; k+16 <= n; k += 16 {
			a = a.Add(mulPixels(s0[k:k+16], w0[k:k+16]))
			b = b.Add(mulPixels(s1[k:k+16], w1[k:k+16]))
			c = c.Add(mulPixels(s2[k:k+16], w2[k:k+16]))
			d = d.Add(mulPixels(s3[k:k+16], w3[k:k+16]))
		}
		if k < n { // the last two pixels (wideTaps)
			a = a.Add(mulLast2(s0, w0))
			b = b.Add(mulLast2(s1, w1))
			c = c.Add(mulLast2(s2, w2))
			d = d.Add(mulLast2(s3, w3))
		}
		ab := a.Select128FromPair(0, 2, b).Add(a.Select128FromPair(1, 3, b))
		cd := c.Select128FromPair(0, 2, d).Add(c.Select128FromPair(1, 3, d))
		p.fixed8x8x2(ab, cd).StoreSlice(out[x*4:])
	}
	archsimd.ClearAVXUpperBits()
	return x
}

// mulLast2 returns the last two RGBA pixels of src (at least 16 bytes)
// weighted by the last 8 weights of ws (four a pixel), one lane a byte:
// two pixels' worth of partial sums, as mulPixels gives. It loads the
// last 16 bytes and keeps their upper half, so as not to read past src.
func mulLast2(src []byte, ws []int32) archsimd.Int32x8 {
	_, hi := widen8(archsimd.LoadUint8x16Slice(src[len(src)-16:]))
	return hi.Mul(archsimd.LoadInt32x8Slice(ws[len(ws)-8:]))
}

// mulPixels returns the four RGBA pixels of src (16 bytes) weighted by ws
// (four weights a pixel), the first two pixels' products added to the
// last two's: two halves of four lanes, each one pixel's worth of partial
// sums.
func mulPixels(src []byte, ws []int32) archsimd.Int32x8 {
	lo, hi := widen8(archsimd.LoadUint8x16Slice(src))
	return lo.Mul(archsimd.LoadInt32x8Slice(ws)).Add(hi.Mul(archsimd.LoadInt32x8Slice(ws[8:])))
}
