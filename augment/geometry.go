package augment

import (
	"encoding/binary"
	"fmt"
	"image"
	"math"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/disintegration/imaging"
)

// filter is the resampling filter of every resize (see resample). Catmull-
// Rom is the bicubic kernel (a = -0.5) of PIL's BICUBIC, sharper than
// bilinear and, with a support of 2 against Lanczos's 3, about a third
// cheaper.
var filter = imaging.CatmullRom

// black is the fill of padding and of corners uncovered by rotation:
// zero color, opaque, as torchvision pads RGB images with 0.
var black = [4]uint8{0, 0, 0, 255}

// resize scales the shorter side to short (keeping the aspect ratio), or
// to exactly w x h, or (fit) inside w x h with black padding.
type resize struct {
	short int
	w, h  int
	fit   bool
}

func parseResize(val string) (op, error) {
	size, mode, hasMode := strings.Cut(val, ":")
	w, h, square, err := parseSize(size)
	if err != nil {
		return nil, badValue("resize", val, err.Error())
	}
	switch {
	case hasMode && mode != "fit":
		return nil, badValue("resize", val, "unknown mode "+mode+" (want fit)")
	case hasMode && square:
		return nil, badValue("resize", val, "fit needs WxH")
	case hasMode:
		return resize{w: w, h: h, fit: true}, nil
	case square:
		return resize{short: w}, nil
	}
	return resize{w: w, h: h}, nil
}

func (o resize) String() string {
	switch {
	case o.short > 0:
		return "resize=" + strconv.Itoa(o.short)
	case o.fit:
		return "resize=" + strconv.Itoa(o.w) + "x" + strconv.Itoa(o.h) + ":fit"
	}
	return "resize=" + strconv.Itoa(o.w) + "x" + strconv.Itoa(o.h)
}

func (o resize) applyImage(img *image.NRGBA, _ *rand.Rand) (*image.NRGBA, any) {
	return o.apply(img, nil), nil
}

// apply resizes img, resampling into memory of buf.
func (o resize) apply(img *image.NRGBA, buf *Buffers) *image.NRGBA {
	return o.applySource(img, Source{}, buf)
}

// applySource is apply for an image that src describes.
func (o resize) applySource(img *image.NRGBA, src Source, buf *Buffers) *image.NRGBA {
	sw, sh := img.Rect.Dx(), img.Rect.Dy()
	if sw <= 0 || sh <= 0 {
		return img
	}
	w, h := o.scaled(src.size(sw, sh))
	scaled := resizeTo(img, w, h, src, buf)
	if !o.fit {
		return scaled
	}
	x, y := (o.w-w)/2, (o.h-h)/2
	return cropPad(scaled, image.Rect(-x, -y, o.w-x, o.h-y), buf)
}

// scaled returns the size an sw x sh image is resampled to (for fit, the
// size of the image inside the padding). For the shorter side it is what
// torchvision's Resize(s) gives: the shorter side becomes s and the longer
// one s*long/short, truncated.
func (o resize) scaled(sw, sh int) (w, h int) {
	switch {
	case o.short > 0 && sw <= sh:
		return o.short, int(float64(o.short) * float64(sh) / float64(sw))
	case o.short > 0:
		return int(float64(o.short) * float64(sw) / float64(sh)), o.short
	case !o.fit:
		return o.w, o.h
	}
	// Scale by min(W/sw, H/sh): compare sw/sh with W/H in integers.
	if sw*o.h > o.w*sh {
		return o.w, max(1, int(math.Round(float64(o.w)*float64(sh)/float64(sw))))
	}
	return max(1, int(math.Round(float64(o.h)*float64(sw)/float64(sh)))), o.h
}

// resizeCrop applies a resize and the crop after it as one step,
// resampling only the pixels the crop keeps: the same bytes and draws as
// the two ops in turn, for about two thirds of the work on resize=256,
// crop=224.
func resizeCrop(rs resize, c crop, img *image.NRGBA, src Source, rng *rand.Rand, buf *Buffers) (*image.NRGBA, any) {
	sw, sh := img.Rect.Dx(), img.Rect.Dy()
	if rs.fit || sw <= 0 || sh <= 0 {
		return c.applyImage(rs.applySource(img, src, buf), rng)
	}
	w, h := rs.scaled(src.size(sw, sh))
	x, y, p := c.place(w, h, rng)
	win := image.Rect(x, y, x+c.w, y+c.h)
	if unchanged(img, w, h, src) || !win.In(image.Rect(0, 0, w, h)) {
		// Nothing to resample, or a window with padding.
		return cropPad(resizeTo(img, w, h, src, buf), win, buf), p
	}
	return resampleWindow(img, w, h, win, src, buf), p
}

