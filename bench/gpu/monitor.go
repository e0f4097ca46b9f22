//go:build cgo

package gpu

import (
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
	return openMonitor(pid, func(n int) (nvml.Device, error) {
		if index < 0 || index >= n {
			return nil, noGPU("GPU %d not found: this machine has %d", index, n)
		}
		dev, ret := nvml.DeviceGetHandleByIndex(index)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML GPU %d: %s", index, nvml.ErrorString(ret))
		}
		return dev, nil
	})
}

// OpenMonitorBus opens the GPU at PCI bus ID bus (as CUDA gives it, for
// example "0000:17:00.0") through NVML, as OpenMonitor does.
func OpenMonitorBus(bus string, pid int) (*Monitor, error) {
	return openMonitor(pid, func(int) (nvml.Device, error) {
		dev, ret := nvml.DeviceGetHandleByPciBusId(bus)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML GPU at PCI bus %s: %s", bus, nvml.ErrorString(ret))
		}
		return dev, nil
	})
}

// openMonitor starts NVML and opens the device get picks among the n
// the machine has.
func openMonitor(pid int, get func(n int) (nvml.Device, error)) (*Monitor, error) {
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
		return nil, fmt.Errorf("%w: NVML device count: %s", ErrNoGPU, nvml.ErrorString(ret))
	}
	dev, err := get(n)
	if err != nil {
		nvml.Shutdown()
		return nil, err
	}
	name, _ := dev.GetName()
	label := "GPU: " + name
	if index, ret := dev.GetIndex(); ret == nvml.SUCCESS {
		label = fmt.Sprintf("GPU %d: %s", index, name)
	}
	return &Monitor{dev: dev, name: label, pid: pid}, nil
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

// Sample takes one reading. With a pid, an NVML that cannot report
// per-process utilization is an error, never a reading of 0%.
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
		procs, ret := m.dev.GetProcessUtilization(m.lastSeen)
		util, last, err := processUtil(procs, ret, m.pid, m.lastSeen)
		if err != nil {
			return s, fmt.Errorf("%s: %w", m.name, err)
		}
		s.Util, m.lastSeen = util, last
	}
	if l, err := m.Link(); err == nil {
		s.Link = l
	}
	if rx, ret := m.dev.GetPcieThroughput(nvml.PCIE_UTIL_RX_BYTES); ret == nvml.SUCCESS {
		s.PCIeRX = float64(rx) * 1024 // NVML reports KB/s
	}
	if mem, ret := m.dev.GetMemoryInfo(); ret == nvml.SUCCESS {
		s.MemUsed = mem.Used
	}
	return s, nil
}

// processUtil returns pid's SM utilization in the samples NVML took
// since last, and the timestamp to ask from next time. NVML's "not found"
// means it took no sample in that window because no process ran a kernel:
// a real 0%. A pid missing from the samples ran none either. Any other
// error is one: reading it as 0% would report a busy GPU as idle.
func processUtil(procs []nvml.ProcessUtilizationSample, ret nvml.Return, pid int, last uint64) (int, uint64, error) {
	switch ret {
	case nvml.SUCCESS:
	case nvml.ERROR_NOT_FOUND:
		return 0, last, nil
	case nvml.ERROR_NOT_SUPPORTED:
		return 0, last, fmt.Errorf("per-process utilization (--pid) is not supported on this GPU or driver: watch the whole GPU without --pid")
	default:
		return 0, last, fmt.Errorf("utilization of pid %d: %s", pid, nvml.ErrorString(ret))
	}
	util := 0
	for _, p := range procs {
		last = max(last, p.TimeStamp)
		if int(p.Pid) == pid {
			util = max(util, int(p.SmUtil))
		}
	}
	return util, last, nil
}

// Close releases NVML.
func (m *Monitor) Close() error {
	if ret := nvml.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("NVML shutdown: %s", nvml.ErrorString(ret))
	}
	return nil
}
