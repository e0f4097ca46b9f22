package augment

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"testing"

	"github.com/disintegration/imaging"
)

func uniformImage(w, h int, c color.NRGBA) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = c.R, c.G, c.B, c.A
	}
	return img
}

var (
	opaqueBlack = color.NRGBA{0, 0, 0, 255}
	teal        = color.NRGBA{10, 200, 180, 255}
)

func TestResize(t *testing.T) {
	tests := []struct {
		recipe       string
		inW, inH     int
		outW, outH   int
		content      image.Rectangle // where the input's color lands; the rest is black
		wantParams   int
		sameAsSource bool
	}{
		{"resize=256", 1024, 768, 341, 256, image.Rect(0, 0, 341, 256), 0, false},
		{"resize=256", 768, 1024, 256, 341, image.Rect(0, 0, 256, 341), 0, false},
		{"resize=256", 500, 375, 341, 256, image.Rect(0, 0, 341, 256), 0, false}, // 341.33 truncated
		{"resize=100", 40, 30, 133, 100, image.Rect(0, 0, 133, 100), 0, false},   // upscale
		{"resize=30", 40, 30, 40, 30, image.Rect(0, 0, 40, 30), 0, true},         // already there
		{"resize=64x48", 100, 100, 64, 48, image.Rect(0, 0, 64, 48), 0, false},
		{"resize=200x200:fit", 400, 300, 200, 200, image.Rect(0, 25, 200, 175), 0, false},
		{"resize=200x200:fit", 300, 400, 200, 200, image.Rect(25, 0, 175, 200), 0, false},
		{"resize=64x32:fit", 10, 10, 64, 32, image.Rect(16, 0, 48, 32), 0, false},
	}
	for _, tt := range tests {
		img := uniformImage(tt.inW, tt.inH, teal)
		out, params := mustParse(t, tt.recipe).Apply(img, newRand(1))
		if got := out.Bounds(); got != image.Rect(0, 0, tt.outW, tt.outH) {
			t.Errorf("%s on %dx%d: size %v, want %dx%d", tt.recipe, tt.inW, tt.inH, got, tt.outW, tt.outH)
			continue
		}
		if len(params) != tt.wantParams {
			t.Errorf("%s: params %v, want none", tt.recipe, params)
		}
		if (out == img) != tt.sameAsSource {
			t.Errorf("%s on %dx%d: returned input %v, want %v", tt.recipe, tt.inW, tt.inH, out == img, tt.sameAsSource)
		}
		for y := 0; y < tt.outH; y++ {
			for x := 0; x < tt.outW; x++ {
				want := opaqueBlack
				if image.Pt(x, y).In(tt.content) {
					want = teal
				}
				if got := out.NRGBAAt(x, y); got != want {
					t.Fatalf("%s on %dx%d: pixel (%d,%d) = %v, want %v", tt.recipe, tt.inW, tt.inH, x, y, got, want)
				}
			}
		}
	}
}

// maxDiff returns the largest difference between two images' values, or
// 256 when their sizes differ.
func maxDiff(a, b *image.NRGBA) int {
	if a.Rect.Size() != b.Rect.Size() {
		return 256
	}
	d := 0
	for y := range a.Rect.Dy() {
		ra := a.Pix[a.PixOffset(a.Rect.Min.X, a.Rect.Min.Y+y):][:a.Rect.Dx()*4]
		rb := b.Pix[b.PixOffset(b.Rect.Min.X, b.Rect.Min.Y+y):][:b.Rect.Dx()*4]
		for i := range ra {
			d = max(d, absDiff(ra[i], rb[i]))
		}
	}
	return d
}

// TestResizeFilter checks that resizing is imaging's Catmull-Rom, within
// 1 (fixed-point weights), also for an input that does not start at the
// origin.
func TestResizeFilter(t *testing.T) {
	src := noiseImage(120, 90, 3)
	sub := src.SubImage(image.Rect(10, 10, 110, 85)).(*image.NRGBA)
	tests := []struct {
		recipe string
		img    *image.NRGBA
		want   *image.NRGBA
	}{
		{"resize=60", src, imaging.Resize(src, 80, 60, imaging.CatmullRom)},
		{"resize=50x50", src, imaging.Resize(src, 50, 50, imaging.CatmullRom)},
		{"resize=30", sub, imaging.Resize(sub, 40, 30, imaging.CatmullRom)},
	}
	for _, tt := range tests {
		out, _ := mustParse(t, tt.recipe).Apply(tt.img, newRand(1))
		if d := maxDiff(out, tt.want); d > 1 || out.Rect.Min != (image.Point{}) {
			t.Errorf("%s: differs from imaging.Resize CatmullRom by %d (bounds %v)", tt.recipe, d, out.Rect)
		}
	}
}

