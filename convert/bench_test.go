package convert

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prep-dev/prep/augment"
	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/formats/hdf5"
	"github.com/prep-dev/prep/internal/testenv"
	"github.com/prep-dev/prep/media/imgdec"
)

// benchPhotos loads the testdata photos in key order, the order in which
// convert processes them.
func benchPhotos(b *testing.B) ([][]byte, string) {
	b.Helper()
	root := "../testdata/images"
	var keys []string
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		keys = append(keys, key)
		files[key] = data
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if len(files) == 0 {
		b.Fatal("no testdata photos")
	}
	slices.Sort(keys)
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i] = files[k]
	}
	return out, root
}

// benchCopies makes each run convert 8 photos × 32 copies = 256 samples
// (38 MB of 224² RGB), so that the per-run costs of convert (listing,
// creating, syncing and hashing the shard) are spread over enough samples
// to weigh as they would on a real dataset, a few percent.
const benchCopies = 32

// forEach runs f(i) for i in [0, n) on workers goroutines.
func forEach(n, workers int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		})
	}
	wg.Wait()
}

// allocMeter reports allocations per sample over a benchmark's loop,
// counting every goroutine (the pipeline's stages included).
type allocMeter struct{ m0 runtime.MemStats }

func startAllocs() *allocMeter {
	a := &allocMeter{}
	runtime.ReadMemStats(&a.m0)
	return a
}

func (a *allocMeter) report(b *testing.B, samples int) {
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(m1.Mallocs-a.m0.Mallocs)/float64(samples), "allocs/sample")
	b.ReportMetric(float64(m1.TotalAlloc-a.m0.TotalAlloc)/float64(samples), "B/sample")
}

