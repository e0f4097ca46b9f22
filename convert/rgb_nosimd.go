//go:build !(goexperiment.simd && amd64)

package convert

var useRGBSIMD = false

func rgbRowSIMD(dst, src []byte, w int) int { return 0 }