func TestCenterCrop(t *testing.T) {
	tests := []struct {
		recipe   string
		inW, inH int
		x, y     int // input position of the output's top-left pixel
	}{
		{"crop=224", 256, 341, 16, 58},   // (341-224)/2 = 58.5 rounds to even
		{"crop=224", 259, 256, 18, 16},   // 17.5 rounds to 18
		{"crop=10x20", 30, 30, 10, 5},    // WxH
		{"crop=40", 30, 50, -5, 5},       // wider than the image: 5 black columns each side
		{"crop=33", 30, 30, -1, -1},      // odd padding: 1 left/top, 2 right/bottom
		{"crop=30x30", 30, 30, 0, 0},     // exact
		{"crop=50x10", 20, 100, -15, 45}, // pads one side, crops the other
	}
	for _, tt := range tests {
		img := testImage(tt.inW, tt.inH)
		r := mustParse(t, tt.recipe)
		out, params := r.Apply(img, newRand(1))
		if len(params) != 0 {
			t.Errorf("%s: center crop reported %v", tt.recipe, params)
		}
		c := r.ops[0].(crop)
		checkWindow(t, tt.recipe, img, out, tt.x, tt.y, c.w, c.h)
	}
}

// checkWindow checks that out is the w x h window of img at (x, y), black
// outside img.
func checkWindow(t *testing.T, name string, img, out *image.NRGBA, x, y, w, h int) {
	t.Helper()
	if out.Bounds() != image.Rect(0, 0, w, h) {
		t.Fatalf("%s: size %v, want %dx%d", name, out.Bounds(), w, h)
	}
	for v := 0; v < h; v++ {
		for u := 0; u < w; u++ {
			want := opaqueBlack
			if p := image.Pt(x+u, y+v); p.In(img.Rect) {
				want = img.NRGBAAt(p.X, p.Y)
			}
			if got := out.NRGBAAt(u, v); got != want {
				t.Fatalf("%s: out(%d,%d) = %v, want %v (window at %d,%d)", name, u, v, got, want, x, y)
			}
		}
	}
}

func TestRandomCrop(t *testing.T) {
	tests := []struct {
		recipe   string
		inW, inH int
	}{
		{"crop=224:random", 341, 256},
		{"crop=16x8:random", 20, 10},
		{"crop=20:random", 20, 20},
		{"crop=32:random", 20, 40}, // padded across, random down
	}
	for _, tt := range tests {
		img := testImage(tt.inW, tt.inH)
		r := mustParse(t, tt.recipe)
		c := r.ops[0].(crop)
		seen := map[[2]int]bool{}
		for seed := range uint64(50) {
			out, params := r.Apply(img, newRand(seed))
			win := params["crop"].([]int)
			x, y := win[0], win[1]
			if win[2] != c.w || win[3] != c.h {
				t.Fatalf("%s: window %v, want size %dx%d", tt.recipe, win, c.w, c.h)
			}
			if tt.inW >= c.w && (x < 0 || x > tt.inW-c.w) || tt.inH >= c.h && (y < 0 || y > tt.inH-c.h) {
				t.Fatalf("%s: window %v outside the %dx%d image", tt.recipe, win, tt.inW, tt.inH)
			}
			if tt.inW < c.w && x != centerOffset(tt.inW, c.w) {
				t.Fatalf("%s: padded side at x=%d, want centered", tt.recipe, x)
			}
			checkWindow(t, tt.recipe, img, out, x, y, c.w, c.h)
			seen[[2]int{x, y}] = true
		}
		positions := (max(0, tt.inW-c.w) + 1) * (max(0, tt.inH-c.h) + 1)
		if want := min(positions, 10); len(seen) < want {
			t.Errorf("%s: %d distinct positions in 50 draws, want at least %d", tt.recipe, len(seen), want)
		}
	}
}

func TestRRC(t *testing.T) {
	img := testImage(200, 150)
	r := mustParse(t, "rrc=64x48:scale=0.2-0.6:ratio=0.5-2")
	o := r.ops[0].(rrc)
	for seed := range uint64(200) {
		out, params := r.Apply(img, newRand(seed))
		win := params["rrc"].([]int)
		x, y, w, h := win[0], win[1], win[2], win[3]
		if x < 0 || y < 0 || w <= 0 || h <= 0 || x+w > 200 || y+h > 150 {
			t.Fatalf("seed %d: window %v outside the image", seed, win)
		}
		// Rounding w and h moves the area and ratio a little off range.
		area := float64(w*h) / (200 * 150)
		ratio := float64(w) / float64(h)
		if area < o.scaleLo*0.9 || area > o.scaleHi*1.1 || ratio < o.ratioLo*0.9 || ratio > o.ratioHi*1.1 {
			t.Fatalf("seed %d: window %v has area %.3f, ratio %.3f", seed, win, area, ratio)
		}
		want := imaging.Resize(img.SubImage(image.Rect(x, y, x+w, y+h)), 64, 48, imaging.CatmullRom)
		if d := maxDiff(out, want); d > 1 {
			t.Fatalf("seed %d: output differs by %d from the window %v resized to 64x48", seed, d, win)
		}
	}
}

