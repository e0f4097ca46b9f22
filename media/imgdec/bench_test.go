//go:build cgo

package imgdec

import (
	"image"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

type photo struct {
	data []byte
	pix  int // stored width × height
}

func loadPhotos(b *testing.B) []photo {
	var ps []photo
	for _, path := range jpegPhotos(b) {
		data := readFile(b, path)
		_, info, err := Decode(data, Options{Decoder: DecoderGo})
		if err != nil {
			b.Fatal(err)
		}
		ps = append(ps, photo{data, info.Width * info.Height})
	}
	return ps
}

// reportRates turns "one op = every photo once" into img/s and stored Mpix/s.
func reportRates(b *testing.B, ps []photo, elapsed time.Duration) {
	pix := 0
	for _, p := range ps {
		pix += p.pix
	}
	s := elapsed.Seconds()
	b.ReportMetric(float64(b.N*len(ps))/s, "img/s")
	b.ReportMetric(float64(b.N*pix)/s/1e6, "Mpix/s")
	b.ReportMetric(0, "ns/op")
}

var decodeModes = []struct {
	name    string
	opt     Options
	release bool
}{
	{"go", Options{Decoder: DecoderGo}, false},
	{"go/pooled", Options{Decoder: DecoderGo}, true},
	{"turbo", Options{Decoder: DecoderTurbo}, false},
	{"turbo/pooled", Options{Decoder: DecoderTurbo}, true},
	{"turbo-scaled224", Options{Decoder: DecoderTurbo, MinSide: 224}, false},
	{"turbo-scaled224/pooled", Options{Decoder: DecoderTurbo, MinSide: 224}, true},
	{"turbo-scaled224-gap1/pooled", Options{Decoder: DecoderTurbo, MinSide: 224, ReducingGap: 1}, true},
	{"turbo-scaled224-gap2/pooled", Options{Decoder: DecoderTurbo, MinSide: 224, ReducingGap: 2}, true},
}

// BenchmarkDecode is decode only, over the JPEG photos in testdata/images.
// Mpix/s counts stored pixels, so scaled decodes show their saving.
func BenchmarkDecode(b *testing.B) {
	ps := loadPhotos(b)
	for _, m := range decodeModes {
		b.Run(m.name, func(b *testing.B) {
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				for _, p := range ps {
					img, _, err := Decode(p.data, m.opt)
					if err != nil {
						b.Fatal(err)
					}
					if m.release {
						Release(img)
					}
				}
			}
			reportRates(b, ps, time.Since(start))
		})
	}
}

// BenchmarkWorkers runs decode (+ resize) in N worker goroutines, the way
// convert's CPU stage does. imaging.Resize fans each call out over GOMAXPROCS
// goroutines; run with -cpu 1,2 and compare how each stage scales: with
// perfect scaling, workers=2 at -cpu 2 doubles workers=1 at -cpu 1.
func BenchmarkWorkers(b *testing.B) {
	ps := loadPhotos(b)
	opt := Options{Decoder: DecoderTurbo, MinSide: 224}
	for _, stage := range []string{"decode", "decode+resize", "resize"} {
		for _, workers := range []int{1, 2} {
			b.Run(stage+"/workers="+strconv.Itoa(workers), func(b *testing.B) {
				var decoded []*image.NRGBA
				if stage == "resize" {
					for _, p := range ps {
						img, _, _ := Decode(p.data, opt)
						decoded = append(decoded, img)
					}
				}
				cpu0 := cpuTime()
				start := time.Now()
				for b.Loop() {
					var next atomic.Int64
					var wg sync.WaitGroup
					for w := 0; w < workers; w++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for i := int(next.Add(1) - 1); i < len(ps); i = int(next.Add(1) - 1) {
								if stage == "resize" {
									resizeShorter(decoded[i], 224)
									continue
								}
								img, _, err := Decode(ps[i].data, opt)
								if err != nil {
									panic(err)
								}
								if stage == "decode+resize" {
									resizeShorter(img, 224)
								}
								Release(img)
							}
						}()
					}
					wg.Wait()
				}
				reportRates(b, ps, time.Since(start))
				// CPU time per image shows the cost of fan-out (spinning,
				// waking goroutines) even when other processes steal cores.
				b.ReportMetric((cpuTime()-cpu0).Seconds()*1e3/float64(b.N*len(ps)), "cpu-ms/img")
				b.ReportMetric(float64(runtime.GOMAXPROCS(0)), "procs")
			})
		}
	}
}

// cpuTime is the user + system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRatio runs every decoder on every photo in turn, inside the
// same loop, so that a busy machine slows all of them alike and the reported
// ratios to image/jpeg stay meaningful. Buffers are released (pooled). The
// decode+resize stage adds the pipeline's resize=224 (Catmull-Rom).
func BenchmarkRatio(b *testing.B) {
	ps := loadPhotos(b)
	modes := []struct {
		name string
		opt  Options
	}{
		{"go", Options{Decoder: DecoderGo}},
		{"turbo", Options{Decoder: DecoderTurbo}},
		{"turbo224", Options{Decoder: DecoderTurbo, MinSide: 224}},
		{"turbo224gap1", Options{Decoder: DecoderTurbo, MinSide: 224, ReducingGap: 1}},
		{"turbo224gap2", Options{Decoder: DecoderTurbo, MinSide: 224, ReducingGap: 2}},
	}
	pix := 0
	for _, p := range ps {
		pix += p.pix
	}
	for _, stage := range []string{"decode", "decode+resize"} {
		b.Run(stage, func(b *testing.B) {
			spent := make([]time.Duration, len(modes))
			for b.Loop() {
				for _, p := range ps {
					for i, m := range modes {
						t0 := time.Now()
						img, _, err := Decode(p.data, m.opt)
						if err != nil {
							b.Fatal(err)
						}
						if stage == "decode+resize" {
							resizeShorter(img, 224)
						}
						spent[i] += time.Since(t0)
						Release(img)
					}
				}
			}
			for i, m := range modes {
				if stage == "decode" {
					b.ReportMetric(float64(b.N*pix)/spent[i].Seconds()/1e6, m.name+"-Mpix/s")
				} else {
					b.ReportMetric(float64(b.N*len(ps))/spent[i].Seconds(), m.name+"-img/s")
				}
				if i > 0 {
					b.ReportMetric(spent[0].Seconds()/spent[i].Seconds(), m.name+"/go")
				}
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkDecodePNG is decode only over the PNG photos in
// testdata/images: image/png against libpng, which the turbo decoder uses
// for PNG, into a pooled image.
func BenchmarkDecodePNG(b *testing.B) {
	var ps []photo
	paths, _ := filepath.Glob(filepath.Join(imagesDir, "*", "*.png"))
	for _, path := range paths {
		data := readFile(b, path)
		_, info, err := Decode(data, Options{Decoder: DecoderGo})
		if err != nil {
			b.Fatal(err)
		}
		ps = append(ps, photo{data, info.Width * info.Height})
	}
	if len(ps) == 0 {
		b.Fatal("no PNG photos")
	}
	for _, m := range []string{DecoderGo, DecoderTurbo} {
		b.Run(m+"/pooled", func(b *testing.B) {
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				for _, p := range ps {
					img, _, err := Decode(p.data, Options{Decoder: m})
					if err != nil {
						b.Fatal(err)
					}
					Release(img)
				}
			}
			reportRates(b, ps, time.Since(start))
		})
	}
}
