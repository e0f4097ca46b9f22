package convert

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sync/errgroup"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/manifest"
)

// job is one input and the copies of it this task converts.
type job struct {
	entry   Entry
	index   int // entry index in the listing
	c0, c1  int // copies [c0, c1), at plan positions [pos, pos+c1-c0)
	pos     int
	in      *Input
	err     error              // fetch error, for every copy
	fetched chan struct{}      // closed when in/err are set
	samples [][]formats.Sample // per copy
	emitted []*collected       // per copy, for an Emitter's samples
	errs    []error            // per copy
	done    []chan struct{}    // per copy, closed when samples/errs are final
	left    atomic.Int32       // copies not yet done
}

// task is one copy of a job, the unit the decode workers share: the
// copies of one input spread over the workers, so an input with many
// copies does not leave the other workers idle while one converts them
// all. Tasks go to the workers in the order the sink writes them, and the
// sink takes each as soon as it is done, so it writes while the workers
// decode rather than in a burst after them.
type task struct {
	j *job
	c int
}

// finishing is a task whose input is decoded and whose samples await the
// rest of the handler's work (Stager).
type finishing struct {
	task
	finish func(rng *rand.Rand) ([]formats.Sample, error)
}

// pipeline runs lister -> fetch -> dispatch -> decode -> finish -> sink
// over this task's items, skipping the shards kept by resume. Handlers
// that are not Stagers do all their work in the decode stage.
func (r *run) pipeline(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	// The FIFOs' capacity bounds the jobs in flight, and so memory.
	inFlight := r.opt.IOWorkers + 2*r.opt.Workers
	order := make(chan *job, inFlight)
	dispatchQ := make(chan *job, inFlight)
	fetchQ := make(chan *job)
	decodeQ := make(chan task)
	finishQ := make(chan finishing, r.opt.Workers)

	g.Go(func() error {
		defer close(order)
		defer close(dispatchQ)
		defer close(fetchQ)
		return r.list(ctx, order, dispatchQ, fetchQ)
	})
	g.Go(func() error {
		fg, ctx := errgroup.WithContext(ctx)
		for range r.opt.IOWorkers {
			fg.Go(func() error { return fetchLoop(ctx, fetchQ, r.opt.Handler) })
		}
		return fg.Wait()
	})
	g.Go(func() error {
		defer close(decodeQ)
		return dispatch(ctx, dispatchQ, decodeQ)
	})
	g.Go(func() error {
		defer close(finishQ)
		dg, ctx := errgroup.WithContext(ctx)
		for range r.opt.Workers {
			dg.Go(func() error { return r.decodeLoop(ctx, decodeQ, finishQ) })
		}
		return dg.Wait()
	})
	for range r.opt.Workers {
		g.Go(func() error { return r.finishLoop(ctx, finishQ) })
	}
	// Unbuffered: a shard is the closer's once handed over, so at most two
	// are open, and none sits in between when the closer fails.
	closeQ := make(chan *shardState)
	g.Go(func() error {
		defer close(closeQ)
		return r.sink(ctx, order, closeQ)
	})
	g.Go(func() error { return r.closer(ctx, closeQ) })
	return g.Wait()
}

// recv takes the next value from ch; ok is false once ch is closed and
// drained.
func recv[T any](ctx context.Context, ch <-chan T) (v T, ok bool, err error) {
	select {
	case <-ctx.Done():
		return v, false, ctx.Err()
	case v, ok = <-ch:
		return v, ok, nil
	}
}

