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
	"github.com/prep-dev/prep/augment"
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
	tests := []struct {
		w, h, minSide int
		gap           float64
		want          int
	}{
		{1200, 1200, 0, 0, 8},
		{1200, 1200, 100, 0, 1}, // 150 ≥ 1.25×100
		{1200, 1200, 120, 0, 1}, // 150 ≥ 1.25×120
		{1200, 1200, 121, 0, 2}, // 150 < 151.25; 300 ≥ 1.5×121
		{1200, 1200, 200, 0, 2}, // 300 ≥ 300
		{1200, 1200, 201, 0, 4}, // 300 < 301.5
		{1200, 1200, 224, 0, 4}, // 300 < 336: 3/8 (450) has no SIMD IDCT
		{1200, 900, 224, 0, 4},  // 225 < 336; 3/8 (338) would do
		{1200, 1200, 600, 0, 4},
		{1200, 1200, 601, 0, 8}, // 5/8 (750) and 6/8 have no SIMD IDCT
		{512, 512, 256, 0, 4},   // lands on the target: M = 4 needs no gap
		{512, 512, 64, 0, 2},    // 1/8 would land on it: 1.25× asked
		{640, 427, 256, 0, 8},   // ⌈427·4/8⌉ = 214; 5/8 would give 267
		{451, 300, 150, 0, 4},   // 150
		{451, 300, 151, 0, 8},
		{1200, 1200, 224, 2, 4}, // a uniform gap: 300 < 448 ≤ 600
		{1200, 1200, 150, 1, 1},
		{10, 10, 5000, 0, 8},
	}
	for _, tt := range tests {
		if got := scaleFor(tt.w, tt.h, tt.minSide, tt.gap); got != tt.want {
			t.Errorf("scaleFor(%d, %d, %d, %v) = %d, want %d", tt.w, tt.h, tt.minSide, tt.gap, got, tt.want)
		}
	}
}

func TestRegion(t *testing.T) {
	// 451×300 at 7/8: 394.625 × 262.5 in a 395 × 263 grid.
	tests := []struct {
		o              int
		x0, y0, dx, dy float64
	}{
		{1, 0, 0, 394.625, 262.5},
		{2, 0.375, 0, 394.625, 262.5},
		{3, 0.375, 0.5, 394.625, 262.5},
		{4, 0, 0.5, 394.625, 262.5},
		{5, 0, 0, 262.5, 394.625},
		{6, 0.5, 0, 262.5, 394.625},
		{7, 0.5, 0.375, 262.5, 394.625},
		{8, 0, 0.375, 262.5, 394.625},
	}
	for _, tt := range tests {
		info := Info{Width: 451, Height: 300, ScaleNum: 7, Orientation: tt.o}
		x0, y0, dx, dy := info.Region()
		if x0 != tt.x0 || y0 != tt.y0 || dx != tt.dx || dy != tt.dy {
			t.Errorf("orientation %d: region (%v, %v) + %v×%v, want (%v, %v) + %v×%v", tt.o, x0, y0, dx, dy, tt.x0, tt.y0, tt.dx, tt.dy)
		}
	}
	full := Info{Width: 451, Height: 300, ScaleNum: 8, Orientation: 6}
	if x0, y0, dx, dy := full.Region(); x0 != 0 || y0 != 0 || dx != 300 || dy != 451 {
		t.Errorf("full size: region (%v, %v) + %v×%v, want the whole 300×451 grid", x0, y0, dx, dy)
	}
}

// source is the augment.Source of a decode.
func source(info Info) augment.Source {
	if info.ScaleNum == 8 {
		return augment.Source{}
	}
	w, h := info.Upright()
	x0, y0, dx, dy := info.Region()
	return augment.Source{W: w, H: h, X0: x0, Y0: y0, DX: dx, DY: dy}
}

// TestScaledMatchesFull checks the fast path against the reference: a DCT-
// scaled decode (default scale rule) followed by the pipeline's resize
// (given the decode's Source) must give the same size as a full decode with
// image/jpeg and the same resize, and nearly the same pixels.
func TestScaledMatchesFull(t *testing.T) {
	for _, path := range jpegPhotos(t) {
		data := readFile(t, path)
		full, _, err := Decode(data, Options{Decoder: DecoderGo})
		if err != nil {
			t.Fatal(err)
		}
		for _, side := range []int{256, 224, 128, 64} {
			t.Run(fmt.Sprintf("%s/%d", filepath.Base(path), side), func(t *testing.T) {
				r, err := augment.Parse(fmt.Sprintf("resize=%d", side))
				if err != nil {
					t.Fatal(err)
				}
				scaled, info, err := Decode(data, Options{Decoder: DecoderTurbo, MinSide: side})
				if err != nil {
					t.Fatal(err)
				}
				if short := min(scaled.Rect.Dx(), scaled.Rect.Dy()); short < side {
					t.Fatalf("scaled to %v (%d/8), shorter side under %d", scaled.Rect, info.ScaleNum, side)
				}
				if want := scaleFor(info.Width, info.Height, side, 0); info.ScaleNum != want {
					t.Fatalf("scale %d/8, want %d/8", info.ScaleNum, want)
				}
				got, _ := r.ApplyScaled(scaled, source(info), nil, nil)
				want, _ := r.Apply(full, nil)
				if got.Rect != want.Rect {
					t.Fatalf("after resize %v, full decode gives %v", got.Rect, want.Rect)
				}
				if p := psnr(got, want); p <= 40 {
					t.Errorf("PSNR %.1f dB (scale %d/8), want > 40", p, info.ScaleNum)
				} else {
					t.Logf("scale %d/8: PSNR %.1f dB", info.ScaleNum, p)
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
