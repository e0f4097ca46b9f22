package convert

import (
	"context"
	"encoding/binary"
	"image"
	"math/rand/v2"
	"sync"

	"github.com/prep-dev/prep/augment"
	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/media/imgdec"
)

// ImageDecoder decodes one image file; minSide lets it decode smaller
// (JPEG DCT scaling) when the recipe will shrink the image anyway.
type ImageDecoder func(data []byte, minSide int) (*image.NRGBA, error)

// ScaledImageDecoder is an ImageDecoder that also says, when it decoded
// smaller, what full-size image the result stands for, so that the
// recipe's resize gives the geometry of the full image (augment.Source;
// the zero Source when not scaled).
type ScaledImageDecoder func(data []byte, minSide int) (*image.NRGBA, augment.Source, error)

// NewImageHandler decodes images and applies aug (nil: no augmentation).
// minSide is the recipe's hint for the decoder (0: full size). release,
// if not nil, takes back the decoded image once its pixels are copied, so
// the decoder can reuse memory it has already touched.
//
// The handler reuses memory too: an augment.Recipe resamples into
// per-worker buffers, and the tensors handed back through Recycle hold
// the next samples.
func NewImageHandler(decode ImageDecoder, release func(*image.NRGBA), aug ImageAugmenter, minSide int) Handler {
	return NewScaledImageHandler(func(data []byte, minSide int) (*image.NRGBA, augment.Source, error) {
		img, err := decode(data, minSide)
		return img, augment.Source{}, err
	}, release, aug, minSide)
}

// NewScaledImageHandler is NewImageHandler for a decoder that reports how
// it scaled: the recipe then resizes the scaled image as if it were the
// full one.
func NewScaledImageHandler(decode ScaledImageDecoder, release func(*image.NRGBA), aug ImageAugmenter, minSide int) Handler {
	h := &imageHandler{decode: decode, release: release, aug: aug, minSide: minSide}
	h.bufs.New = func() any { return new(augment.Buffers) }
	return h
}

// ImgdecDecoder decodes with imgdec, DCT-scaling JPEGs to minSide, and
// reports the scaled decodes' Source, and for every decode whether the
// format guarantees it opaque (Info.Opaque), which spares the resize its
// alpha scan.
func ImgdecDecoder(opt imgdec.Options) ScaledImageDecoder {
	return func(data []byte, minSide int) (*image.NRGBA, augment.Source, error) {
		o := opt
		o.MinSide = minSide
		img, info, err := imgdec.Decode(data, o)
		if err != nil || info.ScaleNum == 8 {
			return img, augment.Source{Opaque: info.Opaque}, err
		}
		w, h := info.Upright()
		x0, y0, dx, dy := info.Region()
		return img, augment.Source{W: w, H: h, X0: x0, Y0: y0, DX: dx, DY: dy, Opaque: info.Opaque}, nil
	}
}

// bufferedAugmenter is an ImageAugmenter that can resample into memory
// kept from earlier calls (augment.Recipe).
type bufferedAugmenter interface {
	ApplyScaled(img *image.NRGBA, src augment.Source, rng *rand.Rand, buf *augment.Buffers) (*image.NRGBA, map[string]any)
}

type imageHandler struct {
	decode  ScaledImageDecoder
	release func(*image.NRGBA)
	aug     ImageAugmenter
	minSide int

	bufs sync.Pool // *augment.Buffers, one per sample being augmented
	free bytePool  // tensor bytes handed back by Recycle
}

func (h *imageHandler) Samples(ctx context.Context, in *Input, copy int, rng *rand.Rand) ([]formats.Sample, error) {
	finish, err := h.Decode(ctx, in, copy)
	if err != nil {
		return nil, err
	}
	return finish(rng)
}

// Decode decodes in; finish augments the image and copies it into the
// sample's tensor (Stager).
func (h *imageHandler) Decode(_ context.Context, in *Input, _ int) (func(*rand.Rand) ([]formats.Sample, error), error) {
	img, src, err := h.decode(in.Data, h.minSide)
	if err != nil {
		return nil, err
	}
	if err := h.checkSize(img, src); err != nil {
		if h.release != nil {
			h.release(img)
		}
		return nil, err
	}
	return func(rng *rand.Rand) ([]formats.Sample, error) {
		return h.finish(img, src, in, rng), nil
	}, nil
}

