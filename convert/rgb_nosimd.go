//go:build !(goexperiment.simd && amd64)

package convert

import "image"

var useRGBSIMD = false

// RGBSIMD reports whether the copy of pixels into RGB samples runs its
// AVX-512 VBMI loop.
func RGBSIMD() bool { return useRGBSIMD }

func rgbSIMD(out []byte, img *image.NRGBA) int { return 0 }
