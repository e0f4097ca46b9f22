//go:build cgo

package imgdec

import (
	"bytes"
	"cmp"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkIsolation times decoding HEIC, AVIF and JPEG XL files in this
// process and in child processes (isolate.go), alternating, with 1 and 2
// decodes at once, and reports child time / in-process time. The files
// are 16 of the bench photos (scripts/benchphotos.py, out/benchphotos),
// evenly spread over their sizes, encoded once into out/bench-heif by
// heif-enc and cjxl. make bench runs it after making the photos.
func BenchmarkIsolation(b *testing.B) {
	photos, _ := filepath.Glob(filepath.Join("..", "..", "out", "benchphotos", "*", "*.jpg"))
	if len(photos) < 16 {
		b.Skip("no bench photos in out/benchphotos: run scripts/benchphotos.py (make bench does)")
	}
	sizes := map[string]int64{}
	for _, p := range photos {
		st, err := os.Stat(p)
		if err != nil {
			b.Fatal(err)
		}
		sizes[p] = st.Size()
	}
	slices.SortFunc(photos, func(x, y string) int { return cmp.Or(cmp.Compare(sizes[x], sizes[y]), cmp.Compare(x, y)) })
	var picked []string
	for i := range 16 {
		picked = append(picked, photos[i*(len(photos)-1)/15])
	}
	dir := filepath.Join("..", "..", "out", "bench-heif")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, f := range []struct {
		name, ext string
		enc       func(in, out string) []string
	}{
		{"heic", ".heic", func(in, out string) []string { return []string{"heif-enc", "-q", "85", in, "-o", out} }},
		{"avif", ".avif", func(in, out string) []string { return []string{"heif-enc", "-A", "-q", "70", in, "-o", out} }},
		{"jxl", ".jxl", func(in, out string) []string { return []string{"cjxl", in, out, "-d", "1"} }},
	} {
		var files [][]byte
		pix := 0
		for i, p := range picked {
			out := filepath.Join(dir, fmt.Sprintf("%02d%s", i, f.ext))
			if _, err := os.Stat(out); err != nil {
				// The encoders take the photo as an RGB PNG: heif-enc
				// refuses grey and CMYK JPEGs.
				img, _, err := Decode(readFile(b, p), Options{})
				if err != nil {
					b.Fatal(err)
				}
				rgb := filepath.Join(b.TempDir(), "rgb.png")
				var buf bytes.Buffer
				if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, img); err != nil {
					b.Fatal(err)
				}
				if err := os.WriteFile(rgb, buf.Bytes(), 0o644); err != nil {
					b.Fatal(err)
				}
				c := f.enc(rgb, out+".tmp")
				if msg, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
					b.Fatalf("%v: %v\n%s", c, err, msg)
				}
				if err := os.Rename(out+".tmp", out); err != nil {
					b.Fatal(err)
				}
			}
			data := readFile(b, out)
			img, info, err := Decode(data, Options{})
			if err != nil {
				b.Fatalf("%s (%s): %v", out, p, err)
			}
			Release(img)
			files = append(files, data)
			pix += info.Width * info.Height
		}
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/workers=%d", f.name, workers), func(b *testing.B) {
				// pass decodes every file once, split over workers goroutines.
				pass := func() time.Duration {
					start := time.Now()
					var wg sync.WaitGroup
					for w := range workers {
						wg.Go(func() {
							for i := w; i < len(files); i += workers {
								img, _, err := Decode(files[i], Options{})
								if err != nil {
									b.Error(err)
									return
								}
								Release(img)
							}
						})
					}
					wg.Wait()
					return time.Since(start)
				}
				Isolate()
				pool := isolation.Load()
				pass() // start the children
				isolation.Store(nil)
				pass() // warm this process's decoders
				var in, child time.Duration
				for range b.N * 3 {
					in += pass()
					isolation.Store(pool)
					child += pass()
					isolation.Store(nil)
				}
				pool.close()
				n := float64(b.N * 3 * len(files))
				b.ReportMetric(n/in.Seconds(), "img/s-in-process")
				b.ReportMetric(n/child.Seconds(), "img/s-child")
				b.ReportMetric(float64(b.N*3*pix)/child.Seconds()/1e6, "Mpix/s-child")
				b.ReportMetric(child.Seconds()/in.Seconds(), "child/in-process")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
