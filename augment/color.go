package augment

import (
	"image"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/disintegration/imaging"
)

// jitter is torchvision's ColorJitter: brightness, contrast and saturation
// factors uniform in [max(0, 1-x), 1+x], a hue shift uniform in [-h, h]
// (in turns, h <= 0.5), applied in a random order. A zero component is
// off: it draws nothing and is skipped.
//
// Brightness, contrast and saturation blend exactly as PIL's ImageEnhance
// does (float32 arithmetic, truncation), so results match Pillow byte for
// byte; contrast blends towards the mean luma rounded to an integer, and
// saturation towards each pixel's luma. Hue goes through floating-point
// HSV as torchvision's tensor path does, rounded back to 8 bits.
type jitter struct {
	b, c, s, h float64
}

var jitterNames = [4]string{"brightness", "contrast", "saturation", "hue"}

func parseJitter(val string) (op, error) {
	fields := strings.Split(val, "/")
	if len(fields) > 4 {
		return nil, badValue("jitter", val, "at most 4 values B/C/S/H")
	}
	var v [4]float64
	for i, f := range fields {
		x, err := parseNum(f)
		if err != nil || x < 0 {
			return nil, badValue("jitter", val, jitterNames[i]+" must be a number >= 0")
		}
		v[i] = x
	}
	if v[3] > 0.5 {
		return nil, badValue("jitter", val, "hue must be in [0,0.5]")
	}
	return jitter{v[0], v[1], v[2], v[3]}, nil
}

func (o jitter) String() string {
	return "jitter=" + fmtNum(o.b) + "/" + fmtNum(o.c) + "/" + fmtNum(o.s) + "/" + fmtNum(o.h)
}

// applyImage draws as torchvision's get_params: the permutation of the
// four adjustments first, then the factors of the enabled ones in the
// order brightness, contrast, saturation, hue.
func (o jitter) applyImage(img *image.NRGBA, rng *rand.Rand) (*image.NRGBA, any) {
	order := rng.Perm(4)
	amount := [4]float64{o.b, o.c, o.s, o.h}
	var factor [4]float64
	params := map[string]any{}
	for i, x := range amount {
		if x == 0 {
			continue
		}
		if i == 3 {
			factor[i] = uniform(rng, -x, x)
		} else {
			factor[i] = uniform(rng, max(0, 1-x), 1+x)
		}
		params[jitterNames[i]] = factor[i]
	}
	out := cropPad(img, image.Rect(0, 0, img.Rect.Dx(), img.Rect.Dy()), nil)
	applied := []string{}
	for _, i := range order {
		if amount[i] == 0 {
			continue
		}
		applied = append(applied, jitterNames[i])
		switch i {
		case 0:
			brightness(out, factor[i])
		case 1:
			contrast(out, factor[i])
		case 2:
			saturation(out, factor[i])
		case 3:
			hue(out, factor[i])
		}
	}
	params["order"] = applied
	return out, params
}

// blend is PIL's ImagingBlend for one 8-bit value: from + f*(to-from) in
// float32, clipped, truncated. The explicit float32 conversion keeps the
// compiler from fusing the multiply and add, which would change results.
func blend(from, to uint8, f float32) uint8 {
	t := float32(from) + float32(f*float32(int(to)-int(from)))
	switch {
	case t <= 0:
		return 0
	case t >= 255:
		return 255
	}
	return uint8(t)
}

// luma is PIL's ITU-R 601-2 conversion to L, in its fixed-point form.
func luma(r, g, b uint8) uint8 {
	return uint8((uint32(r)*19595 + uint32(g)*38470 + uint32(b)*7471 + 0x8000) >> 16)
}

// blendLUT applies a blend towards a constant through a lookup table.
func blendLUT(img *image.NRGBA, from uint8, f float64) {
	var lut [256]uint8
	for v := range lut {
		lut[v] = blend(from, uint8(v), float32(f))
	}
	p := img.Pix
	for i := 0; i < len(p); i += 4 {
		p[i], p[i+1], p[i+2] = lut[p[i]], lut[p[i+1]], lut[p[i+2]]
	}
}

// brightness is ImageEnhance.Brightness: a blend with black.
func brightness(img *image.NRGBA, f float64) { blendLUT(img, 0, f) }

// contrast is ImageEnhance.Contrast: a blend with the mean luma.
func contrast(img *image.NRGBA, f float64) {
	p := img.Pix
	var sum uint64
	for i := 0; i < len(p); i += 4 {
		sum += uint64(luma(p[i], p[i+1], p[i+2]))
	}
	n := len(p) / 4
	if n == 0 {
		return
	}
	blendLUT(img, uint8(float64(sum)/float64(n)+0.5), f)
}

