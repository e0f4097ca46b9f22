package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/prep-dev/prep/bench/gpu"
	"github.com/prep-dev/prep/formats"
)

// Stage names, as reports print them.
const (
	StageRead = "disk read" // with --direct (O_DIRECT): the page cache is bypassed
	// StageReadCached is the read stage without O_DIRECT: what it measures
	// may have come from the page cache, not the disk.
	StageReadCached = "read (page cache or disk)"
	StageDecode     = "decode"
	StageAssemble   = "assemble"
	StageCopy       = "host-to-device copy"
)

// FeedOptions configures Feed.
type FeedOptions struct {
	Device  gpu.Device
	Batch   int  // samples per batch; default 256
	Readers int  // shards read at once; default 1
	Slots   int  // pinned host buffers in the ring; default 3 (triple buffering)
	Direct  bool // O_DIRECT reads
	Chunk   int  // bytes per read; default DefaultChunk
	// Verify copies every batch back from the device and hashes it per
	// shard into FeedResult.DeviceSHA256; the copy-backs slow the run.
	Verify   bool
	Progress func(n int64) // bytes delivered to the device, from the copier
	// Sampler, if set, is read every SampleEvery (default 100 ms) for
	// the whole run, from a goroutine Feed owns: NVML's view of the GPU
	// being fed.
	Sampler     gpu.Sampler
	SampleEvery time.Duration
}

// Device kinds, for FeedResult.DeviceKind.
const (
	KindGPU  = "gpu"
	KindHost = "host" // host memory: copies are memcpy, no GPU is involved
)

// Stage is one step of the feed pipeline.
type Stage struct {
	Name string  `json:"name"`
	Busy float64 `json:"busy"`        // share of the run its workers spent working
	Rate float64 `json:"bytes_per_s"` // what the stage alone sustains with its workers
}

// FeedResult is what Feed measured.
type FeedResult struct {
	Device        string      `json:"device"`
	GPU           bool        `json:"gpu"`
	DeviceKind    string      `json:"device_kind"` // KindGPU or KindHost
	Batch         int         `json:"batch"`
	Readers       int         `json:"readers"`
	Slots         int         `json:"slots"`
	Sample        SampleShape `json:"sample"`
	Samples       int         `json:"samples"`
	Batches       int         `json:"batches"`
	Bytes         int64       `json:"bytes"` // delivered to device memory
	Seconds       float64     `json:"seconds"`
	SamplesPerSec float64     `json:"samples_per_s"`
	GBps          float64     `json:"gb_per_s"`
	// LinkGBps is the pinned host-to-device copy speed measured in the same
	// run by copying one batch buffer repeatedly: the ceiling for GBps.
	// For DeviceKind "host" it is the speed of memcpy, not of any link.
	LinkGBps float64 `json:"link_gb_per_s"`
	// Telemetry is nil when nothing sampled the GPU; NoTelemetry says why.
	Telemetry    *Telemetry        `json:"telemetry"`
	NoTelemetry  string            `json:"no_telemetry,omitempty"`
	Stages       []Stage           `json:"stages"`
	Limit        string            `json:"limit"` // the busiest stage
	DeviceSHA256 map[string]string `json:"device_sha256,omitempty"`
}

// stage returns the named stage, or nil.
func (r *FeedResult) stage(name string) *Stage {
	for i := range r.Stages {
		if r.Stages[i].Name == name {
			return &r.Stages[i]
		}
	}
	return nil
}

func (o *FeedOptions) defaults() error {
	if o.Device == nil {
		return errors.New("feed: no device")
	}
	if o.Batch <= 0 {
		o.Batch = 256
	}
	if o.Readers <= 0 {
		o.Readers = 1
	}
	if o.Slots < 2 {
		o.Slots = 3
	}
	if o.Chunk <= 0 {
		o.Chunk = DefaultChunk
	}
	if o.SampleEvery <= 0 {
		o.SampleEvery = 100 * time.Millisecond
	}
	return nil
}

