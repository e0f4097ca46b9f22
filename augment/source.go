package augment

import (
	"image"
	"math/rand/v2"
)

// Source describes an input image that a decoder shrank while decoding it
// (JPEG DCT scaling by M/8): the stored image, W×H pixels upright, lies in
// the region [X0, X0+DX) × [Y0, Y0+DY) of the decoded image's pixel grid.
// The region is fractional because libjpeg rounds scaled sizes up, so the
// last row and column of a scaled decode hold part of a pixel beyond the
// image (the first ones, after an EXIF flip). The zero Source means the
// image is the stored one.
//
// The recipe's first resize computes its output size from W×H and maps
// just the region, so a scaled decode gives the geometry of a full one.
//
// Opaque, independently of the rest, says that the decoder knows every
// pixel has alpha 255 (a JPEG, a PNG without alpha channel or tRNS), so
// the first resize or rrc skips its scan of the alpha bytes (opaque). It
// must never be set for an image with any other alpha: the resampler
// would give other bytes than imaging.Resize's, which handles
// transparency.
type Source struct {
	W, H           int
	X0, Y0, DX, DY float64
	Opaque         bool
}

// spans returns the spans of the x and y axes of a sw×sh image that s maps.
func (s Source) spans(sw, sh int) (x, y span) {
	if s.W <= 0 || s.H <= 0 {
		return span{0, float64(sw)}, span{0, float64(sh)}
	}
	return span{s.X0, s.DX}, span{s.Y0, s.DY}
}

// size is the size the geometry of a sw×sh image is computed from.
func (s Source) size(sw, sh int) (int, int) {
	if s.W <= 0 || s.H <= 0 {
		return sw, sh
	}
	return s.W, s.H
}

// flipped is the Source of img once flipped (vertical: top-bottom).
func (s Source) flipped(img *image.NRGBA, vertical bool) Source {
	if s.W <= 0 {
		return s
	}
	if vertical {
		s.Y0 = float64(img.Rect.Dy()) - s.Y0 - s.DY
	} else {
		s.X0 = float64(img.Rect.Dx()) - s.X0 - s.DX
	}
	return s
}

// ApplyScaled is ApplyBuffers for an image that a decoder delivered
// shrunk, as src describes: the result is, within resampling error, that
// of ApplyBuffers on the full-size image. Only ops that commute with
// scaling may come before the first resize (Recipe.MinSide is 0
// otherwise, and a decoder then has no reason to shrink).
func (r *Recipe) ApplyScaled(img *image.NRGBA, src Source, rng *rand.Rand, buf *Buffers) (*image.NRGBA, map[string]any) {
	return r.apply(img, src, rng, buf)
}
