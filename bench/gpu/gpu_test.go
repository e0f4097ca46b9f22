package gpu

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prep-dev/prep/internal/testenv"
)

// roundTrip copies a pattern host → device → host through d.
func roundTrip(t *testing.T, d Device) {
	t.Helper()
	const n = 3<<20 + 17
	src, err := d.AllocHost(n)
	if err != nil {
		t.Fatal(err)
	}
	defer d.FreeHost(src)
	for i := range src {
		src[i] = byte(i*7 + i>>11)
	}
	p, err := d.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(p)
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	ev, err := d.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	defer d.FreeEvent(ev)
	if err := d.CopyHtoDAsync(p, src, s); err != nil {
		t.Fatal(err)
	}
	if err := d.Record(ev, s); err != nil {
		t.Fatal(err)
	}
	// Waited on from another goroutine, as feed's readers do.
	werr := make(chan error)
	go func() { werr <- d.Wait(ev) }()
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	back := make([]byte, n)
	if err := d.CopyDtoH(back, p); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, src) {
		t.Fatal("device copy differs from the source")
	}
}

func TestHostDevice(t *testing.T) {
	d := NewHost()
	defer d.Close()
	if d.IsGPU() || d.Name() != "host memory (no GPU)" {
		t.Fatalf("host device says IsGPU=%v name=%q", d.IsGPU(), d.Name())
	}
	roundTrip(t, d)
	p, _ := d.Alloc(10)
	if err := d.CopyHtoDAsync(p, make([]byte, 11), 1); err == nil {
		t.Fatal("an 11-byte copy into a 10-byte allocation succeeded")
	}
	if err := d.Free(p); err != nil {
		t.Fatal(err)
	}
	if err := d.Free(p); err == nil {
		t.Fatal("double free succeeded")
	}
}

// haveLib reports whether the dynamic linker knows a library.
func haveLib(name string) bool {
	out, err := exec.Command("/sbin/ldconfig", "-p").Output()
	return err == nil && strings.Contains(string(out), name)
}

// TestOpenCUDA runs a real round trip where a GPU exists and checks the
// no-driver error where none does.
func TestOpenCUDA(t *testing.T) {
	d, err := OpenCUDA(0)
	if err == nil {
		defer d.Close()
		if !d.IsGPU() || !strings.HasPrefix(d.Name(), "GPU 0: ") {
			t.Errorf("IsGPU=%v name=%q", d.IsGPU(), d.Name())
		}
		roundTrip(t, d)
		// NVML must find the same GPU by CUDA's bus ID.
		if bus := d.(PCIDevice).PCIBusID(); bus == "" {
			t.Error("no PCI bus ID from CUDA")
		} else if m, err := OpenMonitorBus(bus, 0); err != nil {
			t.Errorf("OpenMonitorBus(%q): %v", bus, err)
		} else {
			_, model, _ := strings.Cut(d.Name(), ": ")
			if !strings.HasSuffix(m.Name(), ": "+model) {
				t.Errorf("NVML at bus %s is %q, CUDA's device is %q", bus, m.Name(), d.Name())
			}
			m.Close()
		}
		if _, err := OpenCUDA(1 << 20); !errors.Is(err, ErrNoGPU) || !strings.HasPrefix(err.Error(), "GPU 1048576 not found: this machine has ") {
			t.Errorf("OpenCUDA(1<<20) = %v", err)
		}
		return
	}
	if !errors.Is(err, ErrNoGPU) {
		t.Fatalf("OpenCUDA error %v does not wrap ErrNoGPU", err)
	}
	testenv.Stubbed(t, "no NVIDIA GPU: the CUDA driver binding (feed-test's copies) ran only to its no-GPU error, feed-test on the host device")
	if !haveLib("libcuda.so.1") {
		if want := "libcuda.so.1 not found: no NVIDIA driver on this machine"; err.Error() != want {
			t.Fatalf("OpenCUDA error %q, want %q", err, want)
		}
	}
}

