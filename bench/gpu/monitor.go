//go:build cgo

package gpu

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Monitor samples one GPU through NVML.
type Monitor struct {
	dev      nvml.Device
	name     string
	pid      int
	lastSeen uint64
	start    time.Time
}

// OpenMonitor opens GPU index through NVML. With pid > 0, Util reports that
// process's SM utilization instead of the whole device's.
func OpenMonitor(index, pid int) (*Monitor, error) {
	switch ret := nvml.Init(); ret {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return nil, noGPU("libnvidia-ml.so.1 not found: no NVIDIA driver on this machine")
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return nil, noGPU("NVML: the NVIDIA kernel driver is not loaded")
	default:
		return nil, fmt.Errorf("%w: NVML init: %s", ErrNoGPU, nvml.ErrorString(ret))
	}
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		nvml.Shutdown()
		return nil, fmt.Errorf("NVML device count: %s", nvml.ErrorString(ret))
	}
	if index < 0 || index >= n {
		nvml.Shutdown()
		return nil, noGPU("GPU %d not found: this machine has %d", index, n)
	}
	dev, ret := nvml.DeviceGetHandleByIndex(index)
	if ret != nvml.SUCCESS {
		nvml.Shutdown()
		return nil, fmt.Errorf("NVML GPU %d: %s", index, nvml.ErrorString(ret))
	}
	name, _ := dev.GetName()
	return &Monitor{dev: dev, name: fmt.Sprintf("GPU %d: %s", index, name), pid: pid}, nil
}

// Name describes the GPU.
func (m *Monitor) Name() string { return m.name }

// Link returns the PCIe link as currently trained (it drops to a lower
// generation when idle on some boards, so read it under load).
func (m *Monitor) Link() (Link, error) {
	gen, ret := m.dev.GetCurrPcieLinkGeneration()
	if ret != nvml.SUCCESS {
		return Link{}, fmt.Errorf("PCIe link generation: %s", nvml.ErrorString(ret))
	}
	width, ret := m.dev.GetCurrPcieLinkWidth()
	if ret != nvml.SUCCESS {
		return Link{}, fmt.Errorf("PCIe link width: %s", nvml.ErrorString(ret))
	}
	return Link{Gen: gen, Width: width}, nil
}

// Sample takes one reading.
func (m *Monitor) Sample() (Sample, error) {
	if m.start.IsZero() {
		m.start = time.Now()
	}
	s := Sample{At: time.Since(m.start)}
	u, ret := m.dev.GetUtilizationRates()
	if ret != nvml.SUCCESS {
		return s, fmt.Errorf("%s utilization: %s", m.name, nvml.ErrorString(ret))
	}
	s.Util, s.MemUtil = int(u.Gpu), int(u.Memory)
	if m.pid > 0 {
		s.Util = m.processUtil()
	}
	if rx, ret := m.dev.GetPcieThroughput(nvml.PCIE_UTIL_RX_BYTES); ret == nvml.SUCCESS {
		s.PCIeRX = float64(rx) * 1024 // NVML reports KB/s
	}
	if mem, ret := m.dev.GetMemoryInfo(); ret == nvml.SUCCESS {
		s.MemUsed = mem.Used
	}
	return s, nil
}

// processUtil returns the SM utilization of m.pid in the samples NVML took
// since the last call; no sample means the process ran no kernel.
func (m *Monitor) processUtil() int {
	procs, ret := m.dev.GetProcessUtilization(m.lastSeen)
	if ret != nvml.SUCCESS {
		return 0
	}
	util := 0
	for _, p := range procs {
		m.lastSeen = max(m.lastSeen, p.TimeStamp)
		if int(p.Pid) == m.pid {
			util = max(util, int(p.SmUtil))
		}
	}
	return util
}

// Run samples every interval until ctx ends or duration passes (0: no
// limit), calling fn with each sample from the calling goroutine.
func (m *Monitor) Run(ctx context.Context, interval, duration time.Duration, fn func(Sample)) error {
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		s, err := m.Sample()
		if err != nil {
			return err
		}
		fn(s)
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Close releases NVML.
func (m *Monitor) Close() error {
	if ret := nvml.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("NVML shutdown: %s", nvml.ErrorString(ret))
	}
	return nil
}