// unchanged reports whether resizing img (as src describes it) to w x h
// leaves it as it is.
func unchanged(img *image.NRGBA, w, h int, src Source) bool {
	sw, sh := img.Rect.Dx(), img.Rect.Dy()
	spx, spy := src.spans(sw, sh)
	return w == sw && h == sh && spx == span{0, float64(sw)} && spy == span{0, float64(sh)}
}

// resizeTo resamples img to w x h, returning img itself when that leaves
// it as it is.
func resizeTo(img *image.NRGBA, w, h int, src Source, buf *Buffers) *image.NRGBA {
	if unchanged(img, w, h, src) {
		return img
	}
	return resampleWindow(img, w, h, image.Rect(0, 0, w, h), src, buf)
}

// crop cuts a w x h window, centered or (random) at a uniform position.
// Where the image is smaller than the window it is padded with black,
// centered, as torchvision's CenterCrop pads; this holds for random crops
// too (torchvision's RandomCrop would fail), so one small image cannot
// abort a conversion.
type crop struct {
	w, h   int
	random bool
}

func parseCrop(val string) (op, error) {
	size, mode, hasMode := strings.Cut(val, ":")
	w, h, _, err := parseSize(size)
	if err != nil {
		return nil, badValue("crop", val, err.Error())
	}
	if hasMode && mode != "random" {
		return nil, badValue("crop", val, "unknown mode "+mode+" (want random)")
	}
	return crop{w: w, h: h, random: hasMode}, nil
}

func (o crop) String() string {
	s := "crop=" + fmtSize(o.w, o.h)
	if o.random {
		s += ":random"
	}
	return s
}

func (o crop) applyImage(img *image.NRGBA, rng *rand.Rand) (*image.NRGBA, any) {
	x, y, p := o.place(img.Rect.Dx(), img.Rect.Dy(), rng)
	return cropPad(img, image.Rect(x, y, x+o.w, y+o.h), nil), p
}

// place returns the window's top-left corner in an sw x sh image and the
// params to report. A random crop draws the top offset, then the left one,
// as torchvision does, each only along a side where the image is at least
// as large as the crop; it reports [x, y, w, h] in input pixels, where a
// negative x or y is padding.
func (o crop) place(sw, sh int, rng *rand.Rand) (x, y int, params any) {
	if !o.random {
		return centerOffset(sw, o.w), centerOffset(sh, o.h), nil
	}
	y, x = randomOffset(rng, sh, o.h), randomOffset(rng, sw, o.w)
	return x, y, []int{x, y, o.w, o.h}
}

// centerOffset is torchvision's center_crop offset: round-half-even of
// (size-crop)/2, or minus the left padding (crop-size)//2.
func centerOffset(size, crop int) int {
	if size >= crop {
		return int(math.RoundToEven(float64(size-crop) / 2))
	}
	return -((crop - size) / 2)
}

func randomOffset(rng *rand.Rand, size, crop int) int {
	if size >= crop {
		return rng.IntN(size - crop + 1)
	}
	return centerOffset(size, crop)
}

// cropPad copies the window r, in coordinates relative to img's top-left
// corner, into a new image from buf (nil: allocated); parts outside img
// are black.
func cropPad(img *image.NRGBA, r image.Rectangle, buf *Buffers) *image.NRGBA {
	dst := buf.image(r.Dx(), r.Dy())
	in := r.Intersect(image.Rect(0, 0, img.Rect.Dx(), img.Rect.Dy()))
	if in != r {
		for i := 0; i < len(dst.Pix); i += 4 {
			copy(dst.Pix[i:i+4], black[:])
		}
	}
	if in.Empty() {
		return dst
	}
	n := in.Dx() * 4
	for y := in.Min.Y; y < in.Max.Y; y++ {
		s := img.PixOffset(img.Rect.Min.X+in.Min.X, img.Rect.Min.Y+y)
		d := dst.PixOffset(in.Min.X-r.Min.X, y-r.Min.Y)
		copy(dst.Pix[d:d+n], img.Pix[s:s+n])
	}
	return dst
}

