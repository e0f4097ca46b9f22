package convert

import (
	"context"
	"image"
	"math/rand/v2"

	"github.com/prep-dev/prep/formats"
)

// ImageDecoder decodes one image file; minSide lets it decode smaller
// (JPEG DCT scaling) when the recipe will shrink the image anyway.
type ImageDecoder func(data []byte, minSide int) (*image.NRGBA, error)

// NewImageHandler decodes images and applies aug (nil: no augmentation).
// minSide is the recipe's hint for the decoder (0: full size). release,
// if not nil, takes back the decoded image once its pixels are copied, so
// the decoder can reuse memory it has already touched.
func NewImageHandler(decode ImageDecoder, release func(*image.NRGBA), aug ImageAugmenter, minSide int) Handler {
	return HandlerFunc(func(_ context.Context, in *Input, _ int, rng *rand.Rand) ([]formats.Sample, error) {
		img, err := decode(in.Data, minSide)
		if err != nil {
			return nil, err
		}
		out, params := img, map[string]any(nil)
		if aug != nil {
			out, params = aug.Apply(img, rng)
		}
		t := RGBTensor(out)
		if release != nil {
			release(img)
		}
		return []formats.Sample{{
			Key:    in.Key,
			Source: in.Source,
			Label:  in.Label,
			Fields: []formats.Field{{Name: formats.DataField, Tensor: t}},
			Params: params,
		}}, nil
	})
}

// RGBTensor copies an image into an (H, W, 3) uint8 tensor, dropping alpha
// as PIL's convert("RGB") does.
func RGBTensor(img *image.NRGBA) formats.Tensor {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	out := make([]byte, w*h*3)
	for y := 0; y < h; y++ {
		off := img.PixOffset(b.Min.X, b.Min.Y+y)
		row := img.Pix[off : off+4*w]
		dst := out[y*w*3 : (y+1)*w*3]
		for x, i := 0, 0; x < w; x, i = x+1, i+3 {
			dst[i], dst[i+1], dst[i+2] = row[4*x], row[4*x+1], row[4*x+2]
		}
	}
	return formats.Tensor{DType: formats.Uint8, Shape: []int{h, w, 3}, Data: out}
}
