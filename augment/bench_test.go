package augment

import (
	"bytes"
	"image"
	_ "image/jpeg" // benchPhotos decodes the testdata photos
	_ "image/png"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

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
// BenchmarkResizeCrop, our fixed-point Catmull-Rom on each path this
// build and CPU run (scalar, AVX2, AVX-512) with imaging.Resize's
// Catmull-Rom and Lanczos; the window cases are the resize=256,crop=224
// of convert on a typical DCT-scaled decode, with warm buffers.
func BenchmarkResize(b *testing.B) {
	defer func(p simdPath) { usePath = p }(usePath)
	img := noiseImage(1024, 768, 1)
	scaled := noiseImage(512, 384, 2)
	var buf Buffers
	for _, p := range simdPaths {
		if !cpuHas(p) {
			continue
		}
		b.Run("fixed-point/"+p.String(), func(b *testing.B) {
			usePath = p
			b.ReportAllocs()
			for b.Loop() {
				resample(img, 341, 256, nil)
			}
		})
		b.Run("window-512x384/"+p.String(), func(b *testing.B) {
			usePath = p
			b.ReportAllocs()
			for b.Loop() {
				buf.reset()
				resampleWindow(scaled, 341, 256, image.Rect(58, 16, 282, 240), Source{}, &buf)
			}
		})
	}
	for _, f := range []struct {
		name   string
		filter imaging.ResampleFilter
	}{{"imaging-CatmullRom", imaging.CatmullRom}, {"imaging-Lanczos", imaging.Lanczos}} {
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				imaging.Resize(img, 341, 256, f.filter)
			}
		})
	}
}

// photoWindow is the resize=256,crop=224 of one photo: its size at a
// 256-pixel short side and the centered 224² window of it.
type photoWindow struct {
	img  *image.NRGBA
	w, h int
	win  image.Rectangle
}

func newPhotoWindow(img *image.NRGBA) photoWindow {
	p := photoWindow{img: img, w: 256, h: 256}
	sw, sh := img.Rect.Dx(), img.Rect.Dy()
	if sw > sh {
		p.w = (sw*256 + sh/2) / sh
	} else {
		p.h = (sh*256 + sw/2) / sw
	}
	x0, y0 := (p.w-224)/2, (p.h-224)/2
	p.win = image.Rect(x0, y0, x0+224, y0+224)
	return p
}

// benchPhotos decodes the testdata photos (300×200 to 1200×1200, color
// and gray, JPEG and PNG), with the window resize=256,crop=224 computes
// of each: at their own sizes, as a decoder that does not scale gives
// them, and with each JPEG shrunk as convert's DCT-scaled decode shrinks
// it (by the smallest M/8 that keeps its short side at 256 or more).
func benchPhotos(b *testing.B) (full, scaled []photoWindow) {
	b.Helper()
	files, err := filepath.Glob("../testdata/images/*/*")
	if err != nil || len(files) == 0 {
		b.Fatalf("no testdata photos in ../testdata/images (%v)", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		img, _, err := image.Decode(bytes.NewReader(data))
		if err != nil {
			b.Fatalf("decode %s: %v", f, err)
		}
		nrgba := imaging.Clone(img)
		full = append(full, newPhotoWindow(nrgba))
		sw, sh := nrgba.Rect.Dx(), nrgba.Rect.Dy()
		m := 8
		for filepath.Ext(f) == ".jpg" && m > 1 && (min(sw, sh)*(m-1)+7)/8 >= 256 {
			m--
		}
		if m < 8 {
			nrgba = imaging.Resize(nrgba, (sw*m+7)/8, (sh*m+7)/8, imaging.Box)
		}
		scaled = append(scaled, newPhotoWindow(nrgba))
	}
	return full, scaled
}

// logCPU logs the CPU's model and its SIMD flags, which the figures
// depend on.
func logCPU(b *testing.B) {
	b.Helper()
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		b.Logf("cpu: %s, paths %v (no /proc/cpuinfo: %v)", runtime.GOARCH, cpuPath, err)
		return
	}
	var model string
	var flags []string
	for line := range strings.Lines(string(data)) {
		name, val, _ := strings.Cut(line, ":")
		switch strings.TrimSpace(name) {
		case "model name":
			model = strings.TrimSpace(val)
		case "flags":
			for f := range strings.FieldsSeq(val) {
				if f == "avx2" || strings.HasPrefix(f, "avx512") {
					flags = append(flags, f)
				}
			}
		}
		if model != "" && flags != nil {
			break
		}
	}
	b.Logf("cpu: %s; flags: %s; fastest path: %v", model, strings.Join(flags, " "), cpuPath)
}

// BenchmarkResizePhotos runs resize=256,crop=224's resample (the window
// only, warm buffers, the alpha scan skipped as for a decoder's opaque
// image) over the testdata photos, at their own sizes (full) and as
// convert's DCT-scaled decode gives them (dct-scaled), on each path this
// build and CPU run; an op is all the photos. "ratios" runs every path
// in each iteration, one after the other, and reports how many times
// faster than scalar each path is (x-AVX2, x-AVX-512), and its time a
// photo, from each path's fastest iteration: on a machine shared with
// other work, the others catch the bursts of load. The CPU and its SIMD
// flags are in the log.
func BenchmarkResizePhotos(b *testing.B) {
	defer func(p simdPath) { usePath = p }(usePath)
	full, scaled := benchPhotos(b)
	var paths []simdPath
	for _, p := range simdPaths {
		if cpuHas(p) {
			paths = append(paths, p)
		}
	}
	for _, set := range []struct {
		name   string
		photos []photoWindow
	}{{"full", full}, {"dct-scaled", scaled}} {
		var buf Buffers
		all := func() {
			for _, p := range set.photos {
				buf.reset()
				resampleWindow(p.img, p.w, p.h, p.win, Source{Opaque: true}, &buf)
			}
		}
		for _, p := range paths {
			b.Run(set.name+"/"+p.String(), func(b *testing.B) {
				usePath = p
				b.ReportAllocs()
				for b.Loop() {
					all()
				}
				b.ReportMetric(float64(len(set.photos)*b.N)/b.Elapsed().Seconds(), "img/s")
			})
		}
		b.Run(set.name+"/ratios", func(b *testing.B) {
			logCPU(b)
			best := make([]time.Duration, len(paths))
			for b.Loop() {
				for i, p := range paths {
					usePath = p
					t0 := time.Now()
					all()
					if d := time.Since(t0); best[i] == 0 || d < best[i] {
						best[i] = d
					}
				}
			}
			for i, p := range paths {
				b.ReportMetric(best[i].Seconds()*1e3/float64(len(set.photos)), "ms/img-"+p.String())
				if i > 0 {
					b.ReportMetric(best[0].Seconds()/best[i].Seconds(), "x-"+p.String())
				}
			}
			b.ReportMetric(0, "ns/op")
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
