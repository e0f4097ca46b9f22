package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/prep-dev/prep/bench/gpu"
	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/hdf5"
	"github.com/prep-dev/prep/formats/tarshard"
)

// feedStats are a reader's busy times.
type feedStats struct {
	read, decode, assemble time.Duration
	fileBytes, decoded     int64
	samples                int
}

// feedReaders runs opt.Readers readers over the shards; each streams one
// shard at a time into slots it takes from free and sends to full, and
// sends a shard's last, partial batch before starting the next shard.
func feedReaders(ctx context.Context, shards []Shard, opt *FeedOptions, dev gpu.Device, free <-chan *slot, full chan<- *slot, bufs [][]byte, stats []feedStats) error {
	g, ctx := errgroup.WithContext(ctx)
	var mu sync.Mutex
	next := 0
	for w := range stats {
		g.Go(func() error {
			st, buf := &stats[w], bufs[w]
			var lib []byte
			var ts tarshard.Scanner // kept from shard to shard, as bench-read's readers keep theirs
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(shards) {
					return nil
				}
				a := assembler{ctx: ctx, dev: dev, free: free, full: full, shard: i, st: st}
				var err error
				if shards[i].Format == Tar {
					err = feedTar(ctx, &shards[i], opt, buf, &ts, &a, st)
				} else {
					err = feedHDF5(&shards[i], opt, buf, &lib, &a, st)
				}
				if err != nil {
					return err
				}
				if err := a.flush(); err != nil {
					return err
				}
			}
		})
	}
	return g.Wait()
}

func feedHDF5(s *Shard, opt *FeedOptions, buf []byte, lib *[]byte, a *assembler, st *feedStats) error {
	d := s.dataset(formats.DataField)
	st.samples += s.Count
	if d.Offset < 0 {
		// Chunked: only the library can read it.
		if l := logicalSize(*d); l != d.Size {
			return fmt.Errorf("%s: dataset data is chunked with %d bytes stored for %d: feed-test needs contiguous data (rewrite with prep convert)", s.Path, d.Size, l)
		}
		if int64(cap(*lib)) < d.Size {
			*lib = newBuffer(int(d.Size))
		}
		t := time.Now()
		// Equal sizes (checked above): elements and stored bytes agree.
		if err := hdf5.ReadDataset(s.Path, d.Name, (*lib)[:d.Size]); err != nil {
			return err
		}
		st.read += time.Since(t)
		st.fileBytes += d.Size
		return a.write((*lib)[:d.Size])
	}
	f, err := openFile(s.Path, opt.Direct)
	if err != nil {
		return err
	}
	defer f.Close()
	sp := f.span(buf, d.Offset, d.Size)
	err = sp.each(a.write)
	st.read += sp.readTime
	st.fileBytes += sp.read
	return err
}

func feedTar(ctx context.Context, s *Shard, opt *FeedOptions, buf []byte, ts *tarshard.Scanner, a *assembler, st *feedStats) error {
	f, err := openFile(s.Path, opt.Direct)
	if err != nil {
		return err
	}
	defer f.Close()
	sp := f.span(buf, 0, s.Bytes)
	err = ts.Scan(sp, func(key string, m map[string][]byte) error {
		t := time.Now()
		smp, err := tarshard.Decode(key, m)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Path, err)
		}
		st.decode += time.Since(t)
		data := smp.Fields[0].Data
		st.decoded += int64(len(data))
		st.samples++
		return a.write(data)
	})
	st.read += sp.readTime
	st.fileBytes += sp.read
	if err != nil {
		return fmt.Errorf("%s: %w", s.Path, err)
	}
	return ctx.Err()
}
