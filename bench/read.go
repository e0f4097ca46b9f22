package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/hdf5"
	"github.com/prep-dev/prep/formats/tarshard"
)

// Ways to read HDF5 datasets.
const (
	ViaRaw  = "raw"  // plain reads at the offsets the manifest records
	ViaHDF5 = "hdf5" // through the HDF5 library
)

// ReadOptions configures Read.
type ReadOptions struct {
	Direct  bool   // O_DIRECT with aligned buffers, bypassing the page cache
	Cold    bool   // drop each file from the page cache before each pass
	Via     string // ViaRaw (default) or ViaHDF5
	Readers int    // shards read at once; default 1
	Decode  bool   // decode the PNG/WAV members of tar shards
	Chunk   int    // bytes per read; default DefaultChunk

	// Progress, if set, is called with the bytes each read adds, from the
	// readers' goroutines.
	Progress func(n int64)
	// OnData, if set, sees every piece of an HDF5 dataset the prep pass
	// reads, in file order, from the readers' goroutines (shard is the
	// index in the shards slice).
	OnData func(shard int, dataset string, p []byte) error
}

// Pass is the outcome of reading some bytes.
type Pass struct {
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	MBps    float64 `json:"mb_per_s"` // 10^6 bytes per second
}

func newPass(n int64, d time.Duration) Pass {
	p := Pass{Bytes: n, Seconds: d.Seconds()}
	if d > 0 {
		p.MBps = float64(n) / d.Seconds() / 1e6
	}
	return p
}

// ShardRead is one shard's result.
type ShardRead struct {
	File       string   `json:"file"`
	Format     string   `json:"format"`
	Samples    int      `json:"samples"`
	Library    []string `json:"library,omitempty"` // datasets read through the HDF5 library
	Prep       Pass     `json:"prep"`              // the loader's reads: dataset payload, or the whole tar
	Raw        Pass     `json:"raw"`               // plain read() of the whole file
	Efficiency float64  `json:"efficiency"`        // Prep.MBps / Raw.MBps
	// SamplesPerSec is Samples over the prep pass's time.
	SamplesPerSec float64 `json:"samples_per_s"`
	Decoded       int64   `json:"decoded_bytes,omitempty"` // by one prep pass
}

// ReadResult is what Read measured.
type ReadResult struct {
	Direct  bool        `json:"direct"`
	Cold    bool        `json:"cold"`
	Via     string      `json:"via"`
	Readers int         `json:"readers"`
	Shards  []ShardRead `json:"shards"`
	Samples int         `json:"samples"`
	// Prep and Raw are passes over all the shards by all the readers at
	// once, timed by the wall clock.
	Prep          Pass        `json:"prep"`
	Raw           Pass        `json:"raw"`
	Efficiency    float64     `json:"efficiency"`
	SamplesPerSec float64     `json:"samples_per_s"`
	Sample        SampleShape `json:"sample"`
	// FeedsPerSec is how many samples per second the prep read speed
	// could hand a GPU: Prep.MBps over the sample's size in memory.
	FeedsPerSec float64 `json:"feeds_per_s"`
}

// SampleShape describes the tensor a GPU receives per sample.
type SampleShape struct {
	Shape []int         `json:"shape,omitempty"` // empty for variable-size samples
	DType formats.DType `json:"dtype,omitempty"`
	Bytes float64       `json:"bytes"` // per sample; the mean for variable sizes
}

// String reads "224×224×3 uint8" or "61.2 KiB samples".
func (s SampleShape) String() string {
	if len(s.Shape) == 0 {
		return fmt.Sprintf("%s samples", sizeString(s.Bytes))
	}
	dims := ""
	for i, d := range s.Shape {
		if i > 0 {
			dims += "×"
		}
		dims += fmt.Sprint(d)
	}
	return dims + " " + string(s.DType)
}

