package convert

import (
	"context"
	"fmt"
	"image"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prep-dev/prep/augment"
	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/formats/hdf5"
	"github.com/prep-dev/prep/formats/imgdec"
)

// benchPhotos loads the testdata photos.
func benchPhotos(b *testing.B) (map[string][]byte, string) {
	b.Helper()
	root := "../testdata/images"
	files := map[string][]byte{}
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			data, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(root, p)
			files[filepath.ToSlash(rel)] = data
		}
		return nil
	})
	if len(files) == 0 {
		b.Fatal("no testdata photos")
	}
	return files, root
}

const benchCopies = 8

// BenchmarkImages compares, in one run, decode-only throughput with the
// whole conversion (decode, resize=256,crop=224, write HDF5) for both JPEG
// decoders at 1 and 2 workers: the pipeline should run close to the
// decoder's speed, and libjpeg-turbo well ahead of image/jpeg.
func BenchmarkImages(b *testing.B) {
	files, root := benchPhotos(b)
	recipe, err := augment.Parse("resize=256,crop=224")
	if err != nil {
		b.Fatal(err)
	}
	n := len(files) * benchCopies
	for _, dec := range []string{"go", "turbo"} {
		opt := imgdec.Options{Decoder: dec, MinSide: recipe.MinSide()}
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("decode-only/decoder=%s/workers=%d", dec, workers), func(b *testing.B) {
				var mpix float64
				for range b.N {
					var wg sync.WaitGroup
					var mu sync.Mutex
					next := 0
					for range workers {
						wg.Go(func() {
							for {
								mu.Lock()
								i := next
								next++
								mu.Unlock()
								if i >= n {
									return
								}
								var data []byte
								j := 0
								for _, d := range files {
									if j == i%len(files) {
										data = d
										break
									}
									j++
								}
								img, _, err := imgdec.Decode(data, opt)
								if err != nil {
									b.Error(err)
									return
								}
								mu.Lock()
								mpix += float64(img.Bounds().Dx()*img.Bounds().Dy()) / 1e6
								mu.Unlock()
								imgdec.Release(img)
							}
						})
					}
					wg.Wait()
				}
				b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "img/s")
			})
			b.Run(fmt.Sprintf("convert/decoder=%s/workers=%d", dec, workers), func(b *testing.B) {
				h := NewImageHandler(func(data []byte, minSide int) (*image.NRGBA, error) {
					o := opt
					o.MinSide = minSide
					img, _, err := imgdec.Decode(data, o)
					return img, err
				}, imgdec.Release, recipe, recipe.MinSide())
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
				b.ReportAllocs()
				for range b.N {
					b.StopTimer()
					sink, _ := cloudsrc.NewLocalSink(b.TempDir())
					b.StartTimer()
					_, _, err := Run(context.Background(), l, Options{
						Sink: sink, Format: hdf5.Format{}, Handler: handler, Recipe: recipe.String(),
						Copies: benchCopies, ItemsPerShard: n, Workers: workers, IOWorkers: 4,
					})
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "img/s")
				b.ReportMetric(float64(n*224*224*3*b.N)/1e6/b.Elapsed().Seconds(), "MB/s")
			})
		}
	}
}
