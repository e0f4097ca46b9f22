package augment

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"image"
	"runtime"
	"testing"

	"github.com/disintegration/imaging"

	"github.com/prep-dev/prep/internal/testenv"
)

// TestResample compares the fixed-point resampler with imaging.Resize,
// which it replaces for opaque images.
func TestResample(t *testing.T) {
	src := noiseImage(203, 151, 6)
	sub := src.SubImage(image.Rect(17, 9, 150, 140)).(*image.NRGBA)
	smooth := testImage(256, 256) // gradients: resampling errors would show as bands
	tests := []struct {
		name string
		img  *image.NRGBA
		w, h int
	}{
		{"down both", src, 67, 50},
		{"down a lot", src, 9, 7},
		{"up both", src, 512, 300},
		{"width only", src, 100, 151},
		{"height only", src, 203, 40},
		{"up and down", src, 400, 20},
		{"to 1x1", src, 1, 1},
		{"sub-image", sub, 50, 60},
		{"sub-image, width only", sub, 70, 131},
		{"gradient", smooth, 224, 224},
		{"tiny source", src.SubImage(image.Rect(0, 0, 2, 3)).(*image.NRGBA), 30, 20},
	}
	for _, tt := range tests {
		got := resample(tt.img, tt.w, tt.h, nil)
		want := imaging.Resize(tt.img, tt.w, tt.h, imaging.CatmullRom)
		if got.Rect != image.Rect(0, 0, tt.w, tt.h) {
			t.Errorf("%s: bounds %v", tt.name, got.Rect)
			continue
		}
		if d := maxDiff(got, want); d > 1 {
			t.Errorf("%s: differs from imaging.Resize by up to %d", tt.name, d)
		}
	}
}

// TestResampleTransparent checks that images with transparency go to
// imaging.Resize, whose alpha-weighted filtering keeps transparent
// pixels' colors from bleeding.
func TestResampleTransparent(t *testing.T) {
	img := noiseImage(64, 64, 7)
	img.Pix[3] = 0
	got := resample(img, 20, 30, nil)
	want := imaging.Resize(img, 20, 30, imaging.CatmullRom)
	if !bytes.Equal(got.Pix, want.Pix) {
		t.Error("a transparent image was not resized by imaging.Resize")
	}
}

// resampleCase is one call of resampleWindow.
type resampleCase struct {
	img  *image.NRGBA
	w, h int
	win  image.Rectangle
	src  Source
}

func (c resampleCase) String() string {
	return fmt.Sprintf("%dx%d to %dx%d, window %v, %+v", c.img.Rect.Dx(), c.img.Rect.Dy(), c.w, c.h, c.win, c.src)
}

func (c resampleCase) run(buf *Buffers) *image.NRGBA {
	buf.reset()
	return resampleWindow(c.img, c.w, c.h, c.win, c.src, buf)
}

// resampleCases are the calls TestResampleSIMD and TestResampleBytes
// make: random images, sub-images, windows and decoder spans, shrinking
// and enlarging by factors from 0.05 to 2.5 (1 to 87 taps); then every
// output width from 1 to 40 through each pass alone and both, for the
// SIMD loops' steps and tails (32 and 16 bytes, 4 columns).
func resampleCases() []resampleCase {
	var cases []resampleCase
	rng := newRand(9)
	for i := range 60 {
		sw, sh := 1+rng.IntN(700), 1+rng.IntN(500)
		img := noiseImage(sw, sh, uint64(i))
		if i%3 == 1 && sw > 8 && sh > 8 {
			img = img.SubImage(image.Rect(3, 5, sw-2, sh-1)).(*image.NRGBA)
			sw, sh = img.Rect.Dx(), img.Rect.Dy()
		}
		scales := []float64{0.05, 0.13, 0.33, 0.5, 0.667, 0.9, 1, 1.3, 2.5}
		fx, fy := scales[rng.IntN(len(scales))], scales[rng.IntN(len(scales))]
		w, h := max(1, int(float64(sw)*fx)), max(1, int(float64(sh)*fy))
		x0, y0 := rng.IntN(w), rng.IntN(h)
		win := image.Rect(x0, y0, x0+1+rng.IntN(w-x0), y0+1+rng.IntN(h-y0))
		src := Source{}
		if i%4 == 3 {
			src = Source{W: 2 * sw, H: 2 * sh, X0: 0.25, Y0: 0, DX: float64(sw) - 0.5, DY: float64(sh) - 0.3}
		}
		cases = append(cases, resampleCase{img, w, h, win, src})
	}
	for w := 1; w <= 40; w++ {
		narrow, wide := noiseImage(w, 9, uint64(w)), noiseImage(2*w+3, 9, uint64(w))
		for _, c := range []resampleCase{{img: narrow, w: w, h: 14}, {img: wide, w: w, h: 9}, {img: wide, w: w, h: 5}} {
			c.win = image.Rect(0, 0, c.w, c.h)
			cases = append(cases, c)
		}
	}
	return cases
}

