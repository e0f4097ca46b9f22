package convert

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/manifest"
)

// EstimateOptions are the settings of the run Estimate predicts, as Run
// takes them, and how much to measure.
type EstimateOptions struct {
	Format  formats.ShardFormat
	Handler func(key string) Handler

	Recipe        string
	Seed          uint64
	Copies        int
	Order         Order
	Version       string
	ShardSize     int64
	ItemsPerShard int

	Sample    int    // inputs to convert; 0 = DefaultEstimateSample
	Workers   int    // inputs converted at once; 0 = NumCPU
	IOWorkers int    // concurrent fetches; 0 = DefaultIOWorkers
	TempDir   string // where the measuring shards are written; "" = os.TempDir()
	// WriteBudget bounds the payload of one measuring shard; a longer
	// shard's overhead is extrapolated from two shorter ones. 0 = 32 MiB.
	WriteBudget int64
}

// DefaultEstimateSample is how many inputs Estimate converts by default.
const DefaultEstimateSample = 64

// Estimate predicts a run from a seeded random sample of its inputs,
// converted with the run's own handlers (ConvertItem), from shards of
// them written with the run's own format writer, and from a run of them
// through Run itself, timed.
type Estimate struct {
	Inputs     int   `json:"inputs"`
	InputBytes int64 `json:"input_bytes"`
	// InputBytesSampled says InputBytes is the sample's mean times the
	// inputs, for listings that give no sizes (input lists).
	InputBytesSampled bool `json:"input_bytes_sampled"`
	// FetchBytes is what the run reads: in shuffled order each copy of
	// an input is fetched on its own, in sorted order once for all.
	FetchBytes int64 `json:"fetch_bytes"`
	Classes    int   `json:"classes"`
	Copies     int   `json:"copies"`
	Items      int   `json:"items"` // inputs × copies

	Sampled int                `json:"sampled"` // inputs converted
	Failed  []manifest.Skipped `json:"failed"`  // sampled inputs that did not convert: a run skips such inputs
	Sample  SampleSize         `json:"sample"`

	ItemsPerShard int     `json:"items_per_shard"` // as Run decides it
	Shards        int     `json:"shards"`
	Samples       float64 `json:"samples"`          // expected in all shards
	ShardBytes    Span    `json:"shard_bytes"`      // a full shard
	LastShard     Span    `json:"last_shard_bytes"` // the last, shorter one
	Bytes         Span    `json:"bytes"`            // all shards (file sizes)

	Rate Rate `json:"rate"`
}

// SampleSize describes the sampled samples.
type SampleSize struct {
	Fields []string      `json:"fields"`
	DType  formats.DType `json:"dtype"`           // of the primary field
	Shape  []int         `json:"shape,omitempty"` // of the primary field, when every sample has it
	Bytes  float64       `json:"bytes"`           // mean payload (all fields) of a sample
	Min    int64         `json:"min_bytes"`
	Max    int64         `json:"max_bytes"`
	// PerItem is the mean number of samples an item gives (video frames,
	// rows); failed items count as 0.
	PerItem float64 `json:"samples_per_item"`
	// Fixed is true when every sampled item converted and gave samples of
	// one shape: the byte counts are then exact, not estimates.
	Fixed bool `json:"fixed"`
}

