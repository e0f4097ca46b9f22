package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// CUDA driver API result codes that get their own message.
const (
	cudaSuccess            = 0
	cudaNoDevice           = 100
	cudaInsufficientDriver = 35
)

// cudaAPI holds the driver entry points, bound with purego. The signatures
// follow cuda.h: CUresult is a C enum (int32), CUdevice an int, CUdeviceptr
// an unsigned long long, CUcontext and CUstream opaque pointers.
type cudaAPI struct {
	cuInit              func(flags uint32) int32
	cuDeviceGetCount    func(count *int32) int32
	cuDeviceGet         func(dev *int32, ordinal int32) int32
	cuDeviceGetName     func(name *byte, n int32, dev int32) int32
	cuDeviceGetPCIBusId func(id *byte, n int32, dev int32) int32
	cuCtxCreate         func(ctx *uintptr, flags uint32, dev int32) int32
	cuCtxDestroy        func(ctx uintptr) int32
	cuMemAllocHost      func(p *unsafe.Pointer, size uintptr) int32
	cuMemFreeHost       func(p unsafe.Pointer) int32
	cuMemAlloc          func(p *uint64, size uintptr) int32
	cuMemFree           func(p uint64) int32
	cuMemcpyHtoDAsync   func(dst uint64, src unsafe.Pointer, n uintptr, s uintptr) int32
	cuMemcpyDtoH        func(dst unsafe.Pointer, src uint64, n uintptr) int32
	cuStreamCreate      func(s *uintptr, flags uint32) int32
	cuStreamSynchronize func(s uintptr) int32
	cuCtxSetCurrent     func(ctx uintptr) int32
	cuEventCreate       func(e *uintptr, flags uint32) int32
	cuEventRecord       func(e uintptr, s uintptr) int32
	cuEventSynchronize  func(e uintptr) int32
	cuEventDestroy      func(e uintptr) int32
	cuGetErrorName      func(code int32, name **byte) int32
}

// cuEventCreate flags: wait by blocking the thread rather than spinning
// (the readers need the cores), and skip timing, which events then do not
// record.
const (
	cuEventBlockingSync  = 0x1
	cuEventDisableTiming = 0x2
)

var (
	loadOnce sync.Once
	api      *cudaAPI
	loadErr  error
)