func send[T any](ctx context.Context, ch chan<- T, v T) error {
	select {
	case ch <- v:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// list emits the jobs in plan order, skipping kept shards: one per run of
// positions holding adjacent copies of one input (all its copies in sorted
// order, one copy in shuffled order).
func (r *run) list(ctx context.Context, order, dispatchQ, fetchQ chan<- *job) error {
	var j *job
	flush := func() error {
		if j == nil {
			return nil
		}
		n := j.c1 - j.c0
		j.samples, j.emitted, j.errs, j.done = make([][]formats.Sample, n), make([]*collected, n), make([]error, n), make([]chan struct{}, n)
		for i := range j.done {
			j.done[i] = make(chan struct{})
		}
		j.left.Store(int32(n))
		for _, q := range []chan<- *job{order, dispatchQ, fetchQ} {
			if err := send(ctx, q, j); err != nil {
				return err
			}
		}
		return nil
	}
	for pos := r.lo; pos < r.hi; pos++ {
		if _, ok := r.keep[pos/r.perShard]; ok {
			if err := flush(); err != nil {
				return err
			}
			j = nil
			pos = (pos/r.perShard+1)*r.perShard - 1
			continue
		}
		e, c := r.layout.item(pos)
		if j != nil && j.index == e && j.c1 == c && j.c1-j.c0 < r.maxJobCopies() {
			j.c1++
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		j = &job{entry: r.l.Entries[e], index: e, c0: c, c1: c + 1, pos: pos, fetched: make(chan struct{})}
	}
	return flush()
}

// maxJobCopies bounds the adjacent copies of one input that share a job
// (and one fetch). The FIFOs bound jobs, not copies: without it, one input
// with a million copies (or a round of one input) was a single job whose
// per-copy state, about 500 bytes a copy, grew with --copies.
func (r *run) maxJobCopies() int { return max(4, 2*r.opt.Workers) }

func fetchLoop(ctx context.Context, in <-chan *job, handler func(key string) Handler) error {
	for {
		j, ok, err := recv(ctx, in)
		if !ok {
			return err
		}
		j.in, j.err = fetch(ctx, j.entry, handler(j.entry.Key))
		if j.err != nil {
			// Storage errors that stop the run (a refused permission, retries
			// or the object's deadline run out) say so through Fatal and
			// name the object themselves; a missing object is skipped, as
			// an input list may be older than the bucket.
			if IsFatal(j.err) {
				var se *cloudsrc.Error
				if errors.As(j.err, &se) {
					return se
				}
				return fmt.Errorf("%s: %w", j.entry.Src.URI(j.entry.Key), j.err)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		close(j.fetched)
	}
}

// dispatch hands out the jobs' copies as tasks in index order, each job's
// once it is fetched: the fetches run ahead in parallel, the decoding
// follows the order the sink writes in.
func dispatch(ctx context.Context, in <-chan *job, out chan<- task) error {
	for j := range in {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-j.fetched:
		}
		for c := j.c0; c < j.c1; c++ {
			if err := send(ctx, out, task{j, c}); err != nil {
				return err
			}
		}
	}
	return ctx.Err()
}

// decodeLoop decodes the tasks' inputs, handing what a Stager has left
// to do to the finish stage; other handlers' samples it makes whole.
func (r *run) decodeLoop(ctx context.Context, in <-chan task, out chan<- finishing) error {
	rng := newReseeder()
	for {
		t, ok, err := recv(ctx, in)
		if !ok {
			return err
		}
		j := t.j
		if s, ok := r.takeProbed(t); ok {
			r.done(t, s, nil)
			continue
		}
		if j.err != nil {
			r.done(t, nil, j.err)
			continue
		}
		h := r.opt.Handler(j.entry.Key)
		if em, ok := h.(Emitter); ok {
			c, err := r.emitTo(ctx, em, t, rng.seed(r.opt.Seed, j.entry.Key, t.c))
			if !errors.Is(err, errWhole) {
				var s []formats.Sample
				if c != nil {
					s, j.emitted[t.c-j.c0] = c.samples, c
				}
				if err := r.settle(ctx, t, s, err); err != nil {
					return err
				}
				continue
			}
		}
		st, ok := h.(Stager)
		if !ok {
			s, err := h.Samples(ctx, j.in, t.c, rng.seed(r.opt.Seed, j.entry.Key, t.c))
			if err := r.settle(ctx, t, s, err); err != nil {
				return err
			}
			continue
		}
		finish, err := st.Decode(ctx, j.in, t.c)
		if err != nil {
			if err := r.settle(ctx, t, nil, err); err != nil {
				return err
			}
			continue
		}
		if err := send(ctx, out, finishing{t, finish}); err != nil {
			return err
		}
	}
}

// finishLoop completes the samples whose inputs decodeLoop decoded.
func (r *run) finishLoop(ctx context.Context, in <-chan finishing) error {
	rng := newReseeder()
	for {
		f, ok, err := recv(ctx, in)
		if !ok {
			return err
		}
		s, err := f.finish(rng.seed(r.opt.Seed, f.j.entry.Key, f.c))
		if err := r.settle(ctx, f.task, s, err); err != nil {
			return err
		}
	}
}

// settle ends task t with a handler's result: it returns the error that
// stops the run, if err is one (a fatal error or the run's cancellation),
// and otherwise records the samples, or err, which skips the sample.
func (r *run) settle(ctx context.Context, t task, s []formats.Sample, err error) error {
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if IsFatal(err) {
			return fmt.Errorf("%s: %w", t.j.in.Source, err)
		}
	}
	r.done(t, s, err)
	return nil
}

// done records a task's samples, or why it has none, for the sink.
func (r *run) done(t task, s []formats.Sample, err error) {
	j, i := t.j, t.c-t.j.c0
	if j.left.Add(-1) == 0 {
		j.in = nil // the raw bytes are no longer needed
	}
	j.samples[i], j.errs[i] = s, err
	close(j.done[i])
}

// reseeder is one goroutine's generator, reseeded per sample: the same
// stream as NewRand's without two allocations a sample.
type reseeder struct {
	pcg *rand.PCG
	rng *rand.Rand
}

func newReseeder() reseeder {
	pcg := rand.NewPCG(0, 0)
	return reseeder{pcg, rand.New(pcg)}
}

func (r reseeder) seed(seed uint64, key string, copy int) *rand.Rand {
	r.pcg.Seed(SampleSeed(seed, key, copy))
	return r.rng
}

// shardState is the shard the sink is filling.
type shardState struct {
	index   int
	w       formats.ShardWriter
	first   string // the key of the shard's first sample
	skipped []manifest.Skipped
}

// abort drops the shard's temporary file, if it has one.
func (s *shardState) abort() {
	if s != nil && s.w != nil {
		s.w.Abort()
		s.w = nil
	}
}

// sink writes samples in index order and rolls shards at their planned
// boundaries, handing each filled shard to the closer.
func (r *run) sink(ctx context.Context, order <-chan *job, closeQ chan<- *shardState) (err error) {
	var cur *shardState
	defer func() { cur.abort() }()
	handOff := func() error {
		if cur == nil {
			return nil
		}
		select {
		case closeQ <- cur:
			cur = nil
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	meta := formats.ShardMeta{Version: r.opt.Version, Recipe: r.opt.Recipe, Seed: r.opt.Seed, Classes: r.l.Classes}
	var scratchBuf []byte // spilled samples' bytes, one at a time
	p := Progress{TotalItems: r.hi - r.lo}
	for _, k := range r.keep {
		p.TotalItems -= min(r.hi, (k.Index+1)*r.perShard) - k.Index*r.perShard
	}
	for {
		j, ok, err := recv(ctx, order)
		if err != nil {
			return err
		}
		if !ok {
			return handOff()
		}
		for c := j.c0; c < j.c1; c++ {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-j.done[c-j.c0]:
			}
			pos := j.pos + c - j.c0
			if shard := pos / r.perShard; cur == nil || cur.index != shard {
				if err := handOff(); err != nil {
					return err
				}
				cur = &shardState{index: shard}
			}
			if err := j.errs[c-j.c0]; err != nil {
				key := CopyKey(j.entry.Key, c, r.opt.Copies)
				if r.opt.Strict {
					return fmt.Errorf("%s: %w (--strict stops at the first bad input)", j.entry.Src.URI(j.entry.Key), err)
				}
				cur.skipped = append(cur.skipped, manifest.Skipped{Key: key, Reason: err.Error()})
				p.Skipped++
				p.Items++ // a skipped item is done too: the bar ends at 100%
				continue
			}
			col := j.emitted[c-j.c0]
			for i := range j.samples[c-j.c0] {
				if col != nil {
					if scratchBuf, err = col.load(i, scratchBuf); err != nil {
						return err
					}
				}
				s := &j.samples[c-j.c0][i]
				stamp(s, j.entry, c, r.opt.Copies)
				if cur.w == nil {
					path := filepath.Join(r.opt.Sink.Dir(), ShardName(cur.index, r.opt.Format.Ext()))
					w, err := r.opt.Format.Create(path, meta)
					if err != nil {
						return destErr(r.opt.Sink, filepath.Base(path), err)
					}
					if e, ok := w.(formats.Expecter); ok {
						// The shard's planned items, each giving as many
						// samples as this one.
						items := min(r.items, (cur.index+1)*r.perShard) - pos
						e.Expect(items * len(j.samples[c-j.c0]))
					}
					cur.w, cur.first = w, s.Key
				}
				if err := cur.w.Add(s); err != nil {
					if errno := syscall.Errno(0); errors.As(err, &errno) {
						// A writer that streams the shard fails here on a
						// full disk, a quota, a read-only file system.
						return destErr(r.opt.Sink, ShardName(cur.index, r.opt.Format.Ext()), err)
					}
					if errors.Is(err, formats.ErrIncompatible) {
						// Inputs of different kinds mixed in one SRC: not
						// damage to skip file by file, which would drop a
						// share of the dataset that depends on the order.
						return mixedKinds(j.entry.Src.URI(j.entry.Key), err, fmt.Sprintf("shard %d", cur.index), cur.first)
					}
					return fmt.Errorf("shard %d: %w", cur.index, err)
				}
				p.Samples++
				p.Bytes += s.Bytes()
			}
			if col != nil {
				col.unload()
				col.drop(&r.held)
				j.emitted[c-j.c0] = nil
			}
			if rc, ok := r.opt.Handler(j.entry.Key).(Recycler); ok {
				rc.Recycle(j.samples[c-j.c0])
			}
			j.samples[c-j.c0] = nil // written: the job may outlive it by many copies
			p.Items++
		}
		j.samples = nil
		if r.opt.Progress != nil {
			r.opt.Progress(p)
		}
	}
}

// closer finishes the shards the sink has filled, in order, while the sink
// fills the next: closing syncs and hashes the whole shard (about 0.2 s
// for 256 MiB), which would otherwise stall the sink and, once the FIFO
// is full, the workers. Its first failure stops the run.
func (r *run) closer(ctx context.Context, in <-chan *shardState) error {
	for s := range in {
		err := ctx.Err()
		if err == nil {
			err = r.finish(ctx, s)
		}
		s.abort() // nothing left to drop unless finish failed
		if err != nil {
			return err
		}
	}
	return nil
}

// finish closes a shard, publishes it and records it in the progress file
// so that an interrupted run can resume after it.
func (r *run) finish(ctx context.Context, s *shardState) error {
	sh := manifest.Shard{Index: s.index, Skipped: s.skipped}
	if s.w != nil {
		info, err := s.w.Close()
		s.w = nil
		if err != nil {
			return destErr(r.opt.Sink, ShardName(s.index, r.opt.Format.Ext()), err)
		}
		sh.ShardInfo = info
		if err := r.publishShard(ctx, info); err != nil {
			return err
		}
		r.written++
		r.newSamples += info.Count
		r.newBytes += info.Bytes
	}
	r.shards[s.index] = sh
	return r.publishJSON(ctx, progressName(&r.opt), r.manifest())
}

// publishShard publishes a finished shard, with the CRC32C its writer
// computed where the sink can use it (a gs:// upload then reads the shard
// once, to send it, rather than twice).
func (r *run) publishShard(ctx context.Context, info formats.ShardInfo) error {
	if sp, ok := r.opt.Sink.(cloudsrc.SummedPublisher); ok {
		if crc, err := strconv.ParseUint(info.CRC32C, 16, 32); err == nil {
			return sp.PublishSummed(ctx, info.File, uint32(crc), info.Bytes)
		}
	}
	return r.opt.Sink.Publish(ctx, info.File)
}

var hashBufPool = sync.Pool{New: func() any { b := make([]byte, 4<<20); return &b }}

func hashReader(rd io.Reader) (string, int64, error) {
	h := sha256.New()
	buf := hashBufPool.Get().(*[]byte)
	defer hashBufPool.Put(buf)
	var n int64
	for {
		k, err := rd.Read(*buf)
		h.Write((*buf)[:k])
		n += int64(k)
		if err == io.EOF {
			return hex.EncodeToString(h.Sum(nil)), n, nil
		}
		if err != nil {
			return "", n, err
		}
	}
}

// mixedKinds is the error of a run that meets a sample its shard cannot
// take beside the shard's first (formats.ErrIncompatible): what, where,
// and the two ways out.
func mixedKinds(uri string, err error, shard, first string) error {
	return fmt.Errorf("%s: %w; %s started with %s: one shard holds one kind of sample, so convert such inputs in separate runs (an input list or a glob picks them) or give each its own shard (--items-per-shard 1)",
		uri, err, shard, first)
}
