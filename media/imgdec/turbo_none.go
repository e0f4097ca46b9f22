//go:build !cgo

package imgdec

import (
	"errors"
	"image"
)

const turboBuiltIn = false

var errNoTurbo = errors.New("libjpeg-turbo is not built in")

func decodeTurbo(data []byte, cfg image.Config, minSide int, gap float64) (*image.NRGBA, int, string, error) {
	return nil, 8, "", errNoTurbo
}

func decodePNG(data []byte, cfg image.Config) (*image.NRGBA, error) {
	return nil, errNoTurbo
}

func decodeLibpng(data []byte, cfg image.Config) (*image.NRGBA, error) {
	return nil, errNoTurbo
}

// pngFast is prep_png_fast (libdeflate), which needs cgo.
func pngFast(data []byte, img *image.NRGBA) bool { return false }

// PNGSIMD: no SIMD unfiltering without cgo.
func PNGSIMD() bool { return false }

// usePNGSIMD: no SIMD unfiltering without cgo.
func usePNGSIMD(on bool) bool { return false }

// OwnEntropy reports whether this build decodes JPEG scans with prep's
// entropy decoders: never without cgo.
func OwnEntropy() (bool, string) { return false, "off (built without cgo)" }
