package cloudsrc_test

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/cloudsrc/gcstest"
)

// BenchmarkGCSFetch reads 2,000 small objects through a proxy that adds
// 20 ms to every request, as a far bucket would, with 1 and with 64
// fetchers: with latency, not bandwidth, the limit, throughput should grow
// with the requests in flight (the pipeline's --io-workers).
func BenchmarkGCSFetch(b *testing.B) {
	const n = 2000
	objs := make([]gcstest.Object, n)
	for i := range objs {
		objs[i] = gcstest.Object{Bucket: "bench", Name: fmt.Sprintf("img/%05d.jpg", i), Data: data(uint64(i), 4096)}
	}
	srv := gcstest.NewServer(b, objs...)
	srv.Use(b, &gcstest.Proxy{Delay: 20 * time.Millisecond})
	ctx := context.Background()
	src, err := cloudsrc.OpenSource(ctx, "gs://bench/img")
	if err != nil {
		b.Fatal(err)
	}
	list, err := src.List(ctx)
	if err != nil || len(list) != n {
		b.Fatalf("listed %d objects (%v), want %d", len(list), err, n)
	}
	for _, fetchers := range []int{1, 64} {
		b.Run(fmt.Sprintf("fetchers=%d", fetchers), func(b *testing.B) {
			for b.Loop() {
				keys := make(chan string)
				var wg sync.WaitGroup
				errs := make(chan error, fetchers)
				for range fetchers {
					wg.Go(func() {
						for k := range keys {
							rc, err := src.Open(ctx, k)
							if err == nil {
								_, err = io.Copy(io.Discard, rc)
								rc.Close()
							}
							if err != nil {
								select {
								case errs <- err:
								default:
								}
							}
						}
					})
				}
				for _, o := range list {
					keys <- o.Key
				}
				close(keys)
				wg.Wait()
				close(errs)
				if err := <-errs; err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "objects/s")
		})
	}
}
