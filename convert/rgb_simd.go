//go:build goexperiment.simd && amd64

package convert

import (
	"image"
	"simd/archsimd"
)

// The copy of pixels into RGB samples in AVX-512 VBMI (a byte permute
// across the whole vector) or AVX2 (byte shuffles within 128-bit halves,
// then a 32-bit permute), through Go's experimental simd/archsimd package
// (GOEXPERIMENT=simd). The copy was 5% of a convert's CPU; either loop
// runs it several times faster (BenchmarkRGBTensor).

// cpuRGB is the fastest path this CPU runs.
var cpuRGB = func() rgbPath {
	switch {
	case cpuHasRGB(rgbVBMI):
		return rgbVBMI
	case cpuHasRGB(rgbAVX2):
		return rgbAVX2
	}
	return rgbScalar
}()

// cpuHasRGB reports whether this CPU runs the loop of path p.
func cpuHasRGB(p rgbPath) bool {
	switch p {
	case rgbAVX2:
		return archsimd.X86.AVX2()
	case rgbVBMI:
		// AVX512VBMI alone stays true under GODEBUG=cpu.avx512f=off,
		// which turns AVX-512 off.
		return archsimd.X86.AVX512() && archsimd.X86.AVX512VBMI()
	}
	return true
}

// rgbSIMD copies the RGB of each row's first pixels from img into out (as
// rgbInto lays it out) with the loop of useRGB, and returns how many
// pixels of each row it copied.
func rgbSIMD(out []byte, img *image.NRGBA) int {
	switch useRGB {
	case rgbVBMI:
		return rgbVBMICopy(out, img)
	case rgbAVX2:
		return rgbAVX2Copy(out, img)
	}
	return 0
}

// rgbIndices picks each pixel's R, G and B out of 16 RGBA pixels.
var rgbIndices = func() (idx [64]uint8) {
	for i := range 48 {
		idx[i] = uint8(4*(i/3) + i%3)
	}
	return idx
}()

// rgbVBMICopy is rgbSIMD in AVX-512 VBMI, 16 pixels at a time.
func rgbVBMICopy(out []byte, img *image.NRGBA) int {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	if w < 16 {
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

// rgbShuffle packs, in each 128-bit half of 4 RGBA pixels, their 12 RGB
// bytes first (VPSHUFB; -1 writes 0).
var rgbShuffle = [32]int8{
	0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1,
	0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1,
}

// rgbJoin moves the second half's 12 bytes next to the first's (VPERMD).
var rgbJoin = [8]uint32{0, 1, 2, 4, 5, 6, 3, 7}

// rgbAVX2Copy is rgbSIMD in AVX2, 8 pixels at a time: 24 bytes of each
// 32-byte vector are RGB. A whole vector is stored where out has room for
// it, the 8 bytes past the pixels being written over later (by the next
// store, the scalar loop for the row's last pixels, or the next row),
// since a partial store takes two.
func rgbAVX2Copy(out []byte, img *image.NRGBA) int {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	if w < 8 {
		return 0
	}
	shuffle, join := archsimd.LoadInt8x32(&rgbShuffle), archsimd.LoadUint32x8(&rgbJoin)
	n := w &^ 7
	for y := range h {
		src := img.Pix[img.PixOffset(img.Rect.Min.X, img.Rect.Min.Y+y):]
		dst := out[y*w*3:]
		for x := 0; x < n; x += 8 {
			v := archsimd.LoadUint8x32Slice(src[4*x:]).PermuteOrZeroGrouped(shuffle)
			v = v.AsInt32x8().Permute(join).AsUint8x32()
			if d := dst[3*x:]; len(d) >= 32 {
				v.StoreSlice(d)
			} else {
				v.StoreSlicePart(d[:24])
			}
		}
	}
	archsimd.ClearAVXUpperBits()
	return n
}