func sizeString(b float64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", b/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}

func (o *ReadOptions) defaults() error {
	if o.Readers <= 0 {
		o.Readers = 1
	}
	if o.Chunk <= 0 {
		o.Chunk = DefaultChunk
	}
	switch o.Via {
	case "":
		o.Via = ViaRaw
	case ViaRaw, ViaHDF5:
	default:
		return fmt.Errorf("--via %q: want raw or hdf5", o.Via)
	}
	return nil
}

// minBest and maxRounds bound the rounds of passes over one shard from the
// page cache: at least 3, and more until they have read for minBest.
const (
	minBest   = 20 * time.Millisecond
	maxRounds = 100
)

// Read measures shards the way a training loader reads them, and reads
// the same files with plain sequential reads into the same kind of buffer,
// and compares. Each reader does both passes of a shard back to back, so
// both see the same load on the machine. Through the page cache the loader
// pass goes first, after an untimed read that warms the cache (use Cold or
// Direct to compare disk reads). With Cold or
// Direct neither pass can warm the other's page cache, and the order
// alternates from shard to shard, cancelling what caches below the page
// cache give the second read.
func Read(ctx context.Context, shards []Shard, opt ReadOptions) (*ReadResult, error) {
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	res := &ReadResult{Direct: opt.Direct, Cold: opt.Cold, Via: opt.Via, Readers: opt.Readers, Shards: make([]ShardRead, len(shards))}
	for i, s := range shards {
		res.Shards[i] = ShardRead{File: s.Path, Format: s.Format, Samples: s.Count}
	}
	pool := newPool(&opt, len(shards))
	rounds := 1
	if !opt.Direct && !opt.Cold && opt.OnData == nil {
		// From the page cache one pass of a small shard takes
		// milliseconds, so the passes alternate a few rounds and the best
		// of each counts, as a benchmark's best-of-N does.
		rounds = 3
	}
	err := eachShard(ctx, shards, pool, func(r *reader, i int) error {
		passes := []func() error{
			func() error { return r.prep(ctx, i, &shards[i], &res.Shards[i]) },
			func() error { return r.raw(ctx, &shards[i], &res.Shards[i]) },
		}
		if (opt.Direct || opt.Cold) && i%2 == 1 {
			passes[0], passes[1] = passes[1], passes[0]
		}
		if !opt.Direct && !opt.Cold {
			// The first read of a file in a process costs several times a
			// later one, even from the page cache; an untimed read first
			// makes both passes "warm cache" reads, as every epoch after
			// the first is for a loader.
			if err := r.warm(ctx, &shards[i]); err != nil {
				return err
			}
		}
		out := &res.Shards[i]
		var best ShardRead
		// A small shard's passes take a fraction of a millisecond, where
		// one preemption shows: its rounds go on until the timed reading
		// adds up to minBest (at most maxRounds).
		var spent float64
		more := func(round int) bool {
			return round < rounds || rounds > 1 && spent < minBest.Seconds() && round < maxRounds
		}
		for round := 0; more(round); round++ {
			for _, pass := range passes {
				if opt.Cold {
					if err := dropCache(shards[i].Path); err != nil {
						return err
					}
				}
				if err := pass(); err != nil {
					return err
				}
			}
			if round == 0 || out.Prep.Seconds < best.Prep.Seconds {
				best.Prep = out.Prep
			}
			if round == 0 || out.Raw.Seconds < best.Raw.Seconds {
				best.Raw = out.Raw
			}
			spent += out.Prep.Seconds + out.Raw.Seconds
			passes[0], passes[1] = passes[1], passes[0]
		}
		out.Prep, out.Raw = best.Prep, best.Raw
		return nil
	})
	if err != nil {
		return nil, err
	}
	var prepBytes, rawBytes, decoded int64
	var prepTime, rawTime float64
	for i := range res.Shards {
		sr := &res.Shards[i]
		if sr.Raw.MBps > 0 {
			sr.Efficiency = sr.Prep.MBps / sr.Raw.MBps
		}
		if sr.Prep.Seconds > 0 {
			sr.SamplesPerSec = float64(sr.Samples) / sr.Prep.Seconds
		}
		res.Samples += sr.Samples
		prepBytes += sr.Prep.Bytes
		rawBytes += sr.Raw.Bytes
		prepTime += sr.Prep.Seconds
		rawTime += sr.Raw.Seconds
		decoded += sr.Decoded
	}
	if len(pool) == 1 {
		// One reader reads the shards one after another: its passes add
		// up to the wall-clock time of a pass over them all.
		res.Prep = newPass(prepBytes, time.Duration(prepTime*float64(time.Second)))
		res.Raw = newPass(rawBytes, time.Duration(rawTime*float64(time.Second)))
	} else {
		// Readers overlap, and how much depends on the machine: only
		// the clock on the wall says how long a pass over all the shards
		// takes them.
		var prep, raw time.Duration
		if prep, raw, err = wallPasses(ctx, shards, pool, rounds); err != nil {
			return nil, err
		}
		res.Prep, res.Raw = newPass(prepBytes, prep), newPass(rawBytes, raw)
	}
	if res.Raw.MBps > 0 {
		res.Efficiency = res.Prep.MBps / res.Raw.MBps
	}
	if res.Prep.Seconds > 0 {
		res.SamplesPerSec = float64(res.Samples) / res.Prep.Seconds
	}
	res.Sample = sampleShape(shards, decoded, res.Samples)
	if res.Sample.Bytes > 0 {
		res.FeedsPerSec = res.Prep.MBps * 1e6 / res.Sample.Bytes
	}
	return res, nil
}

// sampleShape describes the samples' primary tensor: from the HDF5 data
// dataset when every shard agrees on it, else as a mean size.
func sampleShape(shards []Shard, decoded int64, samples int) SampleShape {
	var shape SampleShape
	var bytes int64
	for i, s := range shards {
		d := s.dataset(formats.DataField)
		if d == nil || s.Count == 0 {
			shape.Shape = nil
			bytes = -1
			break
		}
		bytes += d.Size
		per := SampleShape{DType: d.DType}
		if !ragged(s.Datasets) && len(d.Shape) > 0 && d.Shape[0] == s.Count {
			per.Shape = d.Shape[1:]
		}
		if i == 0 {
			shape = per
		} else if shape.DType != per.DType || !slices.Equal(shape.Shape, per.Shape) {
			shape.Shape = nil
		}
	}
	if samples == 0 {
		return SampleShape{}
	}
	switch {
	case bytes >= 0:
		shape.Bytes = float64(bytes) / float64(samples)
	case decoded > 0:
		shape = SampleShape{Bytes: float64(decoded) / float64(samples)}
	default:
		// Tar shards read without --decode: what the GPU would get is
		// unknown, so the encoded size stands in.
		var total int64
		for _, s := range shards {
			total += s.Bytes
		}
		shape = SampleShape{Bytes: float64(total) / float64(samples)}
	}
	if len(shape.Shape) > 0 {
		shape.Bytes = float64(shape.DType.Size())
		for _, d := range shape.Shape {
			shape.Bytes *= float64(d)
		}
	}
	return shape
}

// wallPasses times all the readers reading all the shards at once, the
// loader's way and then plainly (alternating the order from round to
// round), and returns the best wall-clock time of each. Nothing is handed
// to OnData or Progress: those saw the shards already.
func wallPasses(ctx context.Context, shards []Shard, pool []*reader, rounds int) (prep, raw time.Duration, err error) {
	opt := *pool[0].opt
	opt.OnData, opt.Progress = nil, nil
	// The quiet readers take over the pool's buffers and warmed tar
	// state (the pool is idle from here on), so the first timed pass
	// regrows nothing.
	quiet := make([]*reader, len(pool))
	for i, r := range pool {
		q := *r
		q.opt = &opt
		quiet[i] = &q
	}
	scratch := make([]ShardRead, len(shards))
	passes := []struct {
		best *time.Duration
		fn   func(r *reader, i int) error
	}{
		{&prep, func(r *reader, i int) error { return r.prep(ctx, i, &shards[i], &scratch[i]) }},
		{&raw, func(r *reader, i int) error { return r.raw(ctx, &shards[i], &scratch[i]) }},
	}
	for round := range rounds {
		for k := range passes {
			p := passes[(round+k)%2]
			if opt.Cold {
				for _, s := range shards {
					if err := dropCache(s.Path); err != nil {
						return 0, 0, err
					}
				}
			}
			start := time.Now()
			if err := eachShard(ctx, shards, quiet, p.fn); err != nil {
				return 0, 0, err
			}
			if d := time.Since(start); round == 0 || d < *p.best {
				*p.best = d
			}
		}
	}
	return prep, raw, nil
}

// newPool returns the readers for opt.Readers goroutines, their buffers
// allocated and touched before any clock starts.
func newPool(opt *ReadOptions, shards int) []*reader {
	pool := make([]*reader, max(min(opt.Readers, shards), 1))
	for i := range pool {
		pool[i] = &reader{opt: opt, buf: newBuffer(opt.Chunk)}
	}
	return pool
}

// eachShard runs fn over every shard on one goroutine per reader.
func eachShard(ctx context.Context, shards []Shard, pool []*reader, fn func(r *reader, i int) error) error {
	var next sync.Mutex
	n := 0
	g, ctx := errgroup.WithContext(ctx)
	for _, r := range pool {
		g.Go(func() error {
			for {
				next.Lock()
				i := n
				n++
				next.Unlock()
				if i >= len(shards) || ctx.Err() != nil {
					return ctx.Err()
				}
				if err := fn(r, i); err != nil {
					return err
				}
			}
		})
	}
	return g.Wait()
}

// reader holds one reader goroutine's reused buffers.
type reader struct {
	opt *ReadOptions
	buf []byte // chunk buffer, aligned and touched
	lib []byte // whole-dataset buffer for reads through the HDF5 library
	// scanner is the tar reader's names and copy-out buffers, kept
	// from one shard and pass to the next.
	scanner tarshard.Scanner
}

// raw reads the whole file with plain sequential reads.
func (r *reader) raw(ctx context.Context, s *Shard, out *ShardRead) error {
	f, err := openFile(s.Path, r.opt.Direct)
	if err != nil {
		return err
	}
	defer f.Close()
	start := time.Now()
	err = f.span(r.buf, 0, s.Bytes).each(func(p []byte) error {
		r.progress(len(p))
		return ctx.Err()
	})
	if err != nil {
		return err
	}
	out.Raw = newPass(s.Bytes, time.Since(start))
	return nil
}

// warm reads a file once, untimed and unreported.
func (r *reader) warm(ctx context.Context, s *Shard) error {
	f, err := openFile(s.Path, false)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.span(r.buf, 0, s.Bytes).each(func([]byte) error { return ctx.Err() })
}

func (r *reader) progress(n int) {
	if r.opt.Progress != nil {
		r.opt.Progress(int64(n))
	}
}

// prep reads shard i the way a loader would.
func (r *reader) prep(ctx context.Context, i int, s *Shard, out *ShardRead) error {
	f, err := openFile(s.Path, r.opt.Direct)
	if err != nil {
		return err
	}
	defer f.Close()
	start := time.Now()
	var n int64
	if s.Format == Tar {
		n, err = r.tar(ctx, f, s, out)
	} else {
		n, err = r.hdf5(ctx, i, f, s, out)
	}
	if err != nil {
		return err
	}
	out.Prep = newPass(n, time.Since(start))
	return nil
}

// hdf5 streams every dataset in file order: plain reads at its offset
// into the reused buffer, or through the library when asked to or when the
// dataset is chunked or compressed and has no single offset.
func (r *reader) hdf5(ctx context.Context, i int, f *file, s *Shard, out *ShardRead) (int64, error) {
	ds := slices.Clone(s.Datasets)
	slices.SortFunc(ds, func(a, b formats.DatasetInfo) int { return cmp.Compare(a.Offset, b.Offset) })
	var total int64
	for _, d := range ds {
		if r.opt.Via == ViaHDF5 || d.Offset < 0 {
			if d.Offset < 0 {
				out.Library = append(out.Library, d.Name)
			}
			n, err := r.library(i, s, d)
			if err != nil {
				return total, err
			}
			total += n
			continue
		}
		err := f.span(r.buf, d.Offset, d.Size).each(func(p []byte) error {
			r.progress(len(p))
			if r.opt.OnData != nil {
				if err := r.opt.OnData(i, d.Name, p); err != nil {
					return err
				}
			}
			return ctx.Err()
		})
		if err != nil {
			return total, err
		}
		total += d.Size
	}
	return total, nil
}

// library reads a dataset whole through the HDF5 library into a reused
// buffer, and returns the bytes it holds in memory.
func (r *reader) library(i int, s *Shard, d formats.DatasetInfo) (int64, error) {
	// The library returns the elements (shape × dtype), which for a
	// chunked or compressed dataset differs from the bytes stored.
	n := d.Size
	if l := logicalSize(d); l >= 0 {
		n = l
	}
	if int64(cap(r.lib)) < n {
		r.lib = newBuffer(int(n))
	}
	buf := r.lib[:n]
	if err := hdf5.ReadDataset(s.Path, d.Name, buf); err != nil {
		return 0, err
	}
	r.progress(int(d.Size))
	if r.opt.OnData != nil {
		return n, r.opt.OnData(i, d.Name, buf[:n])
	}
	return n, nil
}

// tar streams a tar shard through the WebDataset reader, decoding the
// samples when asked to.
func (r *reader) tar(ctx context.Context, f *file, s *Shard, out *ShardRead) (int64, error) {
	sp := f.span(r.buf, 0, s.Bytes)
	var last, decoded int64
	samples := 0
	err := r.scanner.Scan(sp, func(key string, members map[string][]byte) error {
		samples++
		r.progress(int(sp.pos - last))
		last = sp.pos
		if r.opt.Decode {
			smp, err := tarshard.Decode(key, members)
			if err != nil {
				return fmt.Errorf("%s: %w", s.Path, err)
			}
			decoded += smp.Bytes()
		}
		return ctx.Err()
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", s.Path, err)
	}
	r.progress(int(sp.pos - last))
	out.Samples, out.Decoded = samples, decoded
	// The tar reader stops at the end-of-archive blocks; the rest is
	// padding a loader never reads.
	return sp.pos, nil
}
