package convert

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/cloudsrc/gcstest"
	"github.com/prep-dev/prep/formats/hdf5"
	"github.com/prep-dev/prep/media/imgdec"
)

// BenchmarkGCSConvert converts 2,000 small images from a bucket behind a
// proxy that adds 20 ms to every request, as a far bucket does, at
// --io-workers 1 and 64: the time a pipeline over many small objects
// spends is latency, which only requests in flight hide.
func BenchmarkGCSConvert(b *testing.B) {
	const n = 2000
	objs := make([]gcstest.Object, n)
	for i := range objs {
		img := image.NewNRGBA(image.Rect(0, 0, 32, 32))
		for p := range img.Pix {
			img.Pix[p] = uint8(i + p)
		}
		img.Set(0, 0, color.NRGBA{A: 255})
		var buf bytes.Buffer
		if err := png.Encode(&buf, img); err != nil {
			b.Fatal(err)
		}
		objs[i] = gcstest.Object{Bucket: "bench", Name: fmt.Sprintf("img/class%d/%05d.png", i%2, i), Data: buf.Bytes()}
	}
	srv := gcstest.NewServer(b, objs...)
	srv.Use(b, &gcstest.Proxy{Delay: 20 * time.Millisecond})
	ctx := context.Background()
	src, err := cloudsrc.OpenSource(ctx, "gs://bench/img")
	if err != nil {
		b.Fatal(err)
	}
	h := NewImageHandler(func(data []byte, minSide int) (*image.NRGBA, error) {
		img, _, err := imgdec.Decode(data, imgdec.Options{MinSide: minSide})
		return img, err
	}, imgdec.Release, nil, 0)
	handler := func(key string) Handler {
		if strings.HasSuffix(key, ".png") {
			return h
		}
		return nil
	}
	l, err := ListSource(ctx, src, func(k string) bool { return handler(k) != nil })
	if err != nil {
		b.Fatal(err)
	}
	for _, io := range []int{1, 64} {
		b.Run(fmt.Sprintf("io-workers=%d", io), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				sink, _ := cloudsrc.NewLocalSink(b.TempDir())
				b.StartTimer()
				sum, _, err := Run(ctx, l, Options{Sink: sink, Format: hdf5.Format{}, Handler: handler,
					Copies: 1, ItemsPerShard: 500, Workers: 2, IOWorkers: io})
				if err != nil {
					b.Fatal(err)
				}
				if sum.Samples != n {
					b.Fatalf("%d samples, want %d", sum.Samples, n)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "objects/s")
		})
	}
}
