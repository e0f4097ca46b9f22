package bench

import "github.com/prep-dev/prep/bench/gpu"

// slot is one pinned batch buffer. Its copy to the device is queued, and
// ev recorded after it: whoever refills the slot waits on ev first.
type slot struct {
	host  []byte
	ev    gpu.Event
	n     int
	shard int
}

// ring is Feed's memory: pinned host slots that batches are assembled in,
// the device buffers their copies land in, and the stream the copies queue
// on. A slot goes round: free, filled by a reader, full, its copy queued
// by the copier, free again with that copy still in flight.
type ring struct {
	dev     gpu.Device
	stream  gpu.Stream
	size    int // bytes per slot and per device buffer
	slots   []*slot
	devBufs []gpu.DevicePtr // copy targets, taken in turn; not tied to a slot
	free    chan *slot      // holds every slot at the start, so sends never block
	full    chan *slot      // closed by the owner of the readers
}

// newRing allocates n slots of size bytes each, with a device buffer and
// an event apiece, and puts every slot in free. On error it releases what
// it allocated.
func newRing(dev gpu.Device, n, size int) (*ring, error) {
	stream, err := dev.NewStream()
	if err != nil {
		return nil, err
	}
	r := &ring{dev: dev, stream: stream, size: size, slots: make([]*slot, n), devBufs: make([]gpu.DevicePtr, n)}
	for i := range r.slots {
		if err := r.alloc(i); err != nil {
			r.release()
			return nil, err
		}
	}
	r.free = make(chan *slot, n)
	for _, s := range r.slots {
		r.free <- s
	}
	r.full = make(chan *slot)
	return r, nil
}

// alloc allocates slot i and device buffer i.
func (r *ring) alloc(i int) error {
	ev, err := r.dev.NewEvent()
	if err != nil {
		return err
	}
	host, err := r.dev.AllocHost(r.size)
	if err != nil {
		r.dev.FreeEvent(ev)
		return err
	}
	r.slots[i] = &slot{host: host, ev: ev}
	r.devBufs[i], err = r.dev.Alloc(r.size)
	return err
}

// release waits for the copies in flight and frees what the ring holds.
func (r *ring) release() {
	// No copy may still read a buffer that is freed.
	r.dev.Sync(r.stream)
	for i := range r.slots {
		if r.slots[i] != nil {
			r.dev.FreeHost(r.slots[i].host)
			r.dev.FreeEvent(r.slots[i].ev)
		}
		if r.devBufs[i] != 0 {
			r.dev.Free(r.devBufs[i])
		}
	}
}