// saturation is ImageEnhance.Color: a blend with the pixel's own luma.
func saturation(img *image.NRGBA, f float64) {
	p, f32 := img.Pix, float32(f)
	for i := 0; i < len(p); i += 4 {
		l := luma(p[i], p[i+1], p[i+2])
		p[i], p[i+1], p[i+2] = blend(l, p[i], f32), blend(l, p[i+1], f32), blend(l, p[i+2], f32)
	}
}

// hue rotates every pixel's hue by shift turns.
func hue(img *image.NRGBA, shift float64) {
	p := img.Pix
	for i := 0; i < len(p); i += 4 {
		r, g, b := float64(p[i])/255, float64(p[i+1])/255, float64(p[i+2])/255
		h, s, v := rgbToHSV(r, g, b)
		// h + shift lies in [-0.5, 1.5): wrap it into [0, 1) without the
		// cost of math.Mod.
		h += shift
		if h < 0 {
			h++
		} else if h >= 1 {
			h--
		}
		r, g, b = hsvToRGB(h, s, v)
		p[i], p[i+1], p[i+2] = clip8(r*255), clip8(g*255), clip8(b*255)
	}
}

// rgbToHSV follows torchvision's _rgb2hsv; h is in turns, [0, 1).
func rgbToHSV(r, g, b float64) (h, s, v float64) {
	maxc := max(r, g, b)
	minc := min(r, g, b)
	if maxc == minc {
		return 0, 0, maxc
	}
	cr := maxc - minc
	s = cr / maxc
	rc, gc, bc := (maxc-r)/cr, (maxc-g)/cr, (maxc-b)/cr
	switch {
	case maxc == r:
		h = bc - gc
	case maxc == g:
		h = 2 + rc - bc
	default:
		h = 4 + gc - rc
	}
	if h < 0 {
		h += 6
	}
	return h / 6, s, maxc
}

// hsvToRGB follows torchvision's _hsv2rgb.
func hsvToRGB(h, s, v float64) (r, g, b float64) {
	i := math.Floor(h * 6)
	f := h*6 - i
	p := v * (1 - s)
	q := v * (1 - s*f)
	t := v * (1 - s*(1-f))
	switch int(i) % 6 {
	case 0:
		return v, t, p
	case 1:
		return q, v, p
	case 2:
		return p, v, t
	case 3:
		return p, q, v
	case 4:
		return t, p, v
	}
	return v, p, q
}

// gray is torchvision's RandomGrayscale: with probability p the image
// becomes its ITU-R 601-2 luma (PIL's convert("L")), still in three equal
// channels. It always draws one number and reports whether it converted.
type gray struct {
	p float64
}

func parseGray(val string) (op, error) {
	p, err := parseProb("gray", val)
	return gray{p}, err
}

func (o gray) String() string { return "gray=" + fmtNum(o.p) }

func (o gray) applyImage(img *image.NRGBA, rng *rand.Rand) (*image.NRGBA, any) {
	if rng.Float64() >= o.p {
		return img, false
	}
	out := cropPad(img, image.Rect(0, 0, img.Rect.Dx(), img.Rect.Dy()), nil)
	p := out.Pix
	for i := 0; i < len(p); i += 4 {
		l := luma(p[i], p[i+1], p[i+2])
		p[i], p[i+1], p[i+2] = l, l, l
	}
	return out, true
}

// blur is a gaussian blur (imaging.Blur: kernel radius ceil(3 sigma),
// weights renormalized at the edges) with sigma fixed or uniform in
// [lo, hi], like torchvision's GaussianBlur(sigma=(lo, hi)) but with the
// kernel sized from sigma rather than given.
type blur struct {
	lo, hi float64
}

func parseBlur(val string) (op, error) {
	lo, hi, err := parseRange(val)
	if err != nil || lo <= 0 {
		return nil, badValue("blur", val, "sigma must be a number > 0 or a range LO-HI")
	}
	return blur{lo, hi}, nil
}

func (o blur) String() string { return "blur=" + fmtRange(o.lo, o.hi) }

// applyImage draws sigma only when it is a range, and reports it then.
func (o blur) applyImage(img *image.NRGBA, rng *rand.Rand) (*image.NRGBA, any) {
	if o.lo == o.hi {
		return imaging.Blur(img, o.lo), nil
	}
	sigma := uniform(rng, o.lo, o.hi)
	return imaging.Blur(img, sigma), sigma
}