// TestRRCFallback forces torchvision's fallback: no try fits, so the crop
// is the center of the image with its ratio clamped into range.
func TestRRCFallback(t *testing.T) {
	tests := []struct {
		recipe   string
		inW, inH int
		want     [4]int
	}{
		// A 1:1 crop of the whole area never fits a 100x10 image.
		{"rrc=10:scale=1-1:ratio=1-1", 100, 10, [4]int{45, 0, 10, 10}},
		{"rrc=10:scale=1-1:ratio=1-1", 10, 100, [4]int{0, 45, 10, 10}},
		{"rrc=10:scale=1-1:ratio=2-3", 10, 100, [4]int{0, 47, 10, 5}},
	}
	for _, tt := range tests {
		img := testImage(tt.inW, tt.inH)
		out, params := mustParse(t, tt.recipe).Apply(img, newRand(7))
		win := params["rrc"].([]int)
		if [4]int(win) != tt.want {
			t.Errorf("%s on %dx%d: window %v, want %v", tt.recipe, tt.inW, tt.inH, win, tt.want)
			continue
		}
		want := imaging.Resize(img.SubImage(image.Rect(win[0], win[1], win[0]+win[2], win[1]+win[3])), 10, 10, imaging.CatmullRom)
		if d := maxDiff(out, want); d > 1 {
			t.Errorf("%s: output differs by %d from the window resized", tt.recipe, d)
		}
	}
}

func TestFlip(t *testing.T) {
	img := testImage(7, 5)
	tests := []struct {
		recipe  string
		flipped bool
		at      func(x, y int) (int, int) // input pixel of output (x, y)
	}{
		{"hflip=1", true, func(x, y int) (int, int) { return 6 - x, y }},
		{"vflip=1", true, func(x, y int) (int, int) { return x, 4 - y }},
		{"hflip=0", false, func(x, y int) (int, int) { return x, y }},
		{"vflip=0", false, func(x, y int) (int, int) { return x, y }},
	}
	for _, tt := range tests {
		out, params := mustParse(t, tt.recipe).Apply(img, newRand(1))
		name := tt.recipe[:5]
		if params[name] != tt.flipped {
			t.Errorf("%s: params %v, want %s: %v", tt.recipe, params, name, tt.flipped)
		}
		for y := 0; y < 5; y++ {
			for x := 0; x < 7; x++ {
				sx, sy := tt.at(x, y)
				if got, want := out.NRGBAAt(x, y), img.NRGBAAt(sx, sy); got != want {
					t.Fatalf("%s: out(%d,%d) = %v, want %v", tt.recipe, x, y, got, want)
				}
			}
		}
	}
	// hflip=0.3 flips about 30% of the time.
	r := mustParse(t, "hflip=0.3")
	rng := newRand(9)
	n := 0
	for range 2000 {
		if _, p := r.Apply(img, rng); p["hflip"] == true {
			n++
		}
	}
	if n < 520 || n > 680 {
		t.Errorf("hflip=0.3 flipped %d of 2000", n)
	}
}

