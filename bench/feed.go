package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/prep-dev/prep/bench/gpu"
	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/hdf5"
	"github.com/prep-dev/prep/formats/tarshard"
)

// Stage names, as reports print them.
const (
	StageRead     = "disk read"
	StageDecode   = "decode"
	StageAssemble = "assemble"
	StageCopy     = "host-to-device copy"
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

// Telemetry is what the Sampler saw during the run.
type Telemetry struct {
	gpu.Stats
	Interval string `json:"interval"`
	// Error, if set, stopped the sampling early.
	Error string `json:"error,omitempty"`
}

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

// slot is one pinned batch buffer. Its copy to the device is queued, and
// ev recorded after it: whoever refills the slot waits on ev first.
type slot struct {
	host  []byte
	ev    gpu.Event
	n     int
	shard int
}

// feedStats are a reader's busy times.
type feedStats struct {
	read, decode, assemble time.Duration
	fileBytes, decoded     int64
	samples                int
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
	dev := opt.Device
	slotBytes := max(int(float64(opt.Batch)*shape.Bytes), 1)
	res := &FeedResult{Device: dev.Name(), GPU: dev.IsGPU(), DeviceKind: KindHost, Batch: opt.Batch, Readers: min(opt.Readers, len(shards)), Slots: opt.Slots, Sample: shape}
	if res.GPU {
		res.DeviceKind = KindGPU
	}

	stream, err := dev.NewStream()
	if err != nil {
		return nil, err
	}
	slots := make([]*slot, opt.Slots)
	devBufs := make([]gpu.DevicePtr, opt.Slots)
	defer func() {
		// No copy may still read a buffer that is freed.
		dev.Sync(stream)
		for i := range slots {
			if slots[i] != nil {
				dev.FreeHost(slots[i].host)
				dev.FreeEvent(slots[i].ev)
			}
			if devBufs[i] != 0 {
				dev.Free(devBufs[i])
			}
		}
	}()
	for i := range slots {
		ev, err := dev.NewEvent()
		if err != nil {
			return nil, err
		}
		host, err := dev.AllocHost(slotBytes)
		if err != nil {
			dev.FreeEvent(ev)
			return nil, err
		}
		slots[i] = &slot{host: host, ev: ev}
		if devBufs[i], err = dev.Alloc(slotBytes); err != nil {
			return nil, err
		}
	}
	if res.LinkGBps, err = linkSpeed(dev, slots[0].host, devBufs[0], stream); err != nil {
		return nil, err
	}

	free := make(chan *slot, len(slots))
	for _, s := range slots {
		free <- s
	}
	full := make(chan *slot)
	stats := make([]feedStats, res.Readers)
	var hashes map[int]hash.Hash
	if opt.Verify {
		hashes = make(map[int]hash.Hash)
	}

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
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		// The readers' owner closes full once every reader is done.
		defer close(full)
		return feedReaders(gctx, shards, &opt, dev, free, full, bufs, stats)
	})
	g.Go(func() error {
		var scratch []byte
		if opt.Verify {
			scratch = make([]byte, slotBytes)
		}
		for k := 0; ; k++ {
			var s *slot
			select {
			case s = <-full:
			case <-gctx.Done():
				return gctx.Err()
			}
			if s == nil {
				// The run ends when the last copy has landed.
				return dev.Sync(stream)
			}
			d := devBufs[k%len(devBufs)]
			if err := dev.CopyHtoDAsync(d, s.host[:s.n], stream); err != nil {
				return err
			}
			if err := dev.Record(s.ev, stream); err != nil {
				return err
			}
			if opt.Verify {
				if err := dev.Wait(s.ev); err != nil {
					return err
				}
				if err := dev.CopyDtoH(scratch[:s.n], d); err != nil {
					return err
				}
				if hashes[s.shard] == nil {
					hashes[s.shard] = sha256.New()
				}
				hashes[s.shard].Write(scratch[:s.n])
			}
			res.Bytes += int64(s.n)
			res.Batches++
			if opt.Progress != nil {
				opt.Progress(int64(s.n))
			}
			// Back in the ring with its copy in flight; the reader that
			// takes it waits on s.ev.
			free <- s
		}
	})
	err = g.Wait()
	wall := time.Since(start)
	if stopSampling != nil {
		res.Telemetry = stopSampling()
	} else {
		res.NoTelemetry = "no GPU sampler"
		if !res.GPU {
			res.NoTelemetry = "host memory"
		}
	}
	if err != nil {
		return nil, err
	}

	var total feedStats
	for _, st := range stats {
		total.read += st.read
		total.decode += st.decode
		total.assemble += st.assemble
		total.fileBytes += st.fileBytes
		total.decoded += st.decoded
		total.samples += st.samples
	}
	res.Samples = total.samples
	res.Seconds = wall.Seconds()
	if wall > 0 {
		res.SamplesPerSec = float64(res.Samples) / wall.Seconds()
		res.GBps = float64(res.Bytes) / wall.Seconds() / 1e9
	}
	workers := float64(res.Readers)
	add := func(name string, busy time.Duration, bytes int64, workers float64) {
		st := Stage{Name: name}
		if wall > 0 {
			st.Busy = busy.Seconds() / workers / wall.Seconds()
		}
		if busy > 0 {
			st.Rate = float64(bytes) / (busy.Seconds() / workers)
		}
		res.Stages = append(res.Stages, st)
	}
	add(StageRead, total.read, total.fileBytes, workers)
	if shards[0].Format == Tar {
		add(StageDecode, total.decode, total.decoded, workers)
	}
	add(StageAssemble, total.assemble, res.Bytes, workers)
	// The copies run on the device, overlapped with the readers; the
	// copy stage alone runs at the speed measured above, so it is busy
	// for the bytes at that speed.
	var copyBusy time.Duration
	if res.LinkGBps > 0 {
		copyBusy = time.Duration(float64(res.Bytes) / (res.LinkGBps * 1e9) * float64(time.Second))
	}
	add(StageCopy, copyBusy, res.Bytes, 1)
	for _, st := range res.Stages {
		if res.Limit == "" || st.Busy > res.stage(res.Limit).Busy {
			res.Limit = st.Name
		}
	}
	if opt.Verify {
		res.DeviceSHA256 = make(map[string]string)
		for i, h := range hashes {
			res.DeviceSHA256[filepath.Base(shards[i].Path)] = hex.EncodeToString(h.Sum(nil))
		}
	}
	return res, nil
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

