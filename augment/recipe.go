package augment

import (
	"errors"
	"fmt"
	"image"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// op is one step of a recipe. Ops are comparable values, so two recipes
// parsed from the same text are == op by op.
type op interface {
	// String returns the op's canonical one-line form, "name=value".
	String() string
}

// imageOp transforms an image. It must not modify img; it returns the new
// image and the random values it drew (nil when it drew none).
type imageOp interface {
	op
	applyImage(img *image.NRGBA, rng *rand.Rand) (*image.NRGBA, any)
}

// audioOp transforms interleaved PCM in place and returns the random
// values it drew (nil when it drew none).
type audioOp interface {
	op
	applyAudio(pcm []float32, channels, rate int, rng *rand.Rand) any
}

// Recipe is an ordered list of ops. The zero Recipe (and a nil *Recipe)
// is the identity.
type Recipe struct {
	ops []op
}

// spec describes one op kind: how to parse its one-line value and how to
// turn the named parameters of a recipe file into that value, and, for
// prep help recipes and shell completion (Ops), what it does.
type spec struct {
	name   string
	syntax string // e.g. "hflip=P"
	parse  func(val string) (op, error)
	// params turns a file's named parameters into the one-line value.
	params func(p map[string]any) (string, error)

	audio   bool   // an audio op; an image op otherwise
	doc     string // what it does, with the ranges its parser accepts
	file    string // its named parameters in a recipe file
	example string // a one-line op that parses
}

// specs lists every op in the order the help text shows them. It is a
// function, not a variable, because the parse functions refer back to it
// for their error messages (a variable would be an initialization cycle).
func specs() []spec {
	return []spec{
		{name: "resize", syntax: "resize=S|WxH|WxH:fit", parse: parseResize, params: resizeParams,
			doc:  "S: shorter side to S, aspect kept; WxH: exactly W x H; WxH:fit: inside W x H, aspect kept, centered on black",
			file: "{size | width, height; fit}", example: "resize=256"},
		{name: "crop", syntax: "crop=S|WxH[:random]", parse: parseCrop, params: cropParams,
			doc:  "center crop, or at a uniform random position with :random; a crop larger than the image pads it with black",
			file: "{size | width, height; random}", example: "crop=224:random"},
		{name: "rrc", syntax: "rrc=S|WxH[:scale=LO-HI][:ratio=LO-HI]", parse: parseRRC, params: rrcParams,
			doc:  "random resized crop (torchvision's RandomResizedCrop): area scale in (0,1], default 0.08-1; aspect ratio > 0, default 0.75-1.333",
			file: "{size | width, height; scale; ratio}", example: "rrc=224:scale=0.2-1"},
		{name: "hflip", syntax: "hflip=P", parse: parseHFlip, params: probParams,
			doc: "mirror left-right with probability P", file: "{p}", example: "hflip=0.5"},
		{name: "vflip", syntax: "vflip=P", parse: parseVFlip, params: probParams,
			doc: "mirror top-bottom with probability P", file: "{p}", example: "vflip=0.5"},
		{name: "rotate", syntax: "rotate=DEG", parse: parseRotate, params: keyParams("degrees"),
			doc:  "rotate by a uniform angle in [-DEG, DEG], DEG in [0,180]; same size, black corners",
			file: "{degrees}", example: "rotate=15"},
		{name: "jitter", syntax: "jitter=B/C/S/H", parse: parseJitter, params: jitterParams,
			doc:  "color jitter (torchvision's ColorJitter): brightness, contrast, saturation >= 0, hue in [0,0.5]; missing values are 0",
			file: "{brightness, contrast, saturation, hue}", example: "jitter=0.4/0.4/0.4/0.1"},
		{name: "gray", syntax: "gray=P", parse: parseGray, params: probParams,
			doc: "grayscale (ITU-R 601-2 luma, still 3 channels) with probability P", file: "{p}", example: "gray=0.1"},
		{name: "blur", syntax: "blur=SIGMA|LO-HI", parse: parseBlur, params: keyParams("sigma"),
			doc:  "gaussian blur, sigma > 0 in pixels, fixed or uniform in LO-HI",
			file: "{sigma}", example: "blur=0.1-2"},
		{name: "gain", syntax: "gain=DB|LO-HI", parse: parseGain, params: keyParams("db"), audio: true,
			doc:  "gain in dB, fixed or uniform in LO-HI",
			file: "{db}", example: "gain=-6-6"},
		{name: "shift", syntax: "shift=SECONDS[:roll]", parse: parseShift, params: shiftParams, audio: true,
			doc:  "time shift uniform in [-SECONDS, SECONDS], SECONDS >= 0, in whole frames; zero-filled, or circular with :roll",
			file: "{seconds; roll}", example: "shift=0.1"},
		{name: "noise", syntax: "noise=SNR_DB|LO-HI", parse: parseNoise, params: keyParams("snr_db"), audio: true,
			doc:  "white gaussian noise at this SNR in dB relative to the signal's RMS, fixed or uniform in LO-HI",
			file: "{snr_db}", example: "noise=20-40"},
	}
}

// Op describes one recipe op, for help text and shell completion.
type Op struct {
	Name    string // "resize"
	Audio   bool   // an audio op; an image op otherwise
	Syntax  string // "resize=S|WxH|WxH:fit"
	Doc     string // what it does, with the ranges of its values
	File    string // its named parameters in a recipe file
	Example string // a one-line op that parses
}

// Ops lists every op Parse and ParseFile accept, in help order, from the table
// the parser looks names up in: help built from it cannot miss an op.
func Ops() []Op {
	all := specs()
	ops := make([]Op, len(all))
	for i, sp := range all {
		ops[i] = Op{Name: sp.name, Audio: sp.audio, Syntax: sp.syntax, Doc: sp.doc, File: sp.file, Example: sp.example}
	}
	return ops
}

func lookup(name string) (spec, bool) {
	for _, sp := range specs() {
		if sp.name == name {
			return sp, true
		}
	}
	return spec{}, false
}

// validOps is the help text listing every op with its syntax.
func validOps() string {
	all := specs()
	s := make([]string, len(all))
	for i, sp := range all {
		s[i] = sp.syntax
	}
	return strings.Join(s, ", ")
}

func unknownOp(name string) error {
	return fmt.Errorf("recipe: unknown op %q (valid: %s)", name, validOps())
}

// badValue is the error for a known op with a value it cannot use; it
// repeats the op's syntax so the message alone says what to write.
func badValue(name, val, why string) error {
	sp, _ := lookup(name)
	return fmt.Errorf("recipe: %s=%s: %s (syntax: %s)", name, val, why, sp.syntax)
}

// Parse parses the one-line form, comma-separated ops such as
// "resize=256,crop=224:random,hflip=0.5". The empty string is the identity.
func Parse(s string) (*Recipe, error) {
	r := &Recipe{}
	s = strings.TrimSpace(s)
	if s == "" {
		return r, nil
	}
	if strings.Contains(s, Separator) {
		return nil, fmt.Errorf("recipe %q: %q splits a recipe into the ops convert runs and the ops the reader runs each epoch, and this recipe takes one part only", s, Separator)
	}
	for _, item := range strings.Split(s, ",") {
		o, err := parseOp(strings.TrimSpace(item))
		if err != nil {
			return nil, err
		}
		r.ops = append(r.ops, o)
	}
	return r, nil
}

func parseOp(item string) (op, error) {
	if item == "" {
		return nil, fmt.Errorf("recipe: empty op (stray comma?) (valid: %s)", validOps())
	}
	name, val, ok := strings.Cut(item, "=")
	name = strings.TrimSpace(name)
	sp, known := lookup(name)
	if !known {
		return nil, unknownOp(name)
	}
	if !ok || strings.TrimSpace(val) == "" {
		return nil, fmt.Errorf("recipe: %s needs a value (syntax: %s)", name, sp.syntax)
	}
	return sp.parse(strings.TrimSpace(val))
}

// String returns the canonical one-line form; Parse(r.String()) returns
// an equal recipe.
func (r *Recipe) String() string {
	if r == nil {
		return ""
	}
	s := make([]string, len(r.ops))
	for i, o := range r.ops {
		s[i] = o.String()
	}
	return strings.Join(s, ",")
}

// Apply runs the image ops in recipe order and returns the result with
// every random value drawn, keyed by op name ("hflip", a repeated op gets
// "hflip.2", ...). It never modifies img; when no op changes the image
// (no image ops, a flip not taken, a resize to the same size) it may
// return img itself. Ops draw from rng in recipe order, so the same image and rng
// state give the same bytes.
func (r *Recipe) Apply(img *image.NRGBA, rng *rand.Rand) (*image.NRGBA, map[string]any) {
	return r.ApplyBuffers(img, rng, nil)
}

// ApplyBuffers is Apply, with the resampled images in memory of buf, which
// they share with the results of earlier calls with the same buf: the
// result is valid until the next call with buf, and img must not be one
// such result. A nil buf allocates, as Apply does. The bytes are those of
// Apply.
func (r *Recipe) ApplyBuffers(img *image.NRGBA, rng *rand.Rand, buf *Buffers) (*image.NRGBA, map[string]any) {
	return r.apply(img, Source{}, rng, buf)
}

// apply runs the image ops; src describes img until the first op that
// changes its geometry other than a flip.
func (r *Recipe) apply(img *image.NRGBA, src Source, rng *rand.Rand, buf *Buffers) (*image.NRGBA, map[string]any) {
	params := map[string]any{}
	if r == nil {
		return img, params
	}
	buf.reset()
	for i := 0; i < len(r.ops); i++ {
		o := r.ops[i]
		io, ok := o.(imageOp)
		if !ok {
			continue
		}
		var p any
		rs, isResize := o.(resize)
		if c, isCrop := r.opAt(i + 1).(crop); isResize && isCrop {
			// The most common recipe: resample only what the crop keeps.
			img, p = resizeCrop(rs, c, img, src, rng, buf)
			src = Source{}
			r.record(params, i+1, p)
			i++
			continue
		}
		switch o := o.(type) {
		case resize:
			img = o.applySource(img, src, buf)
		case flip:
			var flipped bool
			img, flipped = o.flip(img, rng, buf)
			if flipped {
				src = src.flipped(img, o.vertical)
			}
			p = flipped
		case rrc:
			img, p = o.apply(img, src.Opaque, rng, buf)
		default:
			img, p = io.applyImage(img, rng)
		}
		if !keepsGeometry(o) {
			src = Source{}
		}
		r.record(params, i, p)
	}
	return img, params
}

// keepsGeometry reports whether o keeps the image's size and pixel grid,
// up to a mirror: a Source still describes the image after it (flipped,
// for a flip, as apply does), and scaling commutes with it (MinSide).
func keepsGeometry(o op) bool {
	switch o.(type) {
	case flip, gray, jitter:
		return true
	}
	return false
}

// opAt returns the i'th op, or nil past the end.
func (r *Recipe) opAt(i int) op {
	if i < len(r.ops) {
		return r.ops[i]
	}
	return nil
}

// ApplyAudio runs the audio ops in recipe order, in place, on interleaved
// PCM in [-1, 1], and returns the random values drawn as Apply does.
// Every op clips its result to [-1, 1].
func (r *Recipe) ApplyAudio(pcm []float32, channels, rate int, rng *rand.Rand) map[string]any {
	params := map[string]any{}
	if r == nil || channels <= 0 {
		return params
	}
	for i, o := range r.ops {
		ao, ok := o.(audioOp)
		if !ok {
			continue
		}
		r.record(params, i, ao.applyAudio(pcm, channels, rate, rng))
	}
	return params
}

// record stores the values p drawn by op i under the op's name, numbering
// repeats ("hflip.2" for the second hflip). It counts names rather than
// keep a map of them, and names ops without formatting them, so that
// recording costs no allocation.
func (r *Recipe) record(params map[string]any, i int, p any) {
	if p == nil {
		return
	}
	name, n := opName(r.ops[i]), 1
	for _, o := range r.ops[:i] {
		if opName(o) == name {
			n++
		}
	}
	if n > 1 {
		name += "." + strconv.Itoa(n)
	}
	params[name] = p
}

// opName is the name in the op's String, "name=value".
func opName(o op) string {
	switch o := o.(type) {
	case resize:
		return "resize"
	case crop:
		return "crop"
	case rrc:
		return "rrc"
	case flip:
		if o.vertical {
			return "vflip"
		}
		return "hflip"
	case rotate:
		return "rotate"
	case jitter:
		return "jitter"
	case gray:
		return "gray"
	case blur:
		return "blur"
	case gain:
		return "gain"
	case shift:
		return "shift"
	case noise:
		return "noise"
	}
	name, _, _ := strings.Cut(o.String(), "=")
	return name
}

// MinSide returns the smallest shorter side, in pixels, that a decoder may
// deliver (by scaling in the DCT domain) without lowering the quality of
// the result, or 0 when the recipe needs the image at full resolution.
//
// Ops before the first geometric op that commute with scaling (flips,
// gray, jitter) are skipped. Then:
//   - resize=S needs a shorter side of at least S;
//   - resize=WxH and resize=WxH:fit need both sides at least W and H, which
//     a shorter side of max(W, H) guarantees in either orientation;
//   - anything else gives 0: crop, rrc and rotate work in input pixels
//     (rrc's crop may be 8% of the image, still to be upscaled), and blur's
//     sigma is in input pixels;
//   - a recipe with no image geometry gives 0, since it keeps the input size.
func (r *Recipe) MinSide() int {
	if r == nil {
		return 0
	}
	for _, o := range r.ops {
		if keepsGeometry(o) {
			continue
		}
		switch o := o.(type) {
		case resize:
			if o.short > 0 {
				return o.short
			}
			return max(o.w, o.h)
		case imageOp:
			return 0
		}
	}
	return 0
}

// CenterCropLead reports whether the recipe starts with resize=S and a
// centred crop=WxH that fits in S×S (the most common evaluation recipe),
// and returns S, W, H and the ops after them. A frame source that
// shrinks to a shorter side of S (truncating the longer, as resize does)
// and cuts the centred W×H window (offsets rounded half to even, as crop
// does) may then apply rest in place of the recipe: the two ops draw
// nothing and report nothing. ok is false when a later op is a resize or
// a crop too, whose reported names ("crop.2") would change.
func (r *Recipe) CenterCropLead() (short, w, h int, rest *Recipe, ok bool) {
	if r == nil || len(r.ops) < 2 {
		return 0, 0, 0, nil, false
	}
	rs, isResize := r.ops[0].(resize)
	c, isCrop := r.ops[1].(crop)
	if !isResize || !isCrop || rs.short <= 0 || c.random || c.w > rs.short || c.h > rs.short {
		return 0, 0, 0, nil, false
	}
	for _, o := range r.ops[2:] {
		if n := opName(o); n == "resize" || n == "crop" {
			return 0, 0, 0, nil, false
		}
	}
	return rs.short, c.w, c.h, &Recipe{ops: r.ops[2:]}, true
}

// HasImageOps reports whether the recipe has any image op.
func (r *Recipe) HasImageOps() bool {
	return r.has(func(o op) bool { _, ok := o.(imageOp); return ok })
}

// HasAudioOps reports whether the recipe has any audio op.
func (r *Recipe) HasAudioOps() bool {
	return r.has(func(o op) bool { _, ok := o.(audioOp); return ok })
}

func (r *Recipe) has(f func(op) bool) bool {
	if r == nil {
		return false
	}
	for _, o := range r.ops {
		if f(o) {
			return true
		}
	}
	return false
}

// ---- value parsing helpers ----

var errNotNumber = errors.New("not a number")

// parseNum parses a finite decimal number.
func parseNum(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, errNotNumber
	}
	return f, nil
}