// Feed streams the shards' primary tensors (the HDF5 data dataset, or the
// decoded PNG/WAV of tar shards) into batches in pinned host buffers, and
// copies each batch to device memory on a stream, as a training loader
// would: readers fill the ring of host buffers while earlier batches cross
// the link. The copier only queues copies; a reader waits for a slot's
// copy to finish when it takes the slot to refill it, and not before.
func Feed(ctx context.Context, shards []Shard, opt FeedOptions) (*FeedResult, error) {
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	if len(shards) == 0 {
		return nil, errors.New("feed: no shards")
	}
	shape, err := feedShape(shards)
	if err != nil {
		return nil, err
	}
	res := newFeedResult(&opt, shape, len(shards))
	slotBytes := max(int(float64(opt.Batch)*shape.Bytes), 1)
	r, err := newRing(opt.Device, opt.Slots, slotBytes)
	if err != nil {
		return nil, err
	}
	defer r.release()
	if res.LinkGBps, err = linkSpeed(r.dev, r.slots[0].host, r.devBufs[0], r.stream); err != nil {
		return nil, err
	}

	stats := make([]feedStats, res.Readers)
	cp := newCopier(r, &opt)
	// Read buffers are allocated and touched before the clock starts.
	bufs := make([][]byte, res.Readers)
	for i := range bufs {
		bufs[i] = newBuffer(opt.Chunk)
	}
	var stopSampling func() *Telemetry
	if opt.Sampler != nil {
		stopSampling = sample(opt.Sampler, opt.SampleEvery)
	}
	start := time.Now()
	err = pump(ctx, shards, &opt, r, cp, bufs, stats)
	wall := time.Since(start)
	res.endSampling(stopSampling)
	if err != nil {
		return nil, err
	}

	res.Bytes, res.Batches = cp.bytes, cp.batches
	res.summarize(stats, wall, shards[0].Format == Tar, opt.Direct)
	if opt.Verify {
		res.DeviceSHA256 = deviceSums(shards, cp.hashes)
	}
	return res, nil
}

// newFeedResult starts the result of a run with what is known before it.
func newFeedResult(opt *FeedOptions, shape SampleShape, shards int) *FeedResult {
	dev := opt.Device
	res := &FeedResult{Device: dev.Name(), GPU: dev.IsGPU(), DeviceKind: KindHost, Batch: opt.Batch, Readers: min(opt.Readers, shards), Slots: opt.Slots, Sample: shape}
	if res.GPU {
		res.DeviceKind = KindGPU
	}
	return res
}

// pump runs the readers, which fill the ring's slots from the shards, and
// the copier, which takes them to the device, until every shard has
// crossed, one of them fails, or ctx is done.
func pump(ctx context.Context, shards []Shard, opt *FeedOptions, r *ring, cp *copier, bufs [][]byte, stats []feedStats) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		// The readers' owner closes full once every reader is done.
		defer close(r.full)
		return feedReaders(gctx, shards, opt, r.dev, r.free, r.full, bufs, stats)
	})
	g.Go(func() error { return cp.run(gctx) })
	return g.Wait()
}

// feedShape describes the tensor each sample puts on the device, peeking
// at the first sample of a tar shard to learn its decoded size.
func feedShape(shards []Shard) (SampleShape, error) {
	for _, s := range shards {
		if s.Format != shards[0].Format {
			return SampleShape{}, fmt.Errorf("feed: %s is %s, %s is %s: feed one format at a time", shards[0].Path, shards[0].Format, s.Path, s.Format)
		}
		if s.Format == HDF5 && s.dataset(formats.DataField) == nil {
			return SampleShape{}, fmt.Errorf("%s has no %q dataset to feed", s.Path, formats.DataField)
		}
	}
	if shards[0].Format == HDF5 {
		n := 0
		for _, s := range shards {
			n += s.Count
		}
		return sampleShape(shards, 0, n), nil
	}
	r, err := shards[0].Reader.Open(shards[0].Path, nil)
	if err != nil {
		return SampleShape{}, err
	}
	defer r.Close()
	for smp, err := range r.Samples() {
		if err != nil {
			return SampleShape{}, err
		}
		t := smp.Fields[0].Tensor
		return SampleShape{Shape: t.Shape, DType: t.DType, Bytes: float64(len(t.Data))}, nil
	}
	return SampleShape{}, fmt.Errorf("%s: no samples", shards[0].Path)
}
