package gpu

import (
	"fmt"
	"sync"
)

// hostDevice implements Device in anonymous memory mappings, so every pipeline that
// feeds a GPU can run, and be tested, on a machine without one.
type hostDevice struct {
	mu     sync.Mutex
	next   DevicePtr
	allocs map[DevicePtr][]byte
	events uintptr
}

// NewHost returns a Device whose "device memory" is host memory and whose
// copies are copy(). Its results measure memory bandwidth, never a GPU.
func NewHost() Device {
	return &hostDevice{next: 1, allocs: make(map[DevicePtr][]byte)}
}

func (*hostDevice) Name() string { return "host memory (no GPU)" }
func (*hostDevice) IsGPU() bool  { return false }

func (*hostDevice) AllocHost(n int) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("allocate %d bytes of host memory", n)
	}
	b, err := mapMem(n)
	if err != nil {
		return nil, fmt.Errorf("allocate %d bytes of host memory: %w", n, err)
	}
	return b, nil
}

func (*hostDevice) FreeHost(b []byte) error { return unmapMem(b) }

func (d *hostDevice) Alloc(n int) (DevicePtr, error) {
	if n <= 0 {
		return 0, fmt.Errorf("allocate %d bytes of device memory", n)
	}
	b, err := mapMem(n)
	if err != nil {
		return 0, fmt.Errorf("allocate %d bytes of device memory: %w", n, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.next
	d.next++
	d.allocs[p] = b
	return p, nil
}

func (d *hostDevice) Free(p DevicePtr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, ok := d.allocs[p]
	if !ok {
		return fmt.Errorf("free %#x: not allocated", p)
	}
	delete(d.allocs, p)
	return unmapMem(b)
}

func (d *hostDevice) mem(p DevicePtr, n int) ([]byte, error) {
	d.mu.Lock()
	b, ok := d.allocs[p]
	d.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("device pointer %#x: not allocated", p)
	}
	if n > len(b) {
		return nil, fmt.Errorf("copy of %d bytes overruns an allocation of %d", n, len(b))
	}
	return b, nil
}

func (*hostDevice) NewStream() (Stream, error) { return 1, nil }

func (d *hostDevice) CopyHtoDAsync(dst DevicePtr, src []byte, _ Stream) error {
	b, err := d.mem(dst, len(src))
	if err != nil {
		return err
	}
	copy(b, src)
	return nil
}

func (d *hostDevice) CopyDtoH(dst []byte, src DevicePtr) error {
	b, err := d.mem(src, len(dst))
	if err != nil {
		return err
	}
	copy(dst, b)
	return nil
}

func (*hostDevice) Sync(Stream) error { return nil }

// Events have nothing to wait for: the host device's copies are done when
// CopyHtoDAsync returns.
func (d *hostDevice) NewEvent() (Event, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.events++
	return Event(d.events), nil
}

func (*hostDevice) Record(Event, Stream) error { return nil }
func (*hostDevice) Wait(Event) error           { return nil }
func (*hostDevice) FreeEvent(Event) error      { return nil }

// Close frees the device memory still allocated.
func (d *hostDevice) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for p, b := range d.allocs {
		delete(d.allocs, p)
		if err := unmapMem(b); err != nil {
			return err
		}
	}
	return nil
}

// touch writes one byte per page so that the page faults happen now, not
// inside a timed copy (fresh pages cost more than the copy on these VMs).
func touch(b []byte) {
	for i := 0; i < len(b); i += 4096 {
		b[i] = 0
	}
}
