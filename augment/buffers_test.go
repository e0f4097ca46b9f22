package augment

import (
	"bytes"
	"fmt"
	"image"
	"testing"
)

// TestApplyBuffers checks that reusing buffers across calls, over images
// of changing sizes and recipes that resample more than once, gives the
// bytes and draws of Apply.
func TestApplyBuffers(t *testing.T) {
	recipes := []string{
		"resize=256,crop=224",
		"resize=64,crop=80",
		"resize=100x60:fit,crop=50:random",
		"rrc=96,hflip=0.5",
		"resize=120,rrc=64,resize=40x30",
		"crop=300,resize=50",
	}
	sizes := [][2]int{{640, 427}, {300, 200}, {512, 512}, {640, 427}, {33, 250}}
	var buf Buffers
	for _, rs := range recipes {
		r := mustParse(t, rs)
		for i, sz := range sizes {
			img := noiseImage(sz[0], sz[1], uint64(i))
			want, wp := r.Apply(img, newRand(uint64(i)))
			got, gp := r.ApplyBuffers(img, newRand(uint64(i)), &buf)
			if got.Rect != want.Rect || !bytes.Equal(got.Pix, want.Pix) || fmt.Sprint(gp) != fmt.Sprint(wp) {
				t.Errorf("%s on %dx%d: ApplyBuffers differs from Apply (%v %v, want %v %v)", rs, sz[0], sz[1], got.Rect, gp, want.Rect, wp)
			}
		}
	}
	img := noiseImage(640, 427, 1)
	win := image.Rect(56, 0, 280, 224)
	if n := testing.AllocsPerRun(10, func() {
		buf.reset()
		resampleWindow(img, 336, 224, win, Source{}, &buf)
	}); n > 3 {
		t.Errorf("a resample with warm buffers makes %v allocations, want no more than its image headers and view", n)
	}
	// An image already at the resize's size is only cropped: into the
	// buffers too, not a new image (200 KB a sample).
	r := mustParse(t, "resize=256,crop=224")
	allocs := func(img *image.NRGBA) float64 {
		return testing.AllocsPerRun(10, func() { r.ApplyBuffers(img, newRand(1), &buf) })
	}
	if cropped, resampled := allocs(noiseImage(384, 256, 2)), allocs(img); cropped > resampled {
		t.Errorf("resize=256,crop=224 on a 384x256 image makes %v allocations, more than the %v of one it resamples", cropped, resampled)
	}
}
