package bench

import (
	"context"
	"testing"
)

// BenchmarkReadShard compares, on one 120 MB HDF5 shard of 224×224×3
// images, the loader's reads (datasets at their offsets) with plain reads
// of the whole file, through the page cache (warm after the first
// iteration) and with O_DIRECT, and with reads through the HDF5 library.
// MB/s of prep over MB/s of raw is the efficiency bench-read reports.
func BenchmarkReadShard(b *testing.B) {
	dir := b.TempDir()
	writeHDF5(b, dir, 1, 800, 224, 224)
	shards := findShards(b, dir)
	s := &shards[0]
	var payload int64
	for _, d := range s.Datasets {
		payload += d.Size
	}
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		opt  ReadOptions
		raw  bool
	}{
		{"raw", ReadOptions{}, true},
		{"prep", ReadOptions{}, false},
		{"raw-direct", ReadOptions{Direct: true}, true},
		{"prep-direct", ReadOptions{Direct: true}, false},
		{"prep-via-hdf5", ReadOptions{Via: ViaHDF5}, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			opt := bc.opt
			if err := opt.defaults(); err != nil {
				b.Fatal(err)
			}
			r := &reader{opt: &opt, buf: newBuffer(opt.Chunk)}
			var out ShardRead
			if bc.raw {
				b.SetBytes(s.Bytes)
			} else {
				b.SetBytes(payload)
			}
			for b.Loop() {
				var err error
				if bc.raw {
					err = r.raw(ctx, s, &out)
				} else {
					err = r.prep(ctx, 0, s, &out)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadShardPaired does a raw and a prep read of the same shard
// in every iteration, in alternating order, so both see the same machine
// load, and reports their speed ratio as the prep/raw metric (the goal:
// ≥ 0.95 cached, ≥ 0.9 with O_DIRECT), for a 120 MB HDF5 shard of 800
// samples of 224×224×3 and a 37 MB tar shard of 250 such PNGs.
func BenchmarkReadShardPaired(b *testing.B) {
	for _, format := range []string{HDF5, Tar} {
		dir := b.TempDir()
		if format == HDF5 {
			writeHDF5(b, dir, 1, 800, 224, 224)
		} else {
			writeTar(b, dir, 1, 250, 224, 224)
		}
		shards := findShards(b, dir)
		s := &shards[0]
		ctx := context.Background()
		for _, direct := range []bool{false, true} {
			name := format + "/cached"
			if direct {
				name = format + "/direct"
			}
			b.Run(name, func(b *testing.B) {
				opt := ReadOptions{Direct: direct}
				if err := opt.defaults(); err != nil {
					b.Fatal(err)
				}
				r := &reader{opt: &opt, buf: newBuffer(opt.Chunk)}
				var raw, prep float64
				var prepBytes int64
				var out ShardRead
				for i := 0; b.Loop(); i++ {
					// Alternate the order: the second read of a pair gains a
					// little from caches below the page cache.
					for k := range 2 {
						if (i+k)%2 == 0 {
							if err := r.raw(ctx, s, &out); err != nil {
								b.Fatal(err)
							}
							raw += out.Raw.Seconds
						} else {
							if err := r.prep(ctx, 0, s, &out); err != nil {
								b.Fatal(err)
							}
							prep += out.Prep.Seconds
							prepBytes += out.Prep.Bytes
						}
					}
				}
				rawMBps := float64(b.N) * float64(s.Bytes) / raw / 1e6
				prepMBps := float64(prepBytes) / prep / 1e6
				b.ReportMetric(rawMBps, "raw-MB/s")
				b.ReportMetric(prepMBps, "prep-MB/s")
				b.ReportMetric(prepMBps/rawMBps, "prep/raw")
			})
		}
	}
}
