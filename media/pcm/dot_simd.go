//go:build goexperiment.simd && amd64

package pcm

import "simd/archsimd"

// dot in AVX2, through Go's experimental simd/archsimd package
// (GOEXPERIMENT=simd): the resampler's dot products were a sixth of the
// CPU of converting Ogg Vorbis clips to 16 kHz. The eight lanes are dot's
// eight sums, each product rounded to float32 before it is added (a
// multiply and an add, never fused), and the lanes are added in dot's
// order, so both give the same bits, and the same NaN (canonNaN)
// (TestDotSIMD).

// cpuDot is the fastest path this CPU runs.
var cpuDot = func() dotPath {
	if archsimd.X86.AVX2() {
		return dotAVX2
	}
	return dotScalar
}()

// cpuHasDot reports whether this CPU runs the loop of path p.
func cpuHasDot(p dotPath) bool {
	return p == dotScalar || p == dotAVX2 && archsimd.X86.AVX2()
}

func dot(taps, x []float32) float32 {
	if useDot == dotAVX2 {
		return dot8(taps, x)
	}
	return dotScalar8(taps, x)
}

// dot8 is dotScalar8 eight lanes at a time.
func dot8(taps, x []float32) float32 {
	x = x[:len(taps)]
	var acc archsimd.Float32x8
	for j := 0; j+8 <= len(taps); j += 8 {
		acc = acc.Add(archsimd.LoadFloat32x8Slice(taps[j : j+8]).Mul(archsimd.LoadFloat32x8Slice(x[j : j+8])))
	}
	var a [8]float32
	acc.Store(&a)
	archsimd.ClearAVXUpperBits()
	return canonNaN(((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7])))
}
