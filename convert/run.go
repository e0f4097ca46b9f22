package convert

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/manifest"
)

// Options configure a run.
type Options struct {
	Sink    cloudsrc.Sink
	Format  formats.ShardFormat
	Handler func(key string) Handler // the handler for a key, nil if none takes it

	Recipe string // canonical recipe, recorded in shards and manifest
	// OnlineRecipe is the canonical recipe of the ops after "|", which
	// the reader runs every epoch: only recorded in the manifest.
	OnlineRecipe string
	Seed         uint64
	Copies       int               // augmented copies of each input (>= 1)
	Order        Order             // how items are laid out in shards; "" is OrderShuffle
	Options      map[string]string // other settings that shape the output, recorded in the manifest
	Version      string
	Source       string // where the inputs are (SRC), recorded in the manifest for prep inspect --rebuild

	ShardSize     int64 // target bytes per shard
	ItemsPerShard int   // items per shard; 0 = derived from ShardSize and the first sample
	Workers       int   // decode workers, and as many finishing (Stager); 0 = NumCPU
	IOWorkers     int   // concurrent fetches; 0 = DefaultIOWorkers

	TaskIndex, TaskCount int // this task's part of a distributed run

	Resume    bool // keep finished shards, redo the rest
	Overwrite bool // replace what an earlier run left in the destination
	Strict    bool // a bad input fails the run

	Progress func(Progress) // called from the sink after every input

	// MemoryBudget bounds the bytes of samples from Emitter handlers held
	// in memory at once; the rest wait in a scratch file beside the
	// shards. 0 = DefaultMemoryBudget.
	MemoryBudget int64
}

// DefaultIOWorkers is how many fetches run at once unless Options say
// otherwise: remote storage needs many requests in flight to hide latency.
const DefaultIOWorkers = 64

// Progress is a snapshot of a running conversion.
type Progress struct {
	Items, TotalItems int // items (input × copy) done and planned in this task
	Samples           int
	Bytes             int64 // sample payload written
	Skipped           int
	Shards            int
}

// Summary reports a finished run.
type Summary struct {
	Items         int                `json:"items"`
	Samples       int                `json:"samples"`
	Bytes         int64              `json:"bytes"`
	ShardsWritten int                `json:"shards_written"`
	ShardsKept    int                `json:"shards_kept"`
	SamplesKept   int                `json:"samples_kept"` // in the kept shards: Samples counts them, SamplesPerSec not
	BytesKept     int64              `json:"bytes_kept"`
	Skipped       []manifest.Skipped `json:"skipped"`
	Ignored       []manifest.Skipped `json:"ignored"`
	Seconds       float64            `json:"seconds"`
	SamplesPerSec float64            `json:"samples_per_sec"`
	MBPerSec      float64            `json:"mb_per_sec"`
	Manifest      string             `json:"manifest"`
	// ScratchBytes are sample bytes that waited in a scratch file beside
	// the shards, over Options.MemoryBudget (long videos).
	ScratchBytes int64 `json:"scratch_bytes"`
}

// Fatal marks an error that must stop the run rather than skip one input
// (a missing tool, a permission error on the whole bucket).
func Fatal(err error) error { return fatalError{err} }

type fatalError struct{ err error }

func (e fatalError) Error() string { return e.err.Error() }
func (e fatalError) Unwrap() error { return e.err }

// IsFatal reports whether err, or an error it wraps, was marked Fatal or
// says so itself through a Fatal() bool method.
func IsFatal(err error) bool {
	var fe fatalError
	if errors.As(err, &fe) {
		return true
	}
	var f interface{ Fatal() bool }
	return errors.As(err, &f) && f.Fatal()
}

