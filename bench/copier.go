package bench

import (
	"context"
	"crypto/sha256"
	"hash"
	"time"

	"github.com/prep-dev/prep/bench/gpu"
)

// copier takes full slots from the ring, queues each one's copy to the
// device on the ring's stream, and puts the slot back in free with its
// copy in flight: the reader that takes it next waits on its event.
type copier struct {
	ring     *ring
	progress func(n int64) // FeedOptions.Progress
	// hashes holds the sha256 of the bytes copied back from the device,
	// by shard index; nil unless verifying.
	hashes  map[int]hash.Hash
	bytes   int64
	batches int
}

func newCopier(r *ring, opt *FeedOptions) *copier {
	c := &copier{ring: r, progress: opt.Progress}
	if opt.Verify {
		c.hashes = make(map[int]hash.Hash)
	}
	return c
}

// run copies until full is closed and the last copy has landed.
func (c *copier) run(ctx context.Context) error {
	r := c.ring
	var scratch []byte
	if c.hashes != nil {
		scratch = make([]byte, r.size)
	}
	for k := 0; ; k++ {
		var s *slot
		select {
		case s = <-r.full:
		case <-ctx.Done():
			return ctx.Err()
		}
		if s == nil {
			// The run ends when the last copy has landed.
			return r.dev.Sync(r.stream)
		}
		d := r.devBufs[k%len(r.devBufs)]
		if err := r.dev.CopyHtoDAsync(d, s.host[:s.n], r.stream); err != nil {
			return err
		}
		if err := r.dev.Record(s.ev, r.stream); err != nil {
			return err
		}
		if c.hashes != nil {
			if err := c.verify(s, d, scratch); err != nil {
				return err
			}
		}
		c.bytes += int64(s.n)
		c.batches++
		if c.progress != nil {
			c.progress(int64(s.n))
		}
		// Back in the ring with its copy in flight; the reader that
		// takes it waits on s.ev.
		r.free <- s
	}
}

// verify waits for s's copy to d, copies it back into scratch and adds it
// to the hash of s's shard.
func (c *copier) verify(s *slot, d gpu.DevicePtr, scratch []byte) error {
	dev := c.ring.dev
	if err := dev.Wait(s.ev); err != nil {
		return err
	}
	if err := dev.CopyDtoH(scratch[:s.n], d); err != nil {
		return err
	}
	if c.hashes[s.shard] == nil {
		c.hashes[s.shard] = sha256.New()
	}
	c.hashes[s.shard].Write(scratch[:s.n])
	return nil
}

// linkSpeed copies one pinned buffer to the device repeatedly, about
// 256 MiB in all, and returns GB/s.
func linkSpeed(dev gpu.Device, host []byte, d gpu.DevicePtr, s gpu.Stream) (float64, error) {
	reps := min(max(256<<20/len(host), 4), 1000)
	// One untimed copy: the first touches the driver's lazy setup.
	if err := dev.CopyHtoDAsync(d, host, s); err != nil {
		return 0, err
	}
	if err := dev.Sync(s); err != nil {
		return 0, err
	}
	start := time.Now()
	for range reps {
		if err := dev.CopyHtoDAsync(d, host, s); err != nil {
			return 0, err
		}
	}
	if err := dev.Sync(s); err != nil {
		return 0, err
	}
	return float64(reps*len(host)) / time.Since(start).Seconds() / 1e9, nil
}
