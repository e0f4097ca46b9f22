package augment

import (
	"image"
	"testing"

	"github.com/disintegration/imaging"
)

// BenchmarkResizeCrop is the common validation recipe on a 1024x768 photo-
// sized image.
func BenchmarkResizeCrop(b *testing.B) {
	benchRecipe(b, "resize=256,crop=224")
}

// BenchmarkResizeCropBuffers is BenchmarkResizeCrop reusing its memory
// from one call to the next.
func BenchmarkResizeCropBuffers(b *testing.B) {
	r := mustParse(b, "resize=256,crop=224")
	img := noiseImage(1024, 768, 1)
	rng := newRand(1)
	var buf Buffers
	b.ReportAllocs()
	for b.Loop() {
		r.ApplyBuffers(img, rng, &buf)
	}
}

// BenchmarkResizeCropImaging is the baseline for BenchmarkResizeCrop: the
// same steps with imaging.Resize and imaging.CropCenter.
func BenchmarkResizeCropImaging(b *testing.B) {
	img := noiseImage(1024, 768, 1)
	b.ReportAllocs()
	for b.Loop() {
		imaging.CropCenter(imaging.Resize(img, 341, 256, imaging.CatmullRom), 224, 224)
	}
}

// BenchmarkTrainRecipe is a typical training recipe.
func BenchmarkTrainRecipe(b *testing.B) {
	benchRecipe(b, "rrc=224,hflip=0.5,jitter=0.4/0.4/0.4/0.1")
}

func benchRecipe(b *testing.B, recipe string) {
	r := mustParse(b, recipe)
	img := noiseImage(1024, 768, 1)
	rng := newRand(1)
	b.ReportAllocs()
	for b.Loop() {
		r.Apply(img, rng)
	}
}

// BenchmarkResize compares, for the resize=256 step of
// BenchmarkResizeCrop, our fixed-point Catmull-Rom (with its SIMD loops
// where the build and CPU have them, and scalar) with imaging.Resize's
// Catmull-Rom and Lanczos; the window cases are the resize=256,crop=224
// of convert on a typical DCT-scaled decode, with warm buffers.
func BenchmarkResize(b *testing.B) {
	img := noiseImage(1024, 768, 1)
	scaled := noiseImage(512, 384, 2)
	var buf Buffers
	window := func(simd bool) func() {
		return func() {
			defer func(u bool) { useSIMD = u }(useSIMD)
			useSIMD = simd && haveSIMD
			buf.reset()
			resampleWindow(scaled, 341, 256, image.Rect(58, 16, 282, 240), Source{}, &buf)
		}
	}
	for _, f := range []struct {
		name   string
		resize func()
	}{
		{"fixed-point", func() { resample(img, 341, 256, nil) }},
		{"fixed-point-scalar", func() {
			defer func(u bool) { useSIMD = u }(useSIMD)
			useSIMD = false
			resample(img, 341, 256, nil)
		}},
		{"window-512x384", window(true)},
		{"window-512x384-scalar", window(false)},
		{"imaging-CatmullRom", func() { imaging.Resize(img, 341, 256, imaging.CatmullRom) }},
		{"imaging-Lanczos", func() { imaging.Resize(img, 341, 256, imaging.Lanczos) }},
	} {
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				f.resize()
			}
		})
	}
}

// BenchmarkFanOut decides whether imaging's own fan-out (each call splits
// its rows over GOMAXPROCS goroutines) helps inside convert, whose CPU
// stage already runs one image per core: every op runs as imaging does it
// and as this package does it on the calling goroutine, with one worker
// (an idle machine: fan-out can use the other cores) and with GOMAXPROCS
// workers under b.RunParallel (the pipeline: every core busy). img/s counts
// images done by all workers together.
func BenchmarkFanOut(b *testing.B) {
	photo := noiseImage(512, 384, 1) // a typical scaled decode
	small := noiseImage(224, 224, 2) // a sample after resize+crop
	ops := []struct {
		name string
		f    func(buf *Buffers)
	}{
		{"resize/imaging", func(*Buffers) { imaging.Resize(photo, 341, 256, filter) }},
		{"resize/serial", func(buf *Buffers) { buf.reset(); resample(photo, 341, 256, buf) }},
		{"fliph/imaging", func(*Buffers) { imaging.FlipH(small) }},
		{"fliph/serial", func(buf *Buffers) { buf.reset(); mirror(small, false, buf) }},
		{"blur/imaging", func(*Buffers) { imaging.Blur(small, 1) }},
	}
	for _, op := range ops {
		b.Run(op.name+"/workers=1", func(b *testing.B) {
			var buf Buffers
			for b.Loop() {
				op.f(&buf)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "img/s")
		})
		b.Run(op.name+"/workers=GOMAXPROCS", func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				var buf Buffers
				for pb.Next() {
					op.f(&buf)
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "img/s")
		})
	}
}
