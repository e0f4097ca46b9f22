//go:build !(goexperiment.simd && amd64)

package convert

import "image"

var useRGBSIMD = false

func rgbSIMD(out []byte, img *image.NRGBA) int { return 0 }
