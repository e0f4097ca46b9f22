package augment

import (
	"bytes"
	"image"
	"testing"

	"github.com/disintegration/imaging"
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

// TestResampleSIMD checks that the SIMD loops (resample_simd.go) give
// the bytes of the scalar ones, on random images, sub-images and windows,
// shrinking and enlarging by several factors.
func TestResampleSIMD(t *testing.T) {
	if !haveSIMD {
		t.Skip("no SIMD loops on this build or CPU")
	}
	defer func() { useSIMD = true }()
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
		useSIMD = true
		got := resampleWindow(img, w, h, win, src, nil)
		useSIMD = false
		want := resampleWindow(img, w, h, win, src, nil)
		if got.Rect != want.Rect || !bytes.Equal(got.Pix, want.Pix) {
			t.Errorf("%dx%d to %dx%d, window %v, %+v: SIMD and scalar bytes differ", sw, sh, w, h, win, src)
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
	for _, simd := range []bool{false, haveSIMD} {
		useSIMD = simd
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
						t.Fatalf("simd %v, %dx%d -> %dx%d, window %v: row %d differs from the full resize", simd, sz.sw, sz.sh, sz.w, sz.h, win, y)
					}
				}
			}
		}
	}
	useSIMD = haveSIMD
}