// Span is an estimate with the range it falls in: three standard errors
// of the sample's mean and spread, and the doubt an extrapolation adds.
type Span struct {
	Mean float64 `json:"mean"`
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

// Rate is what converting the sample measured on this machine.
type Rate struct {
	Workers     int     `json:"workers"`
	Seconds     float64 `json:"seconds"`          // wall time of a run over the sampled inputs (one copy each)
	ItemsPerSec float64 `json:"items_per_s"`      // that run's, with Workers
	CorePerSec  float64 `json:"core_items_per_s"` // ItemsPerSec over the cores it had: min(Workers, CPUs)
	FetchMBps   float64 `json:"fetch_mb_per_s"`   // reading the sample's inputs, IOWorkers at once
	WriteMBps   float64 `json:"write_mb_per_s"`   // writing the measuring shards (TempDir); 0 when they were too small to tell
}

// Seconds predicts the run's wall time on tasks machines of cores cores
// each, at this machine's speed per core; cores 0 means Rate.Workers at the
// rate measured here. A run overlaps fetching, converting and writing, so
// the slowest of them bounds it; fetching and writing are taken to scale
// with the tasks, not the cores.
func (e *Estimate) Seconds(tasks, cores int) float64 {
	r := e.Rate
	tasks = max(tasks, 1)
	var convert float64 // 0 when nothing was timed
	switch {
	case cores > 0 && r.CorePerSec > 0:
		convert = float64(e.Items) / (r.CorePerSec * float64(cores))
	case cores <= 0 && r.ItemsPerSec > 0:
		convert = float64(e.Items) / r.ItemsPerSec
	}
	t := convert / float64(tasks)
	if r.FetchMBps > 0 {
		t = max(t, float64(e.FetchBytes)/1e6/r.FetchMBps/float64(tasks))
	}
	if r.WriteMBps > 0 {
		t = max(t, e.Bytes.Mean/1e6/r.WriteMBps/float64(tasks))
	}
	return t
}

// sampled is one converted input of the sample.
type sampled struct {
	entry   Entry
	copy    int
	in      *Input // until converted
	size    int64  // bytes fetched
	samples []formats.Sample
	err     error
	payload int64
}

// EstimateRun converts a seeded random sample of the listed inputs and
// predicts the run opt describes: its shards, their bytes, and how long
// it takes. It writes only into opt.TempDir, and removes what it wrote.
func EstimateRun(ctx context.Context, l *Listing, opt EstimateOptions) (*Estimate, error) {
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	if len(l.Entries) == 0 {
		return nil, fmt.Errorf("no convertible inputs found (%d files of unsupported types)", len(l.Ignored))
	}
	e := &Estimate{Inputs: len(l.Entries), Classes: len(l.Classes), Copies: opt.Copies, Items: len(l.Entries) * opt.Copies}
	items, err := e.convertSample(ctx, l, &opt)
	if err != nil {
		return nil, err
	}
	e.describe(items)
	if e.Sample.PerItem == 0 {
		return nil, fmt.Errorf("none of the %d sampled inputs converted; the first failed with: %s: %s (fix them, or check the recipe and flags)",
			len(items), e.Failed[0].Key, e.Failed[0].Reason)
	}
	e.inputBytes(l, items)
	e.FetchBytes = e.InputBytes
	if opt.Order == OrderShuffle {
		e.FetchBytes *= int64(opt.Copies)
	}
	if e.ItemsPerShard = opt.ItemsPerShard; e.ItemsPerShard <= 0 {
		if e.ItemsPerShard, err = ItemsPerShard(ctx, l, opt.Handler, opt.Order, opt.Seed, opt.ShardSize); err != nil {
			return nil, err
		}
	}
	e.Shards = (e.Items + e.ItemsPerShard - 1) / e.ItemsPerShard
	if err := e.timeRun(ctx, l, items, &opt); err != nil {
		return nil, err
	}
	m := &measure{opt: &opt, l: l, items: items, perItem: e.Sample.PerItem, layout: newLayout(opt.Order, len(l.Entries), opt.Copies, e.ItemsPerShard, opt.Seed)}
	if err := e.shardBytes(m); err != nil {
		return nil, err
	}
	// Files of a few KB measure the file system's latency, not its speed.
	if m.written >= 16<<20 {
		e.Rate.WriteMBps = float64(m.written) / 1e6 / m.writeTime.Seconds()
	}
	return e, nil
}

func (o *EstimateOptions) defaults() error {
	if o.Format == nil || o.Handler == nil {
		return errors.New("estimate: Format and Handler are required")
	}
	if o.Copies <= 0 {
		o.Copies = 1
	}
	if o.Order == "" {
		o.Order = OrderShuffle
	}
	if o.ShardSize <= 0 {
		o.ShardSize = 256 << 20
	}
	if o.Sample <= 0 {
		o.Sample = DefaultEstimateSample
	}
	if o.Workers <= 0 {
		o.Workers = runtime.NumCPU()
	}
	if o.IOWorkers <= 0 {
		o.IOWorkers = DefaultIOWorkers
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
	if o.WriteBudget <= 0 {
		o.WriteBudget = 32 << 20
	}
	return nil
}

// pickSample draws n of the inputs 0..inputs-1, sorted, and a copy for
// each, from a generator seeded by the run's seed: the same plan measures
// the same inputs.
func pickSample(seed uint64, inputs, copies, n int) (idx, copyOf []int) {
	rng := rand.New(rand.NewPCG(seed, 0x706c616e)) // "plan"
	idx = pickDistinct(rng, inputs, n)
	copyOf = make([]int, len(idx))
	for i := range copyOf {
		copyOf[i] = rng.IntN(copies)
	}
	return idx, copyOf
}

// pickDistinct draws min(n, total) distinct numbers below total, sorted
// (Floyd's algorithm: n draws, whatever total).
func pickDistinct(rng *rand.Rand, total, n int) []int {
	n = min(n, total)
	chosen := make(map[int]bool, n)
	for j := total - n; j < total; j++ {
		if t := rng.IntN(j + 1); !chosen[t] {
			chosen[t] = true
		} else {
			chosen[j] = true
		}
	}
	out := make([]int, 0, n)
	for k := range chosen {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// convertSample fetches the sampled inputs, IOWorkers at once (timed),
// then converts them, Workers at once, keeping their samples.
func (e *Estimate) convertSample(ctx context.Context, l *Listing, opt *EstimateOptions) ([]*sampled, error) {
	idx, copies := pickSample(opt.Seed, len(l.Entries), opt.Copies, opt.Sample)
	items := make([]*sampled, len(idx))
	for i, k := range idx {
		items[i] = &sampled{entry: l.Entries[k], copy: copies[i]}
	}
	var fetched int64
	start := time.Now()
	err := each(ctx, items, opt.IOWorkers, func(ctx context.Context, s *sampled) error {
		s.in, s.err = Fetch(ctx, s.entry)
		if s.in != nil {
			s.size = int64(len(s.in.Data))
		}
		if s.err != nil && IsFatal(s.err) {
			return fmt.Errorf("%s: %w", s.entry.Src.URI(s.entry.Key), s.err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	fetchTime := time.Since(start)
	for _, s := range items {
		fetched += s.size
	}
	if fetchTime > 0 {
		e.Rate.FetchMBps = float64(fetched) / 1e6 / fetchTime.Seconds()
	}

	err = each(ctx, items, opt.Workers, func(ctx context.Context, s *sampled) error {
		if s.err != nil {
			return nil
		}
		s.samples, s.err = ConvertItem(ctx, opt.Handler(s.entry.Key), s.entry, s.in, s.copy, opt.Copies, opt.Seed)
		s.in = nil // the raw bytes are no longer needed
		if s.err != nil && IsFatal(s.err) {
			return fmt.Errorf("%s: %w", s.entry.Src.URI(s.entry.Key), s.err)
		}
		for i := range s.samples {
			s.payload += s.samples[i].Bytes()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.Sampled = len(items)
	return items, nil
}

// timeRun converts the sampled inputs once more, through Run itself (the
// pipeline that fetches, decodes and finishes on their own goroutines and
// writes and hashes shards) into a folder in TempDir, so that the rate it
// measures is a run's, not that of converting inputs one by one.
func (e *Estimate) timeRun(ctx context.Context, l *Listing, items []*sampled, opt *EstimateOptions) error {
	dir, err := os.MkdirTemp(opt.TempDir, ".prep-plan-run-")
	if err != nil {
		return fmt.Errorf("%w (set TMPDIR to a writable folder)", err)
	}
	defer os.RemoveAll(dir)
	sink, err := cloudsrc.NewLocalSink(dir)
	if err != nil {
		return err
	}
	sub := &Listing{Classes: l.Classes}
	for _, it := range items {
		sub.Entries = append(sub.Entries, it.entry)
	}
	// The rate is taken between the first item the sink writes and the
	// last: a run of a few dozen items would otherwise be mostly its
	// start (fetches in flight, the first decodes) and its end (syncing
	// the shard and the manifest), which a long run spreads thin.
	var first, last time.Time
	var firstN, lastN int
	progress := func(p Progress) {
		now := time.Now()
		if first.IsZero() {
			first, firstN = now, p.Items
		}
		last, lastN = now, p.Items
	}
	_, sum, err := Run(ctx, sub, Options{
		Sink: sink, Format: opt.Format, Handler: opt.Handler,
		Recipe: opt.Recipe, Seed: opt.Seed, Copies: 1, Order: opt.Order, Version: opt.Version,
		ItemsPerShard: e.ItemsPerShard, Workers: opt.Workers, IOWorkers: opt.IOWorkers,
		Progress: progress,
	})
	if err != nil {
		return fmt.Errorf("timing a run of the sample: %w", err)
	}
	r := &e.Rate
	r.Workers, r.Seconds = opt.Workers, sum.Seconds
	switch d := last.Sub(first).Seconds(); {
	case lastN > firstN && d > 0:
		r.ItemsPerSec = float64(lastN-firstN) / d
	case sum.Seconds > 0:
		r.ItemsPerSec = float64(sum.Items) / sum.Seconds
	}
	r.CorePerSec = r.ItemsPerSec / float64(min(opt.Workers, runtime.NumCPU()))
	return nil
}

// each runs fn over items, n at once; the first error stops the rest.
func each(ctx context.Context, items []*sampled, n int, fn func(context.Context, *sampled) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, n))
	for _, s := range items {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return fn(gctx, s) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// describe summarises the sampled samples.
func (e *Estimate) describe(items []*sampled) {
	ss := &e.Sample
	e.Failed = []manifest.Skipped{}
	var all []*formats.Sample
	for _, it := range items {
		if it.err != nil {
			e.Failed = append(e.Failed, manifest.Skipped{Key: CopyKey(it.entry.Key, it.copy, e.Copies), Reason: it.err.Error()})
			continue
		}
		for i := range it.samples {
			all = append(all, &it.samples[i])
		}
	}
	if len(all) == 0 {
		return
	}
	first := all[0]
	ss.DType = first.Fields[0].DType
	for _, f := range first.Fields {
		ss.Fields = append(ss.Fields, f.Name)
	}
	ss.Min, ss.Max = first.Bytes(), first.Bytes()
	var total int64
	oneShape := true
	for _, s := range all {
		b := s.Bytes()
		ss.Min, ss.Max = min(ss.Min, b), max(ss.Max, b)
		total += b
		oneShape = oneShape && slices.Equal(s.Fields[0].Shape, first.Fields[0].Shape)
	}
	ss.Bytes = float64(total) / float64(len(all))
	ss.PerItem = float64(len(all)) / float64(len(items))
	if oneShape {
		ss.Shape = slices.Clone(first.Fields[0].Shape)
	}
	ss.Fixed = oneShape && ss.Min == ss.Max && len(e.Failed) == 0 && sameCount(items)
}

// sameCount reports whether every item gave as many samples.
func sameCount(items []*sampled) bool {
	for _, it := range items {
		if len(it.samples) != len(items[0].samples) {
			return false
		}
	}
	return true
}

// inputBytes totals the listed sizes, or extrapolates the sample's when
// the listing has none.
func (e *Estimate) inputBytes(l *Listing, items []*sampled) {
	for _, en := range l.Entries {
		if en.Size <= 0 {
			e.InputBytes = 0
			e.InputBytesSampled = true
			break
		}
		e.InputBytes += en.Size
	}
	if !e.InputBytesSampled {
		return
	}
	var got, n int64
	for _, it := range items {
		if it.size > 0 {
			got += it.size
			n++
		}
	}
	if n > 0 {
		e.InputBytes = got * int64(len(l.Entries)) / n
	}
}

// measure writes shards laid out as the run lays them out (the plan's
// keys, labels and sources at each position) with the sampled samples'
// tensors, cycling through the sample.
type measure struct {
	opt       *EstimateOptions
	l         *Listing
	items     []*sampled
	perItem   float64 // samples an item gives, on average
	layout    *layout
	written   int64
	writeTime time.Duration
}

// spreads is how many standard deviations a Span reaches on each side of
// its mean: about 99.7% of what a normal error gives, since a sample of a
// few dozen inputs estimates its own spread roughly.
const spreads = 3

// shardBytes estimates the full and the last shard, and the total.
func (e *Estimate) shardBytes(m *measure) error {
	n := e.ItemsPerShard
	last := e.Items - (e.Shards-1)*n
	mean, sd := m.payloadStats()
	// The sample's mean payload is off by about sd/√sample, less the
	// share of the inputs it holds (it is exact with all of them); that
	// error repeats in every item.
	k, inputs := float64(len(m.items)), float64(e.Inputs)
	meanErr := sd / math.Sqrt(k) * math.Sqrt(max(0, inputs-k)/max(1, inputs-1))
	lastShard, err := m.shard(e.Shards-1, last, mean, sd, meanErr)
	if err != nil {
		return err
	}
	full := lastShard
	if e.Shards > 1 {
		if full, err = m.shard(0, n, mean, sd, meanErr); err != nil {
			return err
		}
	}
	e.ShardBytes, e.LastShard = full.span(), lastShard.span()
	shards := float64(e.Shards - 1)
	e.Bytes.Mean = shards*full.mean + lastShard.mean
	// All the items together hold the inputs' mean payload (which items
	// fill a shard varies, their sum does not): the total is off by the
	// mean's error, and by an extrapolated overhead's in every shard.
	d := spreads*float64(e.Items)*meanErr + shards*full.guess + lastShard.guess
	e.Bytes.Low, e.Bytes.High = max(0, e.Bytes.Mean-d), e.Bytes.Mean+d
	if e.Shards == 1 {
		e.ShardBytes, e.LastShard = e.Bytes, e.Bytes // the one shard holds every item
	}
	e.Samples = float64(e.Items) * e.Sample.PerItem
	return nil
}

// shardEstimate is the estimate of one shard: its mean bytes, the
// standard deviation of its payload, and the doubt an extrapolated
// overhead adds.
type shardEstimate struct {
	mean, sd, guess float64
}

// span is the range such a shard falls in.
func (s shardEstimate) span() Span {
	d := spreads*s.sd + s.guess
	return Span{Mean: s.mean, Low: max(0, s.mean-d), High: s.mean + d}
}

// payloadStats is the mean and standard deviation of an item's payload
// over the sample (a failed item has none).
func (m *measure) payloadStats() (mean, sd float64) {
	for _, it := range m.items {
		mean += float64(it.payload)
	}
	mean /= float64(len(m.items))
	for _, it := range m.items {
		d := float64(it.payload) - mean
		sd += d * d
	}
	if len(m.items) > 1 {
		sd = math.Sqrt(sd / float64(len(m.items)-1))
	}
	return mean, sd
}

// shard estimates shard index of k items: k mean payloads plus the
// overhead the format adds, measured by writing it, or, when it would
// hold more than WriteBudget, extrapolated from two shorter shards.
func (m *measure) shard(index, k int, mean, sd, meanErr float64) (shardEstimate, error) {
	first := index * m.layout.perShard
	n := float64(k)
	est := shardEstimate{sd: math.Sqrt(n*sd*sd + n*n*meanErr*meanErr)}
	if float64(k)*mean <= float64(m.opt.WriteBudget) || k <= 2 {
		w, err := m.write(first, k)
		if err != nil {
			return est, err
		}
		est.mean = float64(k)*mean + float64(w.overhead())
		if sd > 0 && len(w.info.Datasets) > 0 {
			// Another payload ends elsewhere in its last 4 KiB block:
			// the HDF5 dataset after it may start a block later or sooner.
			est.guess = 4096
		}
		return est, nil
	}
	k2 := max(2, int(float64(m.opt.WriteBudget)/mean))
	k1 := k2 / 2
	w1, err := m.write(first, k1)
	if err != nil {
		return est, err
	}
	w2, err := m.write(first, k2)
	if err != nil {
		return est, err
	}
	scale := float64(k-k2) / float64(k2-k1)
	var ovh float64
	if len(w2.info.Datasets) == 0 {
		// Tar: every byte beside the payload (headers, PNG or WAV framing,
		// JSON) comes with a sample, so the overhead grows linearly.
		o1, o2 := float64(w1.overhead()), float64(w2.overhead())
		ovh = o2 + (o2-o1)*scale
		est.guess = 2*512 + 0.02*math.Abs(ovh)
	} else {
		// HDF5: the datasets beside the payload (labels, keys, ragged
		// offsets and shapes) grow by so many bytes a sample, which the
		// writer reports; the file's own metadata barely grows. Fitting the
		// file sizes instead would fit their alignment: a dataset of 4 KiB
		// or more starts on a 4 KiB boundary, a jump the fit would repeat
		// over every extrapolated sample.
		e1, e2 := float64(w1.besides()), float64(w2.besides())
		meta := float64(w2.info.Bytes) - float64(w2.datasets())
		ovh = meta + e2 + (e2-e1)*scale
		// Alignment may differ by up to a block a dataset, and longer
		// shards may hold longer keys.
		est.guess = 4096*float64(len(w2.info.Datasets)) + 0.02*(e2+(e2-e1)*scale)
	}
	est.mean = float64(k)*mean + ovh
	return est, nil
}

// written is a measuring shard.
type written struct {
	info    formats.ShardInfo
	payload int64 // bytes of the samples' tensors in it
}

// overhead is what the file holds besides the samples' tensors.
func (w written) overhead() int64 { return w.info.Bytes - w.payload }

// datasets is the bytes of every dataset (HDF5).
func (w written) datasets() int64 {
	var n int64
	for _, d := range w.info.Datasets {
		n += d.Size
	}
	return n
}

// besides is the bytes of the datasets that are not the samples' tensors.
func (w written) besides() int64 { return w.datasets() - w.payload }

// write writes a shard of plan positions [first, first+k).
func (m *measure) write(first, k int) (written, error) {
	path := filepath.Join(m.opt.TempDir, fmt.Sprintf(".prep-plan-%d-%s", os.Getpid(), ShardName(first, m.opt.Format.Ext())))
	meta := formats.ShardMeta{Version: m.opt.Version, Recipe: m.opt.Recipe, Seed: m.opt.Seed, Classes: m.l.Classes}
	start := time.Now()
	w, err := m.opt.Format.Create(path, meta)
	if err != nil {
		return written{}, fmt.Errorf("measuring shard in %s: %w (set TMPDIR to a writable folder)", m.opt.TempDir, err)
	}
	defer os.Remove(path)
	if ex, ok := w.(formats.Expecter); ok {
		ex.Expect(int(float64(k)*m.perItem + 0.5))
	}
	var out written
	firstKey := ""
	for p := first; p < first+k; p++ {
		e, c := m.layout.item(p)
		it := m.items[(p-first)%len(m.items)]
		for i := range it.samples {
			s := m.placed(&it.samples[i], it, m.l.Entries[e], c)
			if firstKey == "" {
				firstKey = s.Key
			}
			if err := w.Add(&s); err != nil {
				w.Abort()
				if errors.Is(err, formats.ErrIncompatible) {
					// convert stops on it: say so now, not after an
					// estimate of a run that cannot finish.
					return written{}, fmt.Errorf("convert would stop: %w", mixedKinds(it.entry.Src.URI(it.entry.Key), err, "a shard", firstKey))
				}
				return written{}, fmt.Errorf("measuring shard: %w", err)
			}
			out.payload += s.Bytes()
		}
	}
	if out.info, err = w.Close(); err != nil {
		return written{}, fmt.Errorf("measuring shard: %w", err)
	}
	m.written += out.info.Bytes
	m.writeTime += time.Since(start)
	return out, nil
}

// placed is sample s of sampled item it as copy c of input e would hold it:
// e's key (with s's frame or row suffix), label and source, s's tensors.
func (m *measure) placed(s *formats.Sample, it *sampled, e Entry, c int) formats.Sample {
	// CopyKey("", c, copies) is the copy's suffix, "" for a single copy.
	rest := strings.TrimSuffix(s.Key, CopyKey("", it.copy, m.opt.Copies))
	rest = strings.TrimPrefix(rest, it.entry.Key)
	out := *s
	out.Key = e.Key + rest
	out.Label = e.Label
	out.Source = ""
	stamp(&out, e, c, m.opt.Copies)
	return out
}