// rrc is torchvision's RandomResizedCrop: a crop of random area (a
// fraction in scale of the image) and aspect ratio (log-uniform in ratio),
// resized to w x h.
type rrc struct {
	w, h             int
	scaleLo, scaleHi float64
	ratioLo, ratioHi float64
}

const (
	defScaleLo, defScaleHi = 0.08, 1.0
	defRatioLo, defRatioHi = 3.0 / 4, 4.0 / 3
)

func parseRRC(val string) (op, error) {
	parts := strings.Split(val, ":")
	w, h, _, err := parseSize(parts[0])
	if err != nil {
		return nil, badValue("rrc", val, err.Error())
	}
	o := rrc{w, h, defScaleLo, defScaleHi, defRatioLo, defRatioHi}
	for _, p := range parts[1:] {
		k, v, _ := strings.Cut(p, "=")
		lo, hi, err := parseRange(v)
		if err != nil {
			return nil, badValue("rrc", val, k+": want LO-HI: "+err.Error())
		}
		switch k {
		case "scale":
			if lo <= 0 || hi > 1 {
				return nil, badValue("rrc", val, "scale must lie in (0,1]")
			}
			o.scaleLo, o.scaleHi = lo, hi
		case "ratio":
			if lo <= 0 {
				return nil, badValue("rrc", val, "ratio must be positive")
			}
			o.ratioLo, o.ratioHi = lo, hi
		default:
			return nil, badValue("rrc", val, "unknown parameter "+k+" (want scale or ratio)")
		}
	}
	return o, nil
}

func (o rrc) String() string {
	s := "rrc=" + fmtSize(o.w, o.h)
	if o.scaleLo != defScaleLo || o.scaleHi != defScaleHi {
		s += ":scale=" + fmtNum(o.scaleLo) + "-" + fmtNum(o.scaleHi)
	}
	if o.ratioLo != defRatioLo || o.ratioHi != defRatioHi {
		s += ":ratio=" + fmtNum(o.ratioLo) + "-" + fmtNum(o.ratioHi)
	}
	return s
}

func (o rrc) applyImage(img *image.NRGBA, rng *rand.Rand) (*image.NRGBA, any) {
	return o.apply(img, false, rng, nil)
}

// apply is applyImage, resampling into memory of buf. knownOpaque says
// that every pixel of img has alpha 255 (Source.Opaque), which spares the
// resample its scan of the alpha bytes.
func (o rrc) apply(img *image.NRGBA, knownOpaque bool, rng *rand.Rand, buf *Buffers) (*image.NRGBA, any) {
	sw, sh := img.Rect.Dx(), img.Rect.Dy()
	if sw <= 0 || sh <= 0 {
		return img, nil
	}
	x, y, w, h := o.window(sw, sh, rng)
	win := image.Rect(x, y, x+w, y+h)
	if w == o.w && h == o.h {
		return cropPad(img, win, buf), []int{x, y, w, h}
	}
	sub := img.SubImage(win.Add(img.Rect.Min)).(*image.NRGBA)
	out := resampleWindow(sub, o.w, o.h, image.Rect(0, 0, o.w, o.h), Source{Opaque: knownOpaque}, buf)
	return out, []int{x, y, w, h}
}

// window is torchvision's RandomResizedCrop.get_params: up to 10 tries of
// (area, log-ratio, top, left), each drawn in that order, then a center
// crop of the whole image with its ratio clamped into range.
func (o rrc) window(width, height int, rng *rand.Rand) (x, y, w, h int) {
	area := float64(width * height)
	logLo, logHi := math.Log(o.ratioLo), math.Log(o.ratioHi)
	for range 10 {
		target := area * uniform(rng, o.scaleLo, o.scaleHi)
		ratio := math.Exp(uniform(rng, logLo, logHi))
		w := int(math.RoundToEven(math.Sqrt(target * ratio)))
		h := int(math.RoundToEven(math.Sqrt(target / ratio)))
		if 0 < w && w <= width && 0 < h && h <= height {
			y := rng.IntN(height - h + 1)
			x := rng.IntN(width - w + 1)
			return x, y, w, h
		}
	}
	w, h = width, height
	switch in := float64(width) / float64(height); {
	case in < o.ratioLo:
		h = int(math.RoundToEven(float64(w) / o.ratioLo))
	case in > o.ratioHi:
		w = int(math.RoundToEven(float64(h) * o.ratioHi))
	}
	return (width - w) / 2, (height - h) / 2, w, h
}

