// Package gpu is the small slice of the CUDA driver API and of NVML that
// bench needs: pinned host buffers, device buffers, asynchronous
// host-to-device copies on a stream, and utilization sampling. The NVIDIA
// libraries are loaded at run time, so prep builds and runs on machines
// without them; NewHost stands in for a GPU there.
package gpu

import (
	"errors"
	"fmt"
)

// ErrNoGPU is wrapped by every error that means "no usable GPU here": a
// missing driver library, no device, or a device index out of range.
var ErrNoGPU = errors.New("no GPU")

// DevicePtr is an address in device memory.
type DevicePtr uint64

// Stream is a queue of device work; operations on one stream run in order.
type Stream uintptr

// Event marks a point in a stream's queue: waiting on it waits for the
// work queued before it was recorded, and no more.
type Event uintptr

// Device is a copy target: a CUDA GPU, or host memory where there is none.
// Its methods are safe for concurrent use.
type Device interface {
	Name() string
	IsGPU() bool
	// AllocHost returns page-locked host memory, which the device can copy
	// from asynchronously and at full link speed.
	AllocHost(n int) ([]byte, error)
	FreeHost(b []byte) error
	Alloc(n int) (DevicePtr, error)
	Free(p DevicePtr) error
	NewStream() (Stream, error)
	// CopyHtoDAsync queues a copy of src to dst on s and may return before
	// it is done. src must come from AllocHost and must not change until
	// an event recorded after the copy, or the stream, is waited on.
	CopyHtoDAsync(dst DevicePtr, src []byte, s Stream) error
	// CopyDtoH copies device memory back, synchronously; for checks.
	CopyDtoH(dst []byte, src DevicePtr) error
	// Sync waits for all the work queued on s.
	Sync(s Stream) error
	NewEvent() (Event, error)
	// Record marks the current end of s's queue with e.
	Record(e Event, s Stream) error
	// Wait blocks until the work queued before e's latest Record is done.
	// It may be called from any goroutine, alongside other calls.
	Wait(e Event) error
	FreeEvent(e Event) error
	Close() error
}

// PCIDevice is implemented by Devices that know their PCI bus ID, by
// which NVML finds the same GPU (OpenMonitorBus) whatever order
// CUDA_VISIBLE_DEVICES or CUDA_DEVICE_ORDER give CUDA's indices.
type PCIDevice interface {
	PCIBusID() string
}

// noGPU builds an error that wraps ErrNoGPU but prints only msg.
func noGPU(format string, args ...any) error {
	return noGPUError(fmt.Sprintf(format, args...))
}

type noGPUError string

func (e noGPUError) Error() string        { return string(e) }
func (e noGPUError) Is(target error) bool { return target == ErrNoGPU }
