//go:build cgo

package imgdec

import (
	"bytes"
	"fmt"
	"image"
	"math"
	"path/filepath"
	"testing"

	"github.com/disintegration/imaging"
)

// jpegPhotos returns the JPEG photographs under testdata/images.
func jpegPhotos(t testing.TB) []string {
	t.Helper()
	photos, err := filepath.Glob(filepath.Join(imagesDir, "*", "*.jpg"))
	if err != nil || len(photos) < 4 {
		t.Fatalf("found %d JPEG photos under %s (%v)", len(photos), imagesDir, err)
	}
	return photos
}

// resizeShorter is the pipeline's resize=S: torchvision's size rule with
// imaging's Catmull-Rom filter (augment/geometry.go).
func resizeShorter(img *image.NRGBA, s int) *image.NRGBA {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	if w <= h {
		return imaging.Resize(img, s, int(float64(s)*float64(h)/float64(w)), imaging.CatmullRom)
	}
	return imaging.Resize(img, int(float64(s)*float64(w)/float64(h)), s, imaging.CatmullRom)
}

// psnr compares the RGB channels of two same-sized images, in dB.
func psnr(a, b *image.NRGBA) float64 {
	var sse float64
	for i := range a.Pix {
		if i%4 == 3 {
			continue
		}
		d := float64(a.Pix[i]) - float64(b.Pix[i])
		sse += d * d
	}
	mse := sse / float64(len(a.Pix)*3/4)
	if mse == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(255*255/mse)
}

func TestScaleFor(t *testing.T) {
	tests := []struct{ w, h, minSide, want int }{
		{1200, 1200, 0, 1},
		{1200, 1200, 150, 8},
		{1200, 1200, 151, 4},
		{1200, 1200, 224, 4},
		{1200, 1200, 300, 4},
		{1200, 1200, 301, 2},
		{1200, 1200, 601, 1},
		{640, 427, 224, 1},
		{640, 427, 200, 2},
		{451, 300, 38, 8}, // ceil(300/8) = 38
		{451, 300, 39, 4},
		{10, 10, 5000, 1},
	}
	for _, tt := range tests {
		if got := scaleFor(tt.w, tt.h, tt.minSide); got != tt.want {
			t.Errorf("scaleFor(%d, %d, %d) = %d, want %d", tt.w, tt.h, tt.minSide, got, tt.want)
		}
	}
}

// TestScaledMatchesFull checks the fast path against the reference: a DCT-
// scaled decode (default reducing gap) followed by the pipeline's resize must
// give the same size as a full decode with image/jpeg and the same resize,
// and nearly the same pixels.
func TestScaledMatchesFull(t *testing.T) {
	for _, path := range jpegPhotos(t) {
		data := readFile(t, path)
		full, _, err := Decode(data, Options{Decoder: DecoderGo})
		if err != nil {
			t.Fatal(err)
		}
		for _, side := range []int{224, 128, 64} {
			t.Run(fmt.Sprintf("%s/%d", filepath.Base(path), side), func(t *testing.T) {
				scaled, info, err := Decode(data, Options{Decoder: DecoderTurbo, MinSide: side})
				if err != nil {
					t.Fatal(err)
				}
				short := min(scaled.Rect.Dx(), scaled.Rect.Dy())
				if short < side || info.Scale > 1 && short < 2*side {
					t.Fatalf("scaled to %v (1/%d), shorter side under 2×%d", scaled.Rect, info.Scale, side)
				}
				if want := scaleFor(info.Width, info.Height, 2*side); info.Scale != want {
					t.Fatalf("scale 1/%d, want 1/%d", info.Scale, want)
				}
				got, want := resizeShorter(scaled, side), resizeShorter(full, side)
				if got.Rect != want.Rect {
					t.Fatalf("after resize %v, full decode gives %v", got.Rect, want.Rect)
				}
				if p := psnr(got, want); p <= 40 {
					t.Errorf("PSNR %.1f dB (scale 1/%d), want > 40", p, info.Scale)
				} else {
					t.Logf("scale 1/%d: PSNR %.1f dB", info.Scale, p)
				}
			})
		}
	}
}

// TestTurboDeterministicWithReuse decodes into recycled buffers: results
// must not depend on what a buffer held before.
func TestTurboDeterministicWithReuse(t *testing.T) {
	photos := jpegPhotos(t)
	first := map[string][]byte{}
	for round := 0; round < 3; round++ {
		for _, path := range photos {
			img, _, err := Decode(readFile(t, path), Options{MinSide: 100 * round})
			if err != nil {
				t.Fatal(err)
			}
			key := fmt.Sprint(path, round)
			if round == 0 || first[key] == nil {
				first[key] = bytes.Clone(img.Pix)
				// Decode again into the buffer just released.
				Release(img)
				img, _, err = Decode(readFile(t, path), Options{MinSide: 100 * round})
				if err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(img.Pix, first[key]) {
				t.Fatalf("%s: decoding into a reused buffer changed the pixels", path)
			}
			Release(img)
		}
	}
}