func (o *Options) defaults() error {
	if o.Copies <= 0 {
		o.Copies = 1
	}
	order, err := ParseOrder(string(o.Order))
	if err != nil {
		return err
	}
	o.Order = order
	if o.Workers <= 0 {
		o.Workers = runtime.NumCPU()
	}
	if o.MemoryBudget <= 0 {
		o.MemoryBudget = DefaultMemoryBudget
	}
	if o.IOWorkers <= 0 {
		o.IOWorkers = DefaultIOWorkers
	}
	if o.ShardSize <= 0 {
		o.ShardSize = 256 << 20
	}
	if o.TaskCount <= 0 {
		o.TaskCount = 1
	}
	if o.TaskIndex < 0 || o.TaskIndex >= o.TaskCount {
		return fmt.Errorf("task index %d is outside 0..%d (--task-index/--task-count)", o.TaskIndex, o.TaskCount-1)
	}
	if o.Resume && o.Overwrite {
		return fmt.Errorf("--resume and --overwrite exclude each other")
	}
	if o.Sink == nil || o.Format == nil || o.Handler == nil {
		return fmt.Errorf("convert: Sink, Format and Handler are required")
	}
	return nil
}

// Run converts the listed inputs (this task's share of them) into shards
// and writes the manifest.
func Run(ctx context.Context, l *Listing, opt Options) (*manifest.Manifest, *Summary, error) {
	start := time.Now()
	if err := opt.defaults(); err != nil {
		return nil, nil, err
	}
	if len(l.Entries) == 0 {
		return nil, nil, fmt.Errorf("no convertible inputs found (%d files of unsupported types)", len(l.Ignored))
	}
	if len(l.Entries) > math.MaxInt32 {
		return nil, nil, fmt.Errorf("%d inputs: split them into runs of at most %d", len(l.Entries), math.MaxInt32)
	}
	r := &run{opt: opt, l: l, items: len(l.Entries) * opt.Copies}
	r.inputs, r.inputsSum = InputsSum(l)
	unlock, err := lock(ctx, opt.Sink, LockName(opt.TaskIndex, opt.TaskCount))
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	prior, err := r.prepareDestination(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := r.plan(ctx, prior); err != nil {
		return nil, nil, err
	}
	if err := r.resume(ctx, prior); err != nil {
		return nil, nil, err
	}
	if err := r.publishInputs(ctx); err != nil {
		return nil, nil, err
	}
	r.keepProbed()
	err = r.pipeline(ctx)
	if werr := opt.Sink.Wait(); err == nil && werr != nil {
		err = werr
	}
	if err != nil {
		return nil, nil, err
	}
	m := r.manifest()
	name := manifest.FileName
	if opt.TaskCount > 1 {
		name = TaskManifestName(opt.TaskIndex)
	}
	if err := r.publishJSON(ctx, name, m); err != nil {
		return nil, nil, err
	}
	if err := opt.Sink.Wait(); err != nil {
		return nil, nil, err
	}
	r.removeFile(ctx, progressName(&r.opt))
	s := &Summary{
		Items:         r.hi - r.lo,
		ShardsWritten: r.written,
		ShardsKept:    r.kept,
		Samples:       m.Samples, // the manifest's totals, in shard order
		Bytes:         m.Bytes,
		Skipped:       append([]manifest.Skipped{}, m.Skipped...), // [] in JSON, not null
		Ignored:       append([]manifest.Skipped{}, l.Ignored...),
		Seconds:       time.Since(start).Seconds(),
		Manifest:      opt.Sink.URI() + "/" + name,
		ScratchBytes:  r.scratched.Load(),
	}
	for _, k := range r.keep {
		s.SamplesKept += k.Count
		s.BytesKept += k.Bytes
	}
	if s.Seconds > 0 {
		s.SamplesPerSec = float64(r.newSamples) / s.Seconds
		s.MBPerSec = float64(r.newBytes) / 1e6 / s.Seconds
	}
	return m, s, nil
}

type run struct {
	opt      Options
	l        *Listing
	items    int
	layout   *layout // position -> item
	perShard int
	nShards  int
	first    int // this task's shards: [first, end)
	end      int
	lo, hi   int // this task's plan positions: [lo, hi)
	keep     map[int]manifest.Shard
	shards   map[int]manifest.Shard
	written  int
	kept     int

	newSamples int
	newBytes   int64

	// probed is the probe's conversion (plan), kept for the decode stage
	// to take when it is the item at this task's first position
	// (keepProbed).
	probed atomic.Pointer[probedItem]

	held      atomic.Int64 // bytes of Emitters' samples in memory (MemoryBudget)
	scratched atomic.Int64 // bytes that went through a scratch file instead

	inputs    int    // inputs listed, and
	inputsSum string // the SHA-256 of their list (manifest.InputsSHA256)
}