// BenchmarkImages compares, in one run, decode-only throughput with
// decode+augment (resize=256,crop=224 and the copy into a tensor, no
// pipeline) and with the whole conversion (that, plus fetching and writing
// the HDF5 shard), for both JPEG decoders at 1 and 2 workers: the pipeline
// should run close to the decoder's speed, and libjpeg-turbo well ahead of
// image/jpeg. Every case processes the same samples: each photo
// benchCopies times, decoded with the MinSide the recipe asks for, so
// decode-only for libjpeg-turbo is the DCT-scaled decode that convert
// does. Mpix/s counts stored (input) pixels, as BenchmarkDecode in
// media/imgdec does, so a scaled decode shows its saving.
//
// The ratios/workers=W cases time the four measures in turn inside one
// loop, so that other load on the machine slows them alike, and report
// the goals directly: x-vs-go, whole conversions per second with
// libjpeg-turbo over image/jpeg (goal ≥ 3), and x-of-decode,
// turbo conversions per second over turbo decodes per second (goal ≥ 0.8).
func BenchmarkImages(b *testing.B) {
	files, root := benchPhotos(b)
	recipe, err := augment.Parse("resize=256,crop=224")
	if err != nil {
		b.Fatal(err)
	}
	n := len(files) * benchCopies
	storedPix := func(i int) int64 {
		_, info, err := imgdec.Decode(files[i], imgdec.Options{Decoder: imgdec.DecoderGo})
		if err != nil {
			b.Fatal(err)
		}
		return int64(info.Width * info.Height)
	}
	var pixPerRound int64
	for i := range files {
		pixPerRound += storedPix(i) * benchCopies
	}
	isImage := func(key string) bool { return strings.HasSuffix(key, ".jpg") || strings.HasSuffix(key, ".png") }
	handler := func(h Handler) func(key string) Handler {
		return func(key string) Handler {
			if isImage(key) {
				return h
			}
			return nil
		}
	}
	l, err := ListSource(context.Background(), cloudsrc.Dir{Root: root}, isImage)
	if err != nil {
		b.Fatal(err)
	}
	if len(l.Entries) != len(files) {
		b.Fatalf("listed %d inputs, decode-only has %d", len(l.Entries), len(files))
	}
	type decoder struct {
		opt imgdec.Options
		h   Handler
	}
	decs := map[string]decoder{}
	for _, dec := range []string{"go", "turbo"} {
		opt := imgdec.Options{Decoder: dec, MinSide: recipe.MinSide()}
		decs[dec] = decoder{opt, NewScaledImageHandler(ImgdecDecoder(opt), imgdec.Release, recipe, recipe.MinSide())}
	}
	// One round of each measure: every photo benchCopies times.
	decodeOnly := func(b *testing.B, dec string, workers int) {
		forEach(n, workers, func(i int) {
			img, _, err := imgdec.Decode(files[i/benchCopies], decs[dec].opt)
			if err != nil {
				b.Error(err)
				return
			}
			imgdec.Release(img)
		})
	}
	augmentOnly := func(b *testing.B, dec string, workers int) {
		h := decs[dec].h
		forEach(n, workers, func(i int) {
			in := &Input{Key: "k", Data: files[i/benchCopies]}
			s, err := h.Samples(context.Background(), in, i%benchCopies, NewRand(0, in.Key, i))
			if err != nil {
				b.Error(err)
				return
			}
			h.(Recycler).Recycle(s)
		})
	}
	convertAll := func(b *testing.B, dec string, workers int) {
		b.StopTimer()
		sink, err := cloudsrc.NewLocalSink(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		_, _, err = Run(context.Background(), l, Options{
			Sink: sink, Format: hdf5.Format{}, Handler: handler(decs[dec].h), Recipe: recipe.String(),
			Copies: benchCopies, ItemsPerShard: n, Workers: workers, IOWorkers: 4,
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	for _, dec := range []string{"go", "turbo"} {
		for _, workers := range []int{1, 2} {
			for _, m := range []struct {
				name string
				f    func(*testing.B, string, int)
			}{{"decode-only", decodeOnly}, {"decode+augment", augmentOnly}, {"convert", convertAll}} {
				b.Run(fmt.Sprintf("%s/decoder=%s/workers=%d", m.name, dec, workers), func(b *testing.B) {
					am := startAllocs()
					for range b.N {
						m.f(b, dec, workers)
					}
					b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "img/s")
					b.ReportMetric(float64(pixPerRound)*float64(b.N)/1e6/b.Elapsed().Seconds(), "Mpix/s")
					am.report(b, n*b.N)
				})
			}
		}
	}
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("ratios/workers=%d", workers), func(b *testing.B) {
			var goConv, turboConv, turboDec time.Duration
			timed := func(d *time.Duration, f func(*testing.B, string, int), dec string) {
				t0 := time.Now()
				f(b, dec, workers)
				*d += time.Since(t0)
			}
			for range b.N {
				timed(&turboDec, decodeOnly, "turbo")
				timed(&turboConv, convertAll, "turbo")
				timed(&goConv, convertAll, "go")
			}
			b.ReportMetric(goConv.Seconds()/turboConv.Seconds(), "x-vs-go")
			b.ReportMetric(turboDec.Seconds()/turboConv.Seconds(), "x-of-decode")
			b.ReportMetric(float64(n*b.N)/turboConv.Seconds(), "turbo-img/s")
			b.ReportMetric(float64(n*b.N)/goConv.Seconds(), "go-img/s")
			b.ReportMetric(float64(n*b.N)/turboDec.Seconds(), "turbo-decode-img/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// TestRGBTensor checks rgbInto's copies on every path (scalar
// word-at-a-time, AVX2, AVX-512 VBMI) against the bytes, for widths of 1
// and more (around the AVX2 loop's 8 pixels and the VBMI loop's 16) and
// for sub-images (here, beside the benchmark that measures it). A path
// this CPU lacks skips (under CI too: it is hardware).
func TestRGBTensor(t *testing.T) {
	defer func(p rgbPath) { useRGB = p }(useRGB)
	for _, p := range rgbPaths {
		t.Run(p.String(), func(t *testing.T) {
			if p != rgbScalar {
				testenv.NeedSIMD(t, p.String(), cpuHasRGB(p))
			}
			useRGB = p
			for _, w := range []int{1, 2, 3, 5, 7, 8, 9, 10, 11, 12, 15, 16, 17, 23, 24, 25, 31, 32, 33, 48, 224} {
				img := image.NewNRGBA(image.Rect(0, 0, w+3, 4))
				for i := range img.Pix {
					img.Pix[i] = uint8(i*7 + i/5)
				}
				sub := img.SubImage(image.Rect(2, 1, w+2, 4)).(*image.NRGBA)
				got := RGBTensor(sub)
				var want []byte
				for y := 1; y < 4; y++ {
					for x := 2; x < w+2; x++ {
						c := img.NRGBAAt(x, y)
						want = append(want, c.R, c.G, c.B)
					}
				}
				if !bytes.Equal(got.Data, want) || fmt.Sprint(got.Shape) != fmt.Sprint([]int{3, w, 3}) {
					t.Errorf("width %d: RGB tensor %v %v, want %v", w, got.Shape, got.Data, want)
				}
			}
		})
	}
}

// BenchmarkRGBTensor copies a 224×224 sample into its tensor on each path
// this build and CPU run. "ratios" runs every path 100 times in each
// iteration, one after the other, and reports how many times faster than
// scalar each path is from each path's fastest iteration (on a shared
// machine, the others catch the bursts of load).
func BenchmarkRGBTensor(b *testing.B) {
	img := image.NewNRGBA(image.Rect(0, 0, 224, 224))
	for i := range img.Pix {
		img.Pix[i] = uint8(i*7 + i/5)
	}
	out := make([]byte, 224*224*3)
	shape := make([]int, 0, 3)
	defer func(p rgbPath) { useRGB = p }(useRGB)
	var paths []rgbPath
	for _, p := range rgbPaths {
		if cpuHasRGB(p) {
			paths = append(paths, p)
		}
	}
	for _, p := range paths {
		b.Run(p.String(), func(b *testing.B) {
			useRGB = p
			b.SetBytes(int64(len(out)))
			for b.Loop() {
				rgbInto(out, img, shape)
			}
		})
	}
	b.Run("ratios", func(b *testing.B) {
		best := make([]time.Duration, len(paths))
		for b.Loop() {
			for i, p := range paths {
				useRGB = p
				t0 := time.Now()
				for range 100 {
					rgbInto(out, img, shape)
				}
				if d := time.Since(t0); best[i] == 0 || d < best[i] {
					best[i] = d
				}
			}
		}
		for i, p := range paths[1:] {
			b.ReportMetric(best[0].Seconds()/best[i+1].Seconds(), "x-"+strings.ReplaceAll(p.String(), " ", "-"))
		}
		b.ReportMetric(0, "ns/op")
	})
}