func TestOpenMonitor(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func() (*Monitor, error)
	}{
		{"index", func() (*Monitor, error) { return OpenMonitor(0, 0) }},
		{"bus", func() (*Monitor, error) { return OpenMonitorBus("0000:ff:1f.7", 0) }},
	} {
		m, err := tc.open()
		if err == nil {
			if tc.name == "index" {
				if _, err := m.Sample(); err != nil {
					t.Error(err)
				}
			} else {
				t.Errorf("%s: opened a GPU at a bus no GPU sits on: %s", tc.name, m.Name())
			}
			m.Close()
			continue
		}
		if tc.name == "bus" && haveLib("libnvidia-ml.so.1") {
			continue // an NVML error for the made-up bus
		}
		if !errors.Is(err, ErrNoGPU) {
			t.Fatalf("%s: OpenMonitor error %v does not wrap ErrNoGPU", tc.name, err)
		}
		if tc.name == "index" {
			testenv.Stubbed(t, "no NVIDIA GPU: the NVML binding (gpu-watch, feed-test's telemetry) ran only to its no-GPU error, gpu-watch on recorded samples")
		}
		if !haveLib("libnvidia-ml.so.1") {
			if want := "libnvidia-ml.so.1 not found: no NVIDIA driver on this machine"; err.Error() != want {
				t.Fatalf("%s: OpenMonitor error %q, want %q", tc.name, err, want)
			}
		}
	}
}

func utils(u ...int) []Sample {
	s := make([]Sample, len(u))
	for i, v := range u {
		s[i] = Sample{Util: v, PCIeRX: float64(v) * 1e6, MemUsed: uint64(i), Link: Link{Gen: 4 + i%2, Width: 16}}
	}
	return s
}

func TestSummarize(t *testing.T) {
	const iv = 100 * time.Millisecond
	for _, tc := range []struct {
		name    string
		samples []Sample
		want    Stats
	}{
		{"empty", nil, Stats{}},
		{"busy", utils(100, 100), Stats{Samples: 2, MeanUtil: 100, PeakUtil: 100, Idle: 0, MeanPCIeRX: 100e6, PeakPCIeRX: 100e6,
			PeakMemUsed: 1, Link: Link{5, 16}}},
		{"idle", utils(0, 0, 0), Stats{Samples: 3, Idle: 1, ZeroShare: 1, LongestZero: 300 * time.Millisecond, PeakMemUsed: 2, Link: Link{5, 16}}},
		{"one", utils(50), Stats{Samples: 1, MeanUtil: 50, PeakUtil: 50, Idle: 0.5, MeanPCIeRX: 50e6, PeakPCIeRX: 50e6, Link: Link{4, 16}}},
		{"stalls", utils(80, 0, 0, 60, 0, 0, 0, 100), Stats{Samples: 8, MeanUtil: 30, PeakUtil: 100, Idle: 0.7, ZeroShare: 5.0 / 8,
			LongestZero: 300 * time.Millisecond, MeanPCIeRX: 30e6, PeakPCIeRX: 100e6, PeakMemUsed: 7, Link: Link{5, 16}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Summarize(tc.samples, iv)
			if got != tc.want {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestSparkline(t *testing.T) {
	for _, tc := range []struct {
		values []float64
		width  int
		want   string
	}{
		{nil, 10, ""},
		{[]float64{0, 50, 100}, 10, "▁▅█"},
		{[]float64{0, 0, 100, 100, 40, 60}, 3, "▁█▅"},
		{[]float64{-5, 250}, 2, "▁█"},
	} {
		if got := Sparkline(tc.values, tc.width); got != tc.want {
			t.Errorf("Sparkline(%v, %d) = %q, want %q", tc.values, tc.width, got, tc.want)
		}
	}
}

// script is a Sampler that plays back utilizations, then cancels its
// context (as Ctrl-C would) or fails.
type script struct {
	utils  []int
	cancel context.CancelFunc
	err    error
	n      int
}

func (s *script) Sample() (Sample, error) {
	if s.n == len(s.utils) {
		if s.err != nil {
			return Sample{}, s.err
		}
		s.cancel()
		return Sample{Util: -1}, nil
	}
	s.n++
	return Sample{Util: s.utils[s.n-1]}, nil
}

func TestWatch(t *testing.T) {
	broken := errors.New("NVML went away")
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"interrupted", nil, context.Canceled},
		{"sampling error", broken, broken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := &script{utils: []int{10, 0, 30}, cancel: cancel, err: tc.err}
			var got []int
			err := Watch(ctx, s, time.Microsecond, 0, func(smp Sample) { got = append(got, smp.Util) })
			if !errors.Is(err, tc.want) {
				t.Fatalf("Watch returned %v, want %v", err, tc.want)
			}
			want := []int{10, 0, 30}
			if tc.err == nil {
				want = append(want, -1) // the sample taken as the context ended
			}
			if !slices.Equal(got, want) {
				t.Errorf("samples %v, want %v", got, want)
			}
		})
	}
}
