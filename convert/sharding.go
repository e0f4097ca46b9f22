package convert

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"

	"github.com/prep-dev/prep/formats"
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
		p, err := probeItems(ctx, r.l, r.opt.Handler, r.opt.Order, r.opt.Seed, r.opt.ShardSize, r.opt.MemoryBudget)
		if err != nil {
			return err
		}
		r.perShard = p.perShard
		r.probed.Store(&p) // until keepProbed decides
	}
	r.nShards = (r.items + r.perShard - 1) / r.perShard
	r.layout = newLayout(r.opt.Order, len(r.l.Entries), r.opt.Copies, r.perShard, r.opt.Seed)
	r.first, r.end = TaskShards(r.nShards, r.opt.TaskIndex, r.opt.TaskCount)
	r.lo = min(r.first*r.perShard, r.items)
	r.hi = min(r.end*r.perShard, r.items)
	return nil
}

// probedItem is what the probe converted: copy 0 of entry index.
type probedItem struct {
	perShard int
	index    int // -1 when no input converted
	samples  []formats.Sample
}

// keepProbed keeps the probe's samples (plan) for the decode stage when
// they are the item at this task's first position, the first the
// pipeline converts, and not in a shard resume kept: a long video or a
// large .npz member is then not converted twice (with 4 videos, a
// quarter of the run). Anywhere else they would be held for the whole
// run, so they are dropped.
func (r *run) keepProbed() {
	p := r.probed.Load()
	if p == nil {
		return
	}
	_, kept := r.keep[r.lo/r.perShard]
	if e, c := r.layout.item(r.lo); p.index >= 0 && r.lo < r.hi && !kept && e == p.index && c == 0 {
		return
	}
	r.probed.Store(nil)
	// The probe's samples are garbage now, but a collection would come
	// only after the pipeline has allocated as much again: for one large
	// sample (a 2 GB .npz member) that doubled the peak.
	runtime.GC()
}

// takeProbed returns the probe's samples if t is the item they are, once.
func (r *run) takeProbed(t task) ([]formats.Sample, bool) {
	p := r.probed.Load()
	if p == nil || p.index != t.j.index || t.c != 0 || !r.probed.CompareAndSwap(p, nil) {
		return nil, false
	}
	return p.samples, true
}

// TaskShards splits n shards into count contiguous runs and returns task
// index's run [first, end).
func TaskShards(n, index, count int) (first, end int) {
	return n * index / count, n * (index + 1) / count
}

// ItemsPerShard converts the first convertible input in plan order (of
// the first round, when shuffled) to learn a sample's size and derives
// how many items fill a shard of shardSize bytes, as a run without
// --items-per-shard does; every task of a distributed run probes the
// same input, so all agree on the shard boundaries.
func ItemsPerShard(ctx context.Context, l *Listing, handler func(key string) Handler, order Order, seed uint64, shardSize int64) (int, error) {
	p, err := probeItems(ctx, l, handler, order, seed, shardSize, DefaultMemoryBudget)
	return p.perShard, err
}

// probeItems is ItemsPerShard, with the samples it converted. It goes in
// plan order, so that the input it converts is usually the one the run
// writes first, which can then take these samples (keepProbed). The
// first round's order does not depend on the items per shard it is to
// find (layout.separate reorders later rounds only). An Emitter's samples
// are kept only while they fit in budget (probeEmit).
func probeItems(ctx context.Context, l *Listing, handler func(key string) Handler, order Order, seed uint64, shardSize, budget int64) (probedItem, error) {
	var perm []int32
	if order == OrderShuffle {
		perm = permutation(len(l.Entries), seed, 0)
	}
	var lastErr error
	for k := 0; k < len(l.Entries) && k < 32; k++ {
		i := k
		if perm != nil {
			i = int(perm[k])
		}
		e := l.Entries[i]
		in, err := fetch(ctx, e, handler(e.Key))
		if err != nil {
			if IsFatal(err) {
				return probedItem{}, err
			}
			lastErr = fmt.Errorf("%s: %w", e.Key, err)
			continue
		}
		samples, size, err := probeConvert(ctx, handler(e.Key), in, seed, shardSize, budget)
		if err != nil {
			if IsFatal(err) {
				return probedItem{}, err
			}
			lastErr = fmt.Errorf("%s: %w", e.Key, err)
			continue
		}
		if size == 0 {
			continue
		}
		p := probedItem{perShard: int(max(1, shardSize/size)), index: i, samples: samples}
		if samples == nil {
			p.index = -1 // not kept: nothing for the run to take
		}
		return p, nil
	}
	if lastErr != nil {
		return probedItem{}, fmt.Errorf("none of the first inputs could be converted (fix or remove them); last error: %w", lastErr)
	}
	return probedItem{perShard: 1024, index: -1}, nil
}

// probeConvert converts copy 0 of in as a run would and returns its
// samples' bytes: an Emitter's through probeEmit (samples nil unless it
// kept them all), any other input whole.
func probeConvert(ctx context.Context, h Handler, in *Input, seed uint64, shardSize, budget int64) ([]formats.Sample, int64, error) {
	if em, ok := h.(Emitter); ok {
		samples, size, err := probeEmit(ctx, em, in, NewRand(seed, in.Key, 0), shardSize, budget)
		if !errors.Is(err, errWhole) {
			return samples, size, err
		}
	}
	samples, err := h.Samples(ctx, in, 0, NewRand(seed, in.Key, 0))
	var size int64
	for _, s := range samples {
		size += s.Bytes()
	}
	return samples, size, err
}

// errProbeDone stops an Emitter once the probe knows enough.
var errProbeDone = errors.New("probe done")

// probeEmit converts an Emitter's input for the probe: it adds up the
// bytes of its samples, keeping them while they fit in budget, and stops
// as soon as they reach shardSize, where the rest cannot change the
// answer (one item a shard): a long video is neither held whole nor
// decoded whole. kept is nil unless every sample was kept.
func probeEmit(ctx context.Context, em Emitter, in *Input, rng *rand.Rand, shardSize, budget int64) (kept []formats.Sample, size int64, err error) {
	rc, _ := em.(Recycler)
	whole := true
	err = em.Emit(ctx, in, 0, rng, func(s formats.Sample) error {
		size += s.Bytes()
		if whole && size <= budget {
			kept = append(kept, s)
		} else {
			if rc != nil {
				rc.Recycle(append(kept, s))
			}
			kept, whole = nil, false
		}
		if size >= shardSize {
			return errProbeDone
		}
		return nil
	})
	if errors.Is(err, errProbeDone) {
		err = nil
		if kept != nil { // the input's first samples only
			if rc != nil {
				rc.Recycle(kept)
			}
			kept = nil
		}
	}
	if err != nil {
		return nil, 0, err
	}
	return kept, size, nil
}
