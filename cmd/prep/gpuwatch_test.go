package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/prep-dev/prep/bench/gpu"
)

func TestGPUWatchNoGPU(t *testing.T) {
	if haveLib("libnvidia-ml.so.1") {
		t.Skip("NVML is installed here; the no-driver path cannot be reached")
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
