//go:build !cgo

package gpu

// Monitor samples a GPU through NVML; go-nvml needs cgo, so a build
// without it has none.
type Monitor struct{}

// OpenMonitor reports that this build cannot reach NVML.
func OpenMonitor(index, pid int) (*Monitor, error) {
	return nil, noGPU("NVML needs a cgo build of prep (CGO_ENABLED=1)")
}

// OpenMonitorBus reports that this build cannot reach NVML.
func OpenMonitorBus(bus string, pid int) (*Monitor, error) { return OpenMonitor(0, pid) }

func (*Monitor) Name() string            { return "" }
func (*Monitor) Link() (Link, error)     { return Link{}, ErrNoGPU }
func (*Monitor) Sample() (Sample, error) { return Sample{}, ErrNoGPU }
func (*Monitor) Close() error            { return nil }
