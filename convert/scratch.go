package convert

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync/atomic"

	"github.com/prep-dev/prep/formats"
)

// DefaultMemoryBudget is how many bytes of an Emitter's samples the
// pipeline holds in memory unless Options say otherwise.
const DefaultMemoryBudget = 256 << 20

// scratch is an unlinked file beside the shards that holds the tensor
// bytes of samples over the memory budget until the sink writes them.
type scratch struct {
	f    *os.File
	dir  string
	name string // to remove at close where an open file cannot be removed
	end  int64
}

// scratchErr stops the run: the samples cannot wait anywhere.
func scratchErr(dir string, err error) error {
	return Fatal(fmt.Errorf("samples over the memory budget wait in a scratch file in %s, which failed (%w): free space there, or hold fewer frames with --max-frames, --every or --fps", dir, err))
}

func newScratch(dir string) (*scratch, error) {
	f, err := os.CreateTemp(dir, ".prep-scratch-*")
	if err != nil {
		return nil, scratchErr(dir, err)
	}
	s := &scratch{f: f, dir: dir}
	// Removed at once where the system allows it, so that nothing is left
	// behind whatever ends the run.
	if os.Remove(f.Name()) != nil {
		s.name = f.Name()
	}
	return s, nil
}

// put appends b and returns its offset.
func (s *scratch) put(b []byte) (int64, error) {
	off := s.end
	if _, err := s.f.WriteAt(b, off); err != nil {
		return 0, scratchErr(s.dir, err)
	}
	s.end += int64(len(b))
	return off, nil
}

func (s *scratch) close() {
	s.f.Close()
	if s.name != "" {
		os.Remove(s.name)
	}
}

// spillRef is where the bytes of a sample's field went.
type spillRef struct {
	sample, field int
	off           int64
	n             int
}

// collected is one copy's samples as an Emitter gave them: in memory
// while the run's budget lasts, the bytes of the rest in a scratch file
// (their fields' Data nil until the sink loads them).
type collected struct {
	samples []formats.Sample
	held    int64 // bytes counted against the budget
	scratch *scratch
	refs    []spillRef // in sample order
	next    int        // the first ref load has not read
}

// emitTo runs an Emitter for task t, keeping what it emits within the
// run's memory budget, and returns the copy's samples.
func (r *run) emitTo(ctx context.Context, em Emitter, t task, rng *rand.Rand) (*collected, error) {
	c := &collected{}
	rc, _ := em.(Recycler)
	err := em.Emit(ctx, t.j.in, t.c, rng, func(s formats.Sample) error {
		n := s.Bytes()
		if r.held.Add(n) <= r.opt.MemoryBudget {
			c.held += n
			c.samples = append(c.samples, s)
			return nil
		}
		r.held.Add(-n)
		return r.spill(c, s, rc)
	})
	if err != nil {
		c.drop(&r.held)
		return nil, err
	}
	return c, nil
}

// spill moves s's bytes to c's scratch file and hands them back to the
// handler that made them.
func (r *run) spill(c *collected, s formats.Sample, rc Recycler) error {
	if c.scratch == nil {
		sc, err := newScratch(r.opt.Sink.Dir())
		if err != nil {
			return err
		}
		c.scratch = sc
	}
	i := len(c.samples)
	for k, f := range s.Fields {
		off, err := c.scratch.put(f.Data)
		if err != nil {
			return err
		}
		c.refs = append(c.refs, spillRef{sample: i, field: k, off: off, n: len(f.Data)})
		r.scratched.Add(int64(len(f.Data)))
	}
	if rc != nil {
		// Recycle keeps the bytes and drops the Fields of the sample it
		// is given, here a stand-in, so s keeps its shapes.
		rc.Recycle([]formats.Sample{{Fields: s.Fields}})
	}
	for k := range s.Fields { // s's fields are the pipeline's once emitted
		s.Fields[k].Data = nil
	}
	c.samples = append(c.samples, s)
	return nil
}

// load gives sample i's spilled fields their bytes, in buf's memory,
// which it returns grown as needed; they are valid until the next load.
// The sink loads samples in order.
func (c *collected) load(i int, buf []byte) ([]byte, error) {
	end, total := c.next, 0
	for ; end < len(c.refs) && c.refs[end].sample == i; end++ {
		total += c.refs[end].n
	}
	if total == 0 {
		c.next = end
		return buf, nil
	}
	buf = slices.Grow(buf[:0], total)[:total]
	at := 0
	for _, ref := range c.refs[c.next:end] {
		b := buf[at : at+ref.n]
		if _, err := c.scratch.f.ReadAt(b, ref.off); err != nil {
			return buf, Fatal(fmt.Errorf("read back samples over the memory budget: %w", err))
		}
		c.samples[i].Fields[ref.field].Data = b
		at += ref.n
	}
	c.next = end
	return buf, nil
}

// unload forgets the loaded bytes, which are the sink's, not the
// handler's to recycle.
func (c *collected) unload() {
	for _, ref := range c.refs {
		c.samples[ref.sample].Fields[ref.field].Data = nil
	}
}

// drop releases what c holds: its budget and its scratch file.
func (c *collected) drop(held *atomic.Int64) {
	held.Add(-c.held)
	c.held = 0
	if c.scratch != nil {
		c.scratch.close()
		c.scratch = nil
	}
}
