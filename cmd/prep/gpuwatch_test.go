package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prep-dev/prep/bench/gpu"
	"github.com/prep-dev/prep/internal/testenv"
)

func TestGPUWatchNoGPU(t *testing.T) {
	if haveLib("libnvidia-ml.so.1") {
		testenv.SkipHardware(t, "NVML is installed (a GPU driver): the no-driver path cannot be reached")
	}
	_, stderr, code := prepRun(t, "gpu-watch", "--duration", "1s")
	if code != exitNoGPU || stderr != "prep: libnvidia-ml.so.1 not found: no NVIDIA driver on this machine\n" {
		t.Errorf("gpu-watch without NVML: exit %d, stderr %q", code, stderr)
	}
}

func TestGPUWatchUsage(t *testing.T) {
	for _, args := range [][]string{
		{"gpu-watch", "--max-idle", "2"},
		{"gpu-watch", "--interval", "0s"},
		{"gpu-watch", "extra"},
	} {
		if _, stderr, code := prepRun(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d: %s", args, code, exitUsage, stderr)
		}
	}
}

func TestGPUWatchText(t *testing.T) {
	utils := []int{90, 0, 0, 0, 100, 80, 0, 50}
	samples := make([]gpu.Sample, len(utils))
	for i, u := range utils {
		samples[i] = gpu.Sample{Util: u, PCIeRX: 2e9, MemUsed: 3 << 30}
	}
	w := watchOutput{GPU: "GPU 0: NVIDIA H100 80GB HBM3", PCIe: "PCIe Gen5 x16", PID: 41234, Interval: "100ms",
		Stats: gpu.Summarize(samples, 100*time.Millisecond), Util: utils}
	var out bytes.Buffer
	if err := w.writeText(&out); err != nil {
		t.Fatal(err)
	}
	want := `GPU 0: NVIDIA H100 80GB HBM3, PCIe Gen5 x16
8 samples every 100ms: utilization of pid 41234 mean 40%, idle 60%, 0% in 50% of samples, longest stall 300ms
PCIe RX mean 2.0 GB/s, peak memory used 3.00 GiB
util ▇▁▁▁█▇▁▅
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

// fakeGPU plays back utilizations, then ends the watch as Ctrl-C would by
// cancelling its context.
type fakeGPU struct {
	utils  []int
	cancel context.CancelFunc
	n      int
}

func (f *fakeGPU) Name() string            { return "GPU 0: fake" }
func (f *fakeGPU) Link() (gpu.Link, error) { return gpu.Link{Gen: 5, Width: 16}, nil }
func (f *fakeGPU) Sample() (gpu.Sample, error) {
	if f.n == len(f.utils)-1 {
		f.cancel()
	}
	u := f.utils[min(f.n, len(f.utils)-1)]
	f.n++
	return gpu.Sample{Util: u, PCIeRX: 1e9, MemUsed: 1 << 30}, nil
}

func TestWatchLoop(t *testing.T) {
	for _, tc := range []struct {
		name    string
		utils   []int
		maxIdle float64
		code    int // 0: no error
		idle    float64
		longest time.Duration
	}{
		{"busy", []int{90, 100, 80, 100}, 0.3, 0, 0.075, 0},
		{"starved", []int{90, 0, 0, 0, 10, 0}, 0.3, exitThreshold, 1 - 100.0/6/100, 300 * time.Millisecond},
		{"starved but tolerated", []int{90, 0, 0, 0, 10, 0}, 0.9, 0, 1 - 100.0/6/100, 300 * time.Millisecond},
		{"all idle", []int{0, 0}, 0, exitThreshold, 1, 200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// --duration 0: the watch runs until "Ctrl-C", then still
			// reports and applies --max-idle.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out bytes.Buffer
			err := watch(ctx, &out, &fakeGPU{utils: tc.utils, cancel: cancel}, watchConfig{interval: 100 * time.Millisecond, maxIdle: tc.maxIdle, json: true})
			var ee exitError
			switch {
			case tc.code == 0 && err != nil:
				t.Fatalf("watch: %v", err)
			case tc.code != 0 && (!errors.As(err, &ee) || ee.code != tc.code):
				t.Fatalf("watch returned %v, want exit %d", err, tc.code)
			}
			var w watchOutput
			if err := json.Unmarshal(out.Bytes(), &w); err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			if w.Stats.Samples != len(tc.utils) || w.Stats.LongestZero != tc.longest || !near(w.Stats.Idle, tc.idle) || w.PCIe != "PCIe Gen5 x16" {
				t.Errorf("stats %+v, link %q; want %d samples, idle %v, longest zero run %v", w.Stats, w.PCIe, len(tc.utils), tc.idle, tc.longest)
			}
			if tc.code == exitThreshold && !strings.Contains(err.Error(), "above --max-idle") {
				t.Errorf("message %q", err)
			}
		})
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
