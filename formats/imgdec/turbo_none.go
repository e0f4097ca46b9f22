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
