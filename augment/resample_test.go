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
