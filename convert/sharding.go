package convert

import (
	"context"
	"fmt"
	"runtime"

	"github.com/prep-dev/prep/formats/manifest"
)

// plan fixes the number of items per shard and this task's share.
func (r *run) plan(ctx context.Context, prior *manifest.Manifest) error {
	switch {
	case r.opt.ItemsPerShard > 0:
		r.perShard = r.opt.ItemsPerShard
	case prior != nil && prior.ItemsPerShard > 0:
		r.perShard = prior.ItemsPerShard
	default:
		n, err := r.probe(ctx)
		if err != nil {
			return err
		}
		r.perShard = n
		// The probe's sample is garbage now, but a collection would come
		// only after the pipeline has allocated as much again: for one
		// large sample (a 2 GB .npz member) that doubled the peak.
		runtime.GC()
	}
	r.nShards = (r.items + r.perShard - 1) / r.perShard
	r.layout = newLayout(r.opt.Order, len(r.l.Entries), r.opt.Copies, r.perShard, r.opt.Seed)
	r.first, r.end = TaskShards(r.nShards, r.opt.TaskIndex, r.opt.TaskCount)
	r.lo = min(r.first*r.perShard, r.items)
	r.hi = min(r.end*r.perShard, r.items)
	return nil
}

// TaskShards splits n shards into count contiguous runs and returns task
// index's run [first, end).
func TaskShards(n, index, count int) (first, end int) {
	return n * index / count, n * (index + 1) / count
}

// probe derives how many items fill a shard (ItemsPerShard).
func (r *run) probe(ctx context.Context) (int, error) {
	return ItemsPerShard(ctx, r.l, r.opt.Handler, r.opt.Seed, r.opt.ShardSize)
}

// ItemsPerShard converts the first convertible input to learn a sample's
// size and derives how many items fill a shard of shardSize bytes, as a
// run without --items-per-shard does; every task of a distributed run
// probes the same input, so all agree on the shard boundaries.
func ItemsPerShard(ctx context.Context, l *Listing, handler func(key string) Handler, seed uint64, shardSize int64) (int, error) {
	var lastErr error
	for i := 0; i < len(l.Entries) && i < 32; i++ {
		e := l.Entries[i]
		in, err := fetch(ctx, e, handler(e.Key))
		if err != nil {
			if IsFatal(err) {
				return 0, err
			}
			lastErr = fmt.Errorf("%s: %w", e.Key, err)
			continue
		}
		samples, err := handler(e.Key).Samples(ctx, in, 0, NewRand(seed, e.Key, 0))
		if err != nil {
			if IsFatal(err) {
				return 0, err
			}
			lastErr = fmt.Errorf("%s: %w", e.Key, err)
			continue
		}
		var size int64
		for i := range samples {
			size += samples[i].Bytes()
		}
		if size == 0 {
			continue
		}
		return int(max(1, shardSize/size)), nil
	}
	if lastErr != nil {
		return 0, fmt.Errorf("none of the first inputs could be converted (fix or remove them); last error: %w", lastErr)
	}
	return 1024, nil
}