// parseRange parses "X" (lo = hi = X) or "LO-HI"; either bound may be
// negative ("-6--3"). It requires lo <= hi.
func parseRange(s string) (lo, hi float64, err error) {
	sep := -1
	for i := 1; i < len(s); i++ {
		if s[i] == '-' && s[i-1] != 'e' && s[i-1] != 'E' && s[i-1] != '-' {
			sep = i
			break
		}
	}
	if sep < 0 {
		lo, err = parseNum(s)
		return lo, lo, err
	}
	if lo, err = parseNum(s[:sep]); err != nil {
		return 0, 0, err
	}
	if hi, err = parseNum(s[sep+1:]); err != nil {
		return 0, 0, err
	}
	if lo > hi {
		return 0, 0, fmt.Errorf("range %s: low end above high end", s)
	}
	return lo, hi, nil
}

// MaxSide bounds every output size a recipe names (resize, crop, rrc), so
// at most 2^28 pixels, 1 GiB as RGBA: far past any training sample, and
// small enough that a typo such as resize=99999999 is refused when the
// recipe is parsed instead of allocating tens of GB in every worker.
const MaxSide = 16384

// parseSize parses "S" (square) or "WxH", both positive and at most
// MaxSide.
func parseSize(s string) (w, h int, square bool, err error) {
	ws, hs, pair := strings.Cut(s, "x")
	if w, err = strconv.Atoi(ws); err != nil || w <= 0 {
		return 0, 0, false, fmt.Errorf("size %q: want a positive integer S or WxH", s)
	}
	h, square = w, true
	if pair {
		if h, err = strconv.Atoi(hs); err != nil || h <= 0 {
			return 0, 0, false, fmt.Errorf("size %q: want a positive integer S or WxH", s)
		}
		square = false
	}
	if w > MaxSide || h > MaxSide {
		return 0, 0, false, fmt.Errorf("size %q: over the limit of %d pixels a side", s, MaxSide)
	}
	return w, h, square, nil
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func fmtRange(lo, hi float64) string {
	if lo == hi {
		return fmtNum(lo)
	}
	return fmtNum(lo) + "-" + fmtNum(hi)
}

func fmtSize(w, h int) string {
	if w == h {
		return strconv.Itoa(w)
	}
	return strconv.Itoa(w) + "x" + strconv.Itoa(h)
}

// uniform draws one number uniform in [lo, hi). The conversion keeps the
// product rounded on its own: arm64's compiler would otherwise fuse it
// with the sum (FMA), and the drawn parameters, written into tar shards'
// JSON, would differ from amd64's in the last bit.
func uniform(rng *rand.Rand, lo, hi float64) float64 {
	return lo + float64((hi-lo)*rng.Float64())
}