// TestResampleSIMD checks that each SIMD path (AVX2 in resample_avx2.go,
// AVX-512 in resample_simd.go) gives the bytes of the scalar loops on
// resampleCases, with fresh memory and with Buffers reused from call to
// call. A path this CPU lacks skips (under CI too: it is hardware).
func TestResampleSIMD(t *testing.T) {
	defer func(p simdPath) { usePath = p }(usePath)
	cases := resampleCases()
	usePath = scalarPath
	want := make([]*image.NRGBA, len(cases))
	for i, c := range cases {
		want[i] = c.run(nil)
	}
	for _, p := range simdPaths[1:] {
		t.Run(p.String(), func(t *testing.T) {
			testenv.NeedSIMD(t, p.String(), cpuHas(p))
			usePath = p
			var buf Buffers
			for i, c := range cases {
				for _, b := range []*Buffers{nil, &buf} {
					got := c.run(b)
					if got.Rect != want[i].Rect || !bytes.Equal(got.Pix, want[i].Pix) {
						t.Errorf("%v, buffers %v: %s and scalar bytes differ", c, b != nil, p)
					}
				}
			}
			// The loops allocate nothing: with warm buffers a resize
			// allocates nothing at all.
			c := resampleCase{noiseImage(512, 384, 1), 341, 256, image.Rect(58, 16, 282, 240), Source{}}
			if n := testing.AllocsPerRun(10, func() { c.run(&buf) }); n != 0 {
				t.Errorf("%v with warm buffers: %v allocations on the %s path, want 0", c, n, p)
			}
		})
	}
}

// resampleSHA256 is the SHA-256 of resampleCases' results, each one's
// bounds and pixels in turn, as this file's resampler gives them on amd64
// (scalar, AVX2 and AVX-512 alike). A change that moves it changes the
// bytes of every dataset prep makes.
const resampleSHA256 = "000974a9d407575223f2c69936abb4f37a43e4d4a0717526201521437345d19e"

// TestResampleBytes pins the resampler's bytes: every path of this build
// and CPU gives resampleSHA256, on amd64 and on arm64 alike (make cross
// runs this test for arm64 under qemu), so a dataset does not depend on
// the machine that made it. The weights are computed in floating point,
// which a compiler may fuse into other roundings on another
// architecture (FMA on arm64); this is what would show it.
func TestResampleBytes(t *testing.T) {
	defer func(p simdPath) { usePath = p }(usePath)
	cases := resampleCases()
	for _, p := range simdPaths {
		if !cpuHas(p) {
			continue // TestResampleSIMD records the skip
		}
		usePath = p
		h := sha256.New()
		for _, c := range cases {
			out := c.run(nil)
			fmt.Fprint(h, out.Rect)
			for y := range out.Rect.Dy() {
				h.Write(out.Pix[y*out.Stride:][:out.Rect.Dx()*4])
			}
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != resampleSHA256 {
			t.Errorf("%s on %s: resampled bytes hash to %s, want %s", p, runtime.GOARCH, got, resampleSHA256)
		}
	}
}

// TestOpaque checks opaque on every alpha position of odd and even widths.
func TestOpaque(t *testing.T) {
	for _, w := range []int{1, 2, 7, 8, 9, 17} {
		img := noiseImage(w, 3, 1)
		if !opaque(img) {
			t.Errorf("width %d: an opaque image is not opaque", w)
		}
		for i := 3; i < len(img.Pix); i += 4 {
			img.Pix[i] = 254
			if opaque(img) {
				t.Errorf("width %d: alpha 254 at byte %d not seen", w, i)
			}
			img.Pix[i] = 255
		}
	}
}

// TestResampleWindowUpscale: every window of an upscale is the full
// resize cropped. A 126-row source upscaled to 258 rows has a row whose
// first nonzero weight starts before the next row's, so the rows a window
// reads are not those of its first and last rows alone: taking them so
// read past the window and panicked (a 125×126 photo, resize=256).
func TestResampleWindowUpscale(t *testing.T) {
	defer func(p simdPath) { usePath = p }(usePath)
	for _, p := range simdPaths {
		if !cpuHas(p) {
			continue // TestResampleSIMD records the skip
		}
		usePath = p
		for _, sz := range []struct{ sw, sh, w, h int }{{125, 126, 256, 258}, {89, 66, 345, 256}, {131, 123, 272, 256}, {140, 107, 335, 256}} {
			src := noiseImage(sz.sw, sz.sh, 3)
			full := resample(src, sz.w, sz.h, nil)
			// Every place a random 224² crop can take, as crop=224:random does.
			var wins []image.Rectangle
			for y := 0; y+224 <= sz.h; y++ {
				x := y * (sz.w - 224) / max(1, sz.h-224)
				wins = append(wins, image.Rect(x, y, x+224, y+224))
			}
			for _, win := range wins {
				got := resampleWindow(src, sz.w, sz.h, win, Source{}, new(Buffers))
				want := full.SubImage(win).(*image.NRGBA)
				for y := 0; y < win.Dy(); y++ {
					g := got.Pix[y*got.Stride:][:win.Dx()*4]
					w := want.Pix[want.PixOffset(win.Min.X, win.Min.Y+y):][:win.Dx()*4]
					if !bytes.Equal(g, w) {
						t.Fatalf("%s, %dx%d -> %dx%d, window %v: row %d differs from the full resize", p, sz.sw, sz.sh, sz.w, sz.h, win, y)
					}
				}
			}
		}
	}
}