// sizedAugmenter is an ImageAugmenter that can tell the size it makes of
// an image without making it, and refuse one it should not make
// (augment.Recipe).
type sizedAugmenter interface {
	OutputSize(w, h int) (int, int, error)
}

// checkSize refuses an image the recipe would blow up past its size limit
// (resize=S on a long, thin strip), before finish allocates it: the input
// is skipped like any bad one, with the recipe's reason.
func (h *imageHandler) checkSize(img *image.NRGBA, src augment.Source) error {
	w, ht := img.Rect.Dx(), img.Rect.Dy()
	if src.W > 0 && src.H > 0 { // a scaled decode: the recipe sizes from the full image
		w, ht = src.W, src.H
	}
	return checkOutputSize(h.aug, w, ht)
}

// checkOutputSize returns aug's refusal of a w×h input, when aug is a
// sizedAugmenter; nil otherwise (nil aug included).
func checkOutputSize(aug ImageAugmenter, w, h int) error {
	a, ok := aug.(sizedAugmenter)
	if !ok {
		return nil
	}
	_, _, err := a.OutputSize(w, h)
	return err
}

func (h *imageHandler) finish(img *image.NRGBA, src augment.Source, in *Input, rng *rand.Rand) []formats.Sample {
	// One allocation for the sample, its field and its shape.
	one := &struct {
		s     [1]formats.Sample
		f     [1]formats.Field
		shape [3]int
	}{}
	var t formats.Tensor
	var params map[string]any
	switch aug := h.aug.(type) {
	case nil:
		t = h.tensor(img, one.shape[:0])
	case bufferedAugmenter:
		buf := h.bufs.Get().(*augment.Buffers)
		var out *image.NRGBA
		out, params = aug.ApplyScaled(img, src, rng, buf)
		t = h.tensor(out, one.shape[:0]) // out may be buf's memory: copy it before buf goes back
		h.bufs.Put(buf)
	default:
		var out *image.NRGBA
		out, params = aug.Apply(img, rng)
		t = h.tensor(out, one.shape[:0])
	}
	if h.release != nil {
		h.release(img)
	}
	one.f[0] = formats.Field{Name: formats.DataField, Tensor: t}
	one.s[0] = formats.Sample{Key: in.Key, Source: in.Source, Label: in.Label, Fields: one.f[:], Params: params}
	return one.s[:]
}

// tensor copies img into an RGB tensor, reusing recycled bytes if any,
// with shape's memory for its shape.
func (h *imageHandler) tensor(img *image.NRGBA, shape []int) formats.Tensor {
	return rgbInto(h.free.get(img.Rect.Dx()*img.Rect.Dy()*3), img, shape)
}

// Recycle takes back the tensor bytes of samples this handler made, once
// the shard writer has copied them.
func (h *imageHandler) Recycle(samples []formats.Sample) { h.free.recycle(samples) }

// RGBTensor copies an image into an (H, W, 3) uint8 tensor, dropping alpha
// as PIL's convert("RGB") does.
func RGBTensor(img *image.NRGBA) formats.Tensor {
	return rgbInto(make([]byte, img.Rect.Dx()*img.Rect.Dy()*3), img, nil)
}

// rgbInto is RGBTensor into out, which holds exactly H×W×3 bytes, with
// shape's memory (nil: a new slice) for the shape.
func rgbInto(out []byte, img *image.NRGBA, shape []int) formats.Tensor {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	done := rgbSIMD(out, img) // the first pixels of every row, where the CPU can
	for y := 0; y < h; y++ {
		off := img.PixOffset(b.Min.X, b.Min.Y+y)
		row := img.Pix[off : off+4*w]
		dst := out[y*w*3 : (y+1)*w*3]
		// The rest a pixel's 4 bytes at a time, the alpha overwritten by
		// the next pixel's R.
		x := done
		for ; x+1 < w; x++ {
			binary.LittleEndian.PutUint32(dst[3*x:], binary.LittleEndian.Uint32(row[4*x:]))
		}
		if x < w {
			dst[3*x], dst[3*x+1], dst[3*x+2] = row[4*x], row[4*x+1], row[4*x+2]
		}
	}
	return formats.Tensor{DType: formats.Uint8, Shape: append(shape[:0], h, w, 3), Data: out}
}