// flip mirrors the image left-right (or, vertical, top-bottom) with
// probability p. It always draws one number and reports whether it flipped.
type flip struct {
	p        float64
	vertical bool
}

func parseProb(name, val string) (float64, error) {
	p, err := parseNum(val)
	if err != nil || p < 0 || p > 1 {
		return 0, badValue(name, val, "probability must be in [0,1]")
	}
	return p, nil
}

func parseHFlip(val string) (op, error) {
	p, err := parseProb("hflip", val)
	return flip{p: p}, err
}

func parseVFlip(val string) (op, error) {
	p, err := parseProb("vflip", val)
	return flip{p: p, vertical: true}, err
}

func (o flip) String() string {
	if o.vertical {
		return "vflip=" + fmtNum(o.p)
	}
	return "hflip=" + fmtNum(o.p)
}

func (o flip) applyImage(img *image.NRGBA, rng *rand.Rand) (*image.NRGBA, any) {
	return o.flip(img, rng, nil)
}

// flip draws, and when taken mirrors img into memory of buf (nil: fresh
// memory), reporting whether it did.
func (o flip) flip(img *image.NRGBA, rng *rand.Rand, buf *Buffers) (*image.NRGBA, bool) {
	if rng.Float64() >= o.p {
		return img, false
	}
	return mirror(img, o.vertical, buf), true
}

// mirror returns img mirrored left-right (vertical: top-bottom), the bytes
// of imaging.FlipH and FlipV, in memory of buf, on the calling goroutine:
// imaging fans each call out over GOMAXPROCS goroutines and allocates its
// result, which BenchmarkFanOut measured to cost more than it gains inside
// a pipeline that keeps every core busy with its own image.
func mirror(img *image.NRGBA, vertical bool, buf *Buffers) *image.NRGBA {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	dst := buf.image(w, h)
	for y := range h {
		sy := y
		if vertical {
			sy = h - 1 - y
		}
		s := img.Pix[img.PixOffset(img.Rect.Min.X, img.Rect.Min.Y+sy):][:4*w]
		d := dst.Pix[y*dst.Stride:][:4*w]
		if vertical {
			copy(d, s)
			continue
		}
		// Two pixels a step: the 8 bytes of source pixels w-2-x and
		// w-1-x, their halves swapped, are destination pixels x and x+1
		// (a byte at a time this was 1.3% of a small-photo convert).
		// The slices shrink rather than being indexed: fewer bounds checks.
		for len(s) >= 8 && len(d) >= 8 {
			v := binary.LittleEndian.Uint64(s[len(s)-8:])
			binary.LittleEndian.PutUint64(d, bits.RotateLeft64(v, 32))
			s, d = s[:len(s)-8], d[8:]
		}
		copy(d, s) // an odd width's last pixel: the first
	}
	return dst
}

// rotate turns the image about its center by an angle uniform in
// [-deg, deg] degrees, counter-clockwise for positive angles as in
// torchvision, keeping its size and filling uncovered corners with black.
// It samples bilinearly like imaging.Rotate, but into a canvas of the
// input's size: imaging.Rotate enlarges the canvas, and cropping it back
// shifts the image by half a pixel whenever the sizes differ by an odd
// number.
type rotate struct {
	deg float64
}

func parseRotate(val string) (op, error) {
	d, err := parseNum(val)
	if err != nil || d < 0 || d > 180 {
		return nil, badValue("rotate", val, "degrees must be in [0,180]")
	}
	return rotate{d}, nil
}

func (o rotate) String() string { return "rotate=" + fmtNum(o.deg) }

func (o rotate) applyImage(img *image.NRGBA, rng *rand.Rand) (*image.NRGBA, any) {
	angle := uniform(rng, -o.deg, o.deg)
	return rotateSame(img, angle), angle
}

