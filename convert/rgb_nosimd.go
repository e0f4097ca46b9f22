//go:build !(goexperiment.simd && amd64)

package convert

import "image"

// Without GOEXPERIMENT=simd, or on another architecture than amd64
// (arm64 included), pixels are copied into RGB samples by rgbInto's
// scalar loop only.

const cpuRGB = rgbScalar

// cpuHasRGB reports whether this build and CPU run the loop of path p.
func cpuHasRGB(p rgbPath) bool { return p == rgbScalar }

func rgbSIMD(out []byte, img *image.NRGBA) int { return 0 }