func loadCUDA() (*cudaAPI, error) {
	loadOnce.Do(func() {
		lib, err := purego.Dlopen("libcuda.so.1", purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			loadErr = noGPU("libcuda.so.1 not found: no NVIDIA driver on this machine")
			return
		}
		a := new(cudaAPI)
		// Calls the driver may lack; they are then skipped.
		optional := map[string]bool{"cuDeviceGetPCIBusId": true}
		for _, f := range []struct {
			fn   any
			name string
		}{
			{&a.cuInit, "cuInit"},
			{&a.cuDeviceGetCount, "cuDeviceGetCount"},
			{&a.cuDeviceGet, "cuDeviceGet"},
			{&a.cuDeviceGetName, "cuDeviceGetName"},
			{&a.cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId"},
			{&a.cuCtxCreate, "cuCtxCreate_v2"},
			{&a.cuCtxDestroy, "cuCtxDestroy_v2"},
			{&a.cuMemAllocHost, "cuMemAllocHost_v2"},
			{&a.cuMemFreeHost, "cuMemFreeHost"},
			{&a.cuMemAlloc, "cuMemAlloc_v2"},
			{&a.cuMemFree, "cuMemFree_v2"},
			{&a.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"},
			{&a.cuMemcpyDtoH, "cuMemcpyDtoH_v2"},
			{&a.cuStreamCreate, "cuStreamCreate"},
			{&a.cuStreamSynchronize, "cuStreamSynchronize"},
			{&a.cuCtxSetCurrent, "cuCtxSetCurrent"},
			{&a.cuEventCreate, "cuEventCreate"},
			{&a.cuEventRecord, "cuEventRecord"},
			{&a.cuEventSynchronize, "cuEventSynchronize"},
			{&a.cuEventDestroy, "cuEventDestroy_v2"},
			{&a.cuGetErrorName, "cuGetErrorName"},
		} {
			// RegisterLibFunc panics on a missing symbol; check first so an
			// old driver gets a message instead.
			if _, err := purego.Dlsym(lib, f.name); err != nil {
				if optional[f.name] {
					continue
				}
				loadErr = noGPU("libcuda.so.1 lacks %s: the NVIDIA driver is too old", f.name)
				return
			}
			purego.RegisterLibFunc(f.fn, lib, f.name)
		}
		api = a
	})
	return api, loadErr
}

// cudaError names a failed driver call and its CUresult.
func (a *cudaAPI) err(call string, code int32) error {
	if code == cudaSuccess {
		return nil
	}
	var p *byte
	name := fmt.Sprintf("CUresult %d", code)
	if a.cuGetErrorName(code, &p) == cudaSuccess && p != nil {
		name = cString(p)
	}
	return fmt.Errorf("%s: %s", call, name)
}

// cString copies a NUL-terminated C string owned by the driver.
func cString(p *byte) string {
	var b []byte
	for q := unsafe.Pointer(p); *(*byte)(q) != 0; q = unsafe.Add(q, 1) {
		b = append(b, *(*byte)(q))
	}
	return string(b)
}

// cudaDevice runs every driver call on one goroutine locked to its OS
// thread, because a CUDA context is current per thread: calls made from
// any other thread would fail with CUDA_ERROR_INVALID_CONTEXT.
type cudaDevice struct {
	api   *cudaAPI
	name  string
	bus   string // PCI bus ID, "" if the driver did not say
	ctx   uintptr
	calls chan func()
	quit  chan struct{} // closed by Close after the context is destroyed
	done  chan struct{} // closed when the loop has returned
	once  sync.Once
}

// OpenCUDA creates a context on GPU index through the CUDA driver. Errors
// that mean there is no usable GPU wrap ErrNoGPU.
func OpenCUDA(index int) (Device, error) {
	a, err := loadCUDA()
	if err != nil {
		return nil, err
	}
	d := &cudaDevice{api: a, calls: make(chan func()), quit: make(chan struct{}), done: make(chan struct{})}
	started := make(chan error, 1)
	go d.loop(index, started)
	if err := <-started; err != nil {
		return nil, err
	}
	return d, nil
}

func (d *cudaDevice) loop(index int, started chan<- error) {
	defer close(d.done)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.init(index); err != nil {
		started <- err
		return
	}
	started <- nil
	for {
		select {
		case f := <-d.calls:
			f()
		case <-d.quit:
			return
		}
	}
}

func (d *cudaDevice) init(index int) error {
	a := d.api
	switch code := a.cuInit(0); code {
	case cudaSuccess:
	case cudaNoDevice:
		return noGPU("no CUDA device: the NVIDIA driver sees no GPU on this machine")
	case cudaInsufficientDriver:
		return noGPU("the NVIDIA driver is too old for this CUDA driver library")
	default:
		return fmt.Errorf("%w: %w", ErrNoGPU, a.err("cuInit", code))
	}
	var n int32
	if err := a.err("cuDeviceGetCount", a.cuDeviceGetCount(&n)); err != nil {
		return fmt.Errorf("%w: %w", ErrNoGPU, err)
	}
	if index < 0 || index >= int(n) {
		return noGPU("GPU %d not found: this machine has %d", index, n)
	}
	var dev int32
	if err := a.err("cuDeviceGet", a.cuDeviceGet(&dev, int32(index))); err != nil {
		return err
	}
	buf := make([]byte, 256)
	if err := a.err("cuDeviceGetName", a.cuDeviceGetName(&buf[0], int32(len(buf)), dev)); err != nil {
		return err
	}
	d.name = fmt.Sprintf("GPU %d: %s", index, cBytes(buf))
	bus := make([]byte, 32) // "0000:17:00.0" and its NUL
	if a.cuDeviceGetPCIBusId != nil && a.cuDeviceGetPCIBusId(&bus[0], int32(len(bus)), dev) == cudaSuccess {
		d.bus = string(cBytes(bus))
	}
	return a.err("cuCtxCreate_v2", a.cuCtxCreate(&d.ctx, 0, dev))
}

var errClosed = errors.New("CUDA device is closed")

// do runs f on the context's thread.
func (d *cudaDevice) do(f func() error) (err error) {
	errc := make(chan error, 1)
	select {
	case d.calls <- func() { errc <- f() }:
	case <-d.done:
		return errClosed
	}
	return <-errc
}

// cBytes is b up to its first NUL.
func cBytes(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

func (d *cudaDevice) Name() string { return d.name }

// PCIBusID returns the GPU's PCI bus ID as CUDA gives it.
func (d *cudaDevice) PCIBusID() string { return d.bus }
func (d *cudaDevice) IsGPU() bool      { return true }

func (d *cudaDevice) AllocHost(n int) ([]byte, error) {
	var p unsafe.Pointer
	err := d.do(func() error { return d.api.err("cuMemAllocHost_v2", d.api.cuMemAllocHost(&p, uintptr(n))) })
	if err != nil {
		return nil, fmt.Errorf("allocate %d bytes of pinned host memory: %w", n, err)
	}
	return unsafe.Slice((*byte)(p), n), nil
}

func (d *cudaDevice) FreeHost(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	return d.do(func() error { return d.api.err("cuMemFreeHost", d.api.cuMemFreeHost(p)) })
}

func (d *cudaDevice) Alloc(n int) (DevicePtr, error) {
	var p uint64
	err := d.do(func() error { return d.api.err("cuMemAlloc_v2", d.api.cuMemAlloc(&p, uintptr(n))) })
	if err != nil {
		return 0, fmt.Errorf("allocate %d bytes on %s: %w", n, d.name, err)
	}
	return DevicePtr(p), nil
}

func (d *cudaDevice) Free(p DevicePtr) error {
	return d.do(func() error { return d.api.err("cuMemFree_v2", d.api.cuMemFree(uint64(p))) })
}

func (d *cudaDevice) NewStream() (Stream, error) {
	var s uintptr
	err := d.do(func() error { return d.api.err("cuStreamCreate", d.api.cuStreamCreate(&s, 0)) })
	return Stream(s), err
}

func (d *cudaDevice) CopyHtoDAsync(dst DevicePtr, src []byte, s Stream) error {
	if len(src) == 0 {
		return nil
	}
	p := unsafe.Pointer(unsafe.SliceData(src))
	return d.do(func() error {
		return d.api.err("cuMemcpyHtoDAsync_v2", d.api.cuMemcpyHtoDAsync(uint64(dst), p, uintptr(len(src)), uintptr(s)))
	})
}

func (d *cudaDevice) CopyDtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	return d.do(func() error {
		return d.api.err("cuMemcpyDtoH_v2", d.api.cuMemcpyDtoH(unsafe.Pointer(unsafe.SliceData(dst)), uint64(src), uintptr(len(dst))))
	})
}

func (d *cudaDevice) Sync(s Stream) error {
	return d.do(func() error { return d.api.err("cuStreamSynchronize", d.api.cuStreamSynchronize(uintptr(s))) })
}

func (d *cudaDevice) NewEvent() (Event, error) {
	var e uintptr
	err := d.do(func() error {
		return d.api.err("cuEventCreate", d.api.cuEventCreate(&e, cuEventBlockingSync|cuEventDisableTiming))
	})
	return Event(e), err
}

func (d *cudaDevice) Record(e Event, s Stream) error {
	return d.do(func() error { return d.api.err("cuEventRecord", d.api.cuEventRecord(uintptr(e), uintptr(s))) })
}

// Wait blocks the calling goroutine's own thread, not the device's: the
// context is made current there too (a context may be current on several
// threads), so copies keep being queued while readers wait for a slot.
func (d *cudaDevice) Wait(e Event) error {
	select {
	case <-d.done:
		return errClosed
	default:
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.api.err("cuCtxSetCurrent", d.api.cuCtxSetCurrent(d.ctx)); err != nil {
		return err
	}
	return d.api.err("cuEventSynchronize", d.api.cuEventSynchronize(uintptr(e)))
}

func (d *cudaDevice) FreeEvent(e Event) error {
	return d.do(func() error { return d.api.err("cuEventDestroy_v2", d.api.cuEventDestroy(uintptr(e))) })
}

// Close destroys the context, which frees its streams and memory.
func (d *cudaDevice) Close() error {
	var err error
	d.once.Do(func() {
		err = d.do(func() error { return d.api.err("cuCtxDestroy_v2", d.api.cuCtxDestroy(d.ctx)) })
		close(d.quit)
		<-d.done
	})
	return err
}