func TestRotate(t *testing.T) {
	sq := noiseImage(31, 31, 4)
	tests := []struct {
		name  string
		img   *image.NRGBA
		angle float64
		want  *image.NRGBA
	}{
		{"0", sq, 0, sq},
		{"90 is imaging.Rotate90", sq, 90, imaging.Rotate90(sq)},
		{"-90 is imaging.Rotate270", sq, -90, imaging.Rotate270(sq)},
		{"180 is imaging.Rotate180", noiseImage(20, 11, 5), 180, imaging.Rotate180(noiseImage(20, 11, 5))},
	}
	// Where imaging.Rotate's larger canvas exceeds the input by an even
	// number of pixels, its middle is exactly our result.
	for n := 20; n < 40; n++ {
		img := noiseImage(n, n, uint64(n))
		big := imaging.Rotate(img, 30, opaqueBlack)
		if d := big.Rect.Dx() - n; d%2 == 0 {
			tests = append(tests, struct {
				name  string
				img   *image.NRGBA
				angle float64
				want  *image.NRGBA
			}{"30 is the middle of imaging.Rotate", img, 30, cropPad(big, image.Rect(d/2, d/2, d/2+n, d/2+n), nil)})
		}
	}
	for _, tt := range tests {
		out := rotateSame(tt.img, tt.angle)
		if !bytes.Equal(out.Pix, tt.want.Pix) {
			t.Errorf("rotate %s: pixels differ", tt.name)
		}
	}
	// rotate=45 on a uniform image: the center keeps its color, the corners
	// go black, and the angle stays in range.
	img := uniformImage(64, 48, teal)
	r := mustParse(t, "rotate=45")
	for seed := range uint64(20) {
		out, params := r.Apply(img, newRand(seed))
		a := params["rotate"].(float64)
		if a < -45 || a > 45 {
			t.Fatalf("angle %v outside [-45, 45]", a)
		}
		if out.Bounds() != img.Bounds() || out.NRGBAAt(32, 24) != teal {
			t.Fatalf("angle %v: size %v, center %v", a, out.Bounds(), out.NRGBAAt(32, 24))
		}
		if abs(a) > 5 && out.NRGBAAt(0, 0) != opaqueBlack {
			t.Fatalf("angle %v: corner %v, want black", a, out.NRGBAAt(0, 0))
		}
	}
}

func abs(f float64) float64 { return max(f, -f) }

// TestResizeCropFused checks that a resize followed by a crop, which Apply
// computes as one step, gives the bytes, params and rng state of the two
// ops applied in turn.
func TestResizeCropFused(t *testing.T) {
	photo := noiseImage(300, 220, 12)
	transparent := noiseImage(300, 220, 13)
	transparent.Pix[7] = 0
	inputs := map[string]*image.NRGBA{
		"photo":       photo,
		"transparent": transparent,
		"sub-image":   photo.SubImage(image.Rect(31, 17, 251, 200)).(*image.NRGBA),
		"small":       noiseImage(40, 30, 14),
	}
	recipes := []string{
		"resize=128,crop=112", "resize=128,crop=112:random", "resize=128,crop=100x60:random",
		"resize=96x64,crop=64:random", "resize=96x64:fit,crop=80:random",
		"resize=128,crop=200:random", // padded
		"resize=128,crop=128x170",    // the whole resized image of the photo
		"resize=220,crop=150:random", // no resampling for the photo
		"resize=300x220,crop=20",
	}
	for name, img := range inputs {
		for _, recipe := range recipes {
			r := mustParse(t, recipe)
			for seed := range uint64(3) {
				rng := newRand(seed)
				got, params := r.Apply(img, rng)
				after := rng.Uint64()

				rng = newRand(seed)
				want, _ := r.ops[0].(imageOp).applyImage(img, rng)
				want, p := r.ops[1].(imageOp).applyImage(want, rng)
				if !bytes.Equal(got.Pix, want.Pix) || got.Rect != want.Rect {
					t.Fatalf("%s, %s: fused result differs (by up to %d)", name, recipe, maxDiff(got, want))
				}
				if p != nil && fmt.Sprint(params["crop"]) != fmt.Sprint(p) || p == nil && len(params) != 0 {
					t.Fatalf("%s, %s: params %v, want crop %v", name, recipe, params, p)
				}
				if rng.Uint64() != after {
					t.Fatalf("%s, %s: fused step drew a different number of values", name, recipe)
				}
			}
		}
	}
}

// TestMirrorMatchesImaging checks that flips give imaging.FlipH/FlipV's
// bytes, also on a sub-image and into a reused buffer.
func TestMirrorMatchesImaging(t *testing.T) {
	img := noiseImage(37, 23, 3)
	sub := img.SubImage(image.Rect(3, 2, 30, 21)).(*image.NRGBA)
	evenSub := img.SubImage(image.Rect(4, 1, 36, 22)).(*image.NRGBA)
	srcs := []*image.NRGBA{img, sub, img, evenSub}
	for _, w := range []int{1, 2, 3, 224} { // widths around the two-pixel steps
		srcs = append(srcs, noiseImage(w, 5, uint64(w)))
	}
	var buf Buffers
	for _, src := range srcs {
		for _, v := range []bool{false, true} {
			want := imaging.FlipH(src)
			if v {
				want = imaging.FlipV(src)
			}
			buf.reset()
			got := mirror(src, v, &buf)
			if got.Rect != want.Rect || !bytes.Equal(got.Pix, want.Pix) {
				t.Errorf("vertical=%v on %v: mirror differs from imaging", v, src.Rect)
			}
		}
	}
}
