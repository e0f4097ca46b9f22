package bench

import (
	"context"
	"time"

	"github.com/prep-dev/prep/bench/gpu"
)

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
