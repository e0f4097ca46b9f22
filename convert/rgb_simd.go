//go:build goexperiment.simd && amd64

package convert

import "simd/archsimd"

// useRGBSIMD selects rgbRowSIMD where the CPU has AVX-512 VBMI (its byte
// permute); tests turn it off to compare.
var useRGBSIMD = archsimd.X86.AVX512VBMI()

// rgbIndices picks each pixel's R, G and B out of 16 RGBA pixels.
var rgbIndices = func() (idx [64]uint8) {
	for i := range 48 {
		idx[i] = uint8(4*(i/3) + i%3)
	}
	return idx
}()

// rgbRowSIMD copies RGB out of the first pixels of the RGBA row src into
// dst, 16 at a time, and returns how many it copied. (The copy was 5% of a
// convert's CPU; this runs it several times faster.)
func rgbRowSIMD(dst, src []byte, w int) int {
	if !useRGBSIMD || w < 16 {
		return 0
	}
	idx := archsimd.LoadUint8x64(&rgbIndices)
	x := 0
	for ; x+16 <= w; x += 16 {
		archsimd.LoadUint8x64Slice(src[4*x:]).Permute(idx).StoreSlicePart(dst[3*x : 3*x+48])
	}
	// SSE code after this loop (Go's, libjpeg's) would pay for the upper
	// halves of the vector registers.
	archsimd.ClearAVXUpperBits()
	return x
}
