package convert

import (
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

	"github.com/prep-dev/prep/augment"
	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/formats/hdf5"
	"github.com/prep-dev/prep/formats/imgdec"
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
// benchCopies times, decoded with the MinSide the recipe asks for.
func BenchmarkImages(b *testing.B) {
	files, root := benchPhotos(b)
	recipe, err := augment.Parse("resize=256,crop=224")
	if err != nil {
		b.Fatal(err)
	}
	n := len(files) * benchCopies
	for _, dec := range []string{"go", "turbo"} {
		opt := imgdec.Options{Decoder: dec, MinSide: recipe.MinSide()}
		decode := func(data []byte, minSide int) (*image.NRGBA, error) {
			o := opt
			o.MinSide = minSide
			img, _, err := imgdec.Decode(data, o)
			return img, err
		}
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("decode-only/decoder=%s/workers=%d", dec, workers), func(b *testing.B) {
				var pix atomic.Int64
				am := startAllocs()
				for range b.N {
					forEach(n, workers, func(i int) {
						img, _, err := imgdec.Decode(files[i/benchCopies], opt)
						if err != nil {
							b.Error(err)
							return
						}
						pix.Add(int64(img.Rect.Dx() * img.Rect.Dy()))
						imgdec.Release(img)
					})
				}
				b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "img/s")
				b.ReportMetric(float64(pix.Load())/1e6/b.Elapsed().Seconds(), "Mpix/s")
				am.report(b, n*b.N)
			})
			h := NewImageHandler(decode, imgdec.Release, recipe, recipe.MinSide())
			b.Run(fmt.Sprintf("decode+augment/decoder=%s/workers=%d", dec, workers), func(b *testing.B) {
				am := startAllocs()
				for range b.N {
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
				b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "img/s")
				am.report(b, n*b.N)
			})
			b.Run(fmt.Sprintf("convert/decoder=%s/workers=%d", dec, workers), func(b *testing.B) {
				handler := func(key string) Handler {
					if strings.HasSuffix(key, ".jpg") || strings.HasSuffix(key, ".png") {
						return h
					}
					return nil
				}
				l, err := ListSource(context.Background(), cloudsrc.Dir{Root: root}, func(k string) bool { return handler(k) != nil })
				if err != nil {
					b.Fatal(err)
				}
				if len(l.Entries) != len(files) {
					b.Fatalf("listed %d inputs, decode-only has %d", len(l.Entries), len(files))
				}
				am := startAllocs()
				for range b.N {
					b.StopTimer()
					sink, err := cloudsrc.NewLocalSink(b.TempDir())
					if err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					_, _, err = Run(context.Background(), l, Options{
						Sink: sink, Format: hdf5.Format{}, Handler: handler, Recipe: recipe.String(),
						Copies: benchCopies, ItemsPerShard: n, Workers: workers, IOWorkers: 4,
					})
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "img/s")
				b.ReportMetric(float64(n*224*224*3*b.N)/1e6/b.Elapsed().Seconds(), "MB/s")
				am.report(b, n*b.N)
			})
		}
	}
}
