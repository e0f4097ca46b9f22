//go:build !cgo

package imgdec

import (
	"bytes"
	"image"

	"golang.org/x/image/webp"
)

// webpDecoderName says which WebP decoder the build has (prep version):
// golang.org/x/image/webp upsamples lossy chroma its own way, so lossy
// WebPs differ from Pillow's by a few levels, and it reads no animations.
const webpDecoderName = "golang.org/x/image/webp: lossy pixels differ from Pillow's, no animations (built without cgo)"

func decodeWebP(data []byte, w, h int) (*image.NRGBA, bool, error) {
	m, err := webp.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, false, err
	}
	_, isYCbCr := m.(*image.YCbCr)
	return toNRGBA(m), isYCbCr, nil
}