// feedReaders runs opt.Readers readers over the shards; each streams one
// shard at a time into slots it takes from free and sends to full, and
// sends a shard's last, partial batch before starting the next shard.
func feedReaders(ctx context.Context, shards []Shard, opt *FeedOptions, dev gpu.Device, free chan *slot, full chan<- *slot, bufs [][]byte, stats []feedStats) error {
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

// assembler copies a byte stream into pinned slots, sending each when full.
type assembler struct {
	ctx   context.Context
	dev   gpu.Device // to wait for a slot's last copy before refilling it
	free  <-chan *slot
	full  chan<- *slot
	shard int
	cur   *slot
	st    *feedStats
}

func (a *assembler) write(p []byte) error {
	for len(p) > 0 {
		if a.cur == nil {
			select {
			case a.cur = <-a.free:
			case <-a.ctx.Done():
				return a.ctx.Err()
			}
			if err := a.dev.Wait(a.cur.ev); err != nil {
				return err
			}
			a.cur.n, a.cur.shard = 0, a.shard
		}
		t := time.Now()
		k := copy(a.cur.host[a.cur.n:], p)
		a.st.assemble += time.Since(t)
		a.cur.n += k
		p = p[k:]
		if a.cur.n == len(a.cur.host) {
			if err := a.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush sends the current slot, if it holds anything.
func (a *assembler) flush() error {
	if a.cur == nil || a.cur.n == 0 {
		return nil
	}
	select {
	case a.full <- a.cur:
		a.cur = nil
		return nil
	case <-a.ctx.Done():
		return a.ctx.Err()
	}
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

// sample reads s every interval on a goroutine of its own until stop is
// called; stop returns what was sampled, with the error that ended
// sampling early, if one did, in its Error.
func sample(s gpu.Sampler, every time.Duration) (stop func() *Telemetry) {
	ctx, cancel := context.WithCancel(context.Background())
	var samples []gpu.Sample
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		err = gpu.Watch(ctx, s, every, 0, func(x gpu.Sample) { samples = append(samples, x) })
	}()
	return func() *Telemetry {
		cancel()
		<-done
		t := &Telemetry{Stats: gpu.Summarize(samples, every), Interval: every.String()}
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Error = err.Error()
		}
		return t
	}
}
