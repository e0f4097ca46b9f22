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

// TestWeightsReused checks that weights computed for photos of many sizes
// reuse the memory of the sets they evict, and that a set in use is never
// the one reused: resizes of more sizes than Buffers keeps, in an order
// that mixes repeats (kept sets) with new sizes (reused memory), give the
// bytes of resizes with fresh memory, and a warm resize of a size not kept
// allocates no more than one of a size kept.
func TestWeightsReused(t *testing.T) {
	type job struct {
		sw, sh, w, h int
		win          image.Rectangle
	}
	var jobs []job
	for i := range 3 * maxTaps {
		sw, sh := 300+37*i, 200+23*(i%7)
		w, h := 256*sw/sh, 256
		x := (w - 224) / 2
		jobs = append(jobs, job{sw, sh, w, h, image.Rect(x, 16, x+224, 240)})
	}
	var buf Buffers
	for i := range 6 * maxTaps {
		j := jobs[(i*5+i/3)%len(jobs)]
		if i%4 == 3 {
			j = jobs[0] // kept, then evicted, then computed again
		}
		img := noiseImage(j.sw, j.sh, uint64(i))
		want := resampleWindow(img, j.w, j.h, j.win, Source{}, nil)
		buf.reset()
		got := resampleWindow(img, j.w, j.h, j.win, Source{}, &buf)
		if got.Rect != want.Rect || !bytes.Equal(got.Pix, want.Pix) {
			t.Fatalf("resize %d (%dx%d to %dx%d, window %v) with reused weights differs from fresh ones", i, j.sw, j.sh, j.w, j.h, j.win)
		}
	}
	imgs := make([]*image.NRGBA, len(jobs))
	for i, j := range jobs {
		imgs[i] = noiseImage(j.sw, j.sh, uint64(i))
	}
	next := 0
	fresh := testing.AllocsPerRun(2*len(jobs), func() {
		j := jobs[next%len(jobs)]
		buf.reset()
		resampleWindow(imgs[next%len(jobs)], j.w, j.h, j.win, Source{}, &buf)
		next++
	})
	kept := testing.AllocsPerRun(10, func() {
		j := jobs[0]
		buf.reset()
		resampleWindow(imgs[0], j.w, j.h, j.win, Source{}, &buf)
	})
	if fresh > kept {
		t.Errorf("a warm resize of a size whose weights are not kept makes %v allocations, want no more than the %v of one whose weights are", fresh, kept)
	}
}