// rotateSame rotates img by angle degrees counter-clockwise about its
// center into an image of the same size.
func rotateSame(img *image.NRGBA, angle float64) *image.NRGBA {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	dst := image.NewNRGBA(image.Rect(0, 0, w, h))
	sin, cos := math.Sincos(math.Pi * angle / 180)
	cx, cy := float64(w)/2-0.5, float64(h)/2-0.5
	for y := 0; y < h; y++ {
		dy := float64(y) - cy
		for x := 0; x < w; x++ {
			dx := float64(x) - cx
			// The same mapping from destination to source as imaging.Rotate.
			sx, sy := dx*cos-dy*sin+cx, dx*sin+dy*cos+cy
			bilinear(dst.Pix[dst.PixOffset(x, y):][:4], img, sx, sy)
		}
	}
	return dst
}

// bilinear writes to d the color of img at (sx, sy), relative to its
// top-left corner, blending alpha-premultiplied samples; samples outside
// img count as black.
func bilinear(d []uint8, img *image.NRGBA, sx, sy float64) {
	x0, y0 := int(math.Floor(sx)), int(math.Floor(sy))
	w, h := img.Rect.Dx(), img.Rect.Dy()
	if x0 < -1 || y0 < -1 || x0 >= w || y0 >= h {
		copy(d, black[:])
		return
	}
	fx, fy := sx-float64(x0), sy-float64(y0)
	var r, g, b, a float64
	for i := range 4 {
		px, py := x0+i%2, y0+i/2
		wt := fx
		if i%2 == 0 {
			wt = 1 - fx
		}
		if i/2 == 0 {
			wt *= 1 - fy
		} else {
			wt *= fy
		}
		if wt == 0 {
			continue
		}
		c := black[:]
		if px >= 0 && py >= 0 && px < w && py < h {
			c = img.Pix[img.PixOffset(img.Rect.Min.X+px, img.Rect.Min.Y+py):][:4]
		}
		aw := float64(c[3]) * wt
		r += float64(c[0]) * aw
		g += float64(c[1]) * aw
		b += float64(c[2]) * aw
		a += aw
	}
	if a == 0 {
		d[0], d[1], d[2], d[3] = 0, 0, 0, 0
		return
	}
	d[0] = clip8(r / a)
	d[1] = clip8(g / a)
	d[2] = clip8(b / a)
	d[3] = clip8(a)
}

// clip8 rounds v to the nearest uint8, clamping to [0, 255].
func clip8(v float64) uint8 {
	switch {
	case v <= 0:
		return 0
	case v >= 255:
		return 255
	}
	return uint8(v + 0.5)
}

// OutputSize returns the size of the image that Apply makes of a w×h image
// (ApplyScaled: of the full-size image a Source describes), computed op by
// op without touching a pixel. Every size a recipe names is bounded when it
// is parsed (MaxSide), but resize=S scales the longer side with the shorter
// one, so an extreme aspect ratio (a 1×20000 strip, resize=256) would ask
// for an image of over a gigapixel: OutputSize refuses any step that makes
// a side longer than MaxSide, naming the op and the fix, so that a caller
// can skip the input before Apply allocates.
func (r *Recipe) OutputSize(w, h int) (int, int, error) {
	if r == nil {
		return w, h, nil
	}
	for _, o := range r.ops {
		switch o := o.(type) {
		case resize:
			sw, sh := w, h
			w, h = o.scaled(sw, sh)
			if w > MaxSide || h > MaxSide {
				return 0, 0, fmt.Errorf("%s would make this %d×%d image %d×%d (%s), over the %d-pixel side limit: crop it first (crop=WxH before the resize pads what it lacks) or use resize=WxH or resize=WxH:fit",
					o, sw, sh, w, h, pixels(w, h), MaxSide)
			}
			if o.fit {
				w, h = o.w, o.h
			}
		case crop:
			w, h = o.w, o.h
		case rrc:
			w, h = o.w, o.h
		}
	}
	return w, h, nil
}

// pixels formats the pixel count of a w×h image for a message.
func pixels(w, h int) string {
	n := float64(w) * float64(h)
	switch {
	case n >= 1e9:
		return strconv.FormatFloat(n/1e9, 'f', 1, 64) + " Gpx"
	case n >= 1e6:
		return strconv.FormatFloat(n/1e6, 'f', 1, 64) + " Mpx"
	}
	return strconv.FormatFloat(n, 'f', 0, 64) + " px"
}
