package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prep-dev/prep/internal/testenv"
)

func TestFeedTestHost(t *testing.T) {
	dir, m := convertedShards(t)
	stdout, stderr, code := prepRun(t, "feed-test", dir, "--device", "host", "--batch", "4", "--readers", "2", "--verify", "--json", "--step", "1s")
	if code != 0 {
		t.Fatalf("feed-test: exit %d: %s", code, stderr)
	}
	var out struct {
		Device       string            `json:"device"`
		GPU          bool              `json:"gpu"`
		DeviceKind   string            `json:"device_kind"`
		NoTelemetry  string            `json:"no_telemetry"`
		Samples      int               `json:"samples"`
		Bytes        int64             `json:"bytes"`
		DeviceSHA256 map[string]string `json:"device_sha256"`
		Verdict      struct {
			Need float64 `json:"need"`
			OK   bool    `json:"ok"`
			Text string  `json:"text"`
		} `json:"verdict"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("--json: %v\n%s", err, stdout)
	}
	if out.Device != "host memory (no GPU)" || out.GPU || out.DeviceKind != "host" || out.NoTelemetry != "host memory" || out.Samples != 16 || out.Bytes != 16*224*224*3 {
		t.Fatalf("feed-test: %+v", out)
	}
	for _, s := range m.Shards {
		if got, want := out.DeviceSHA256[s.File], dataSHA(t, dir, s); got != want {
			t.Errorf("%s: sha256 on the device %s, shard data %s", s.File, got, want)
		}
	}
	if out.Verdict.Need != 4 || !out.Verdict.OK || !strings.HasSuffix(out.Verdict.Text, "(measured into host memory, not a GPU)") {
		t.Errorf("verdict %+v", out.Verdict)
	}

	stdout, stderr, code = prepRun(t, "feed-test", dir, "--device", "host", "--need", "1e15/s")
	if code != exitThreshold || !strings.HasPrefix(stdout, "device: host memory (no GPU)\n") ||
		!strings.Contains(stdout, "\nhost memcpy limit (no GPU), same run: ") || strings.Contains(stdout, "pinned host-to-device") ||
		!strings.Contains(stdout, "\nGPU telemetry: none (host memory)\n") ||
		!strings.Contains(stdout, "verdict: input-bound: the GPU would idle 100%; limiting stage: ") ||
		!strings.Contains(stderr, "1,000,000,000,000,000 needed") {
		t.Errorf("unmet --need: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

func TestFeedTestErrors(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"feed-test", ".", "--need", "fast"}, exitUsage, `--need "fast"`},
		{[]string{"feed-test", ".", "--need", "10/s", "--step", "1s"}, exitUsage, "not both"},
		{[]string{"feed-test", ".", "--device", "gpu0"}, exitUsage, `--device "gpu0"`},
		{[]string{"feed-test", ".", "--batch", "0"}, exitUsage, "--batch"},
	}
	if !haveLib("libcuda.so.1") {
		tests = append(tests, struct {
			args []string
			code int
			want string
		}{[]string{"feed-test", ".", "--device", "0"}, exitNoGPU, "libcuda.so.1 not found: no NVIDIA driver on this machine (use --device host"})
	}
	for _, tc := range tests {
		_, stderr, code := prepRun(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
}

// cudaEntryPoints are the symbols bench/gpu binds in libcuda.so.1.
var cudaEntryPoints = []string{"cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName", "cuDeviceGetPCIBusId", "cuCtxCreate_v2",
	"cuCtxDestroy_v2", "cuMemAllocHost_v2", "cuMemFreeHost", "cuMemAlloc_v2", "cuMemFree_v2", "cuMemcpyHtoDAsync_v2",
	"cuMemcpyDtoH_v2", "cuStreamCreate", "cuStreamSynchronize", "cuCtxSetCurrent", "cuEventCreate", "cuEventRecord",
	"cuEventSynchronize", "cuEventDestroy_v2", "cuGetErrorName"}

// stubCUDA builds a libcuda.so.1 in a new folder that defines the given
// entry points: cuDeviceGetCount reports one GPU and returns countResult,
// cuGetErrorName knows no name, every other call succeeds.
func stubCUDA(t *testing.T, symbols []string, countResult int) string {
	t.Helper()
	dir := t.TempDir()
	var src strings.Builder
	for _, name := range symbols {
		switch name {
		case "cuDeviceGetCount":
			fmt.Fprintf(&src, "int cuDeviceGetCount(int *n) { *n = 1; return %d; }\n", countResult)
		case "cuGetErrorName":
			src.WriteString("int cuGetErrorName(int code, const char **s) { return 1; }\n")
		default:
			fmt.Fprintf(&src, "int %s(void) { return 0; }\n", name)
		}
	}
	c := filepath.Join(dir, "stub.c")
	if err := os.WriteFile(c, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cc := testenv.NeedCommand(t, "cc", "gcc")
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", filepath.Join(dir, "libcuda.so.1"), c).CombinedOutput(); err != nil {
		t.Fatalf("build a stub driver: %v\n%s", err, out)
	}
	return dir
}

// TestFeedTestNoUsableGPU runs feed-test against stub CUDA drivers: every
// way of having no usable GPU exits 3 and says why.
func TestFeedTestNoUsableGPU(t *testing.T) {
	dir, _ := convertedShards(t)
	for _, tc := range []struct {
		name   string
		libDir string
		device string
		want   string
	}{
		{"old driver", stubCUDA(t, cudaEntryPoints[:1], 0), "0", "prep: libcuda.so.1 lacks cuDeviceGetCount: the NVIDIA driver is too old (use --device host"},
		{"device count fails", stubCUDA(t, cudaEntryPoints, 3), "0", "prep: no GPU: cuDeviceGetCount: CUresult 3 (use --device host"},
		{"index out of range", stubCUDA(t, cudaEntryPoints, 0), "5", "prep: GPU 5 not found: this machine has 1 (use --device host"},
		// A driver without the optional bus-ID call loads all the same.
		{"no bus ID call", stubCUDA(t, slices.DeleteFunc(slices.Clone(cudaEntryPoints), func(s string) bool { return s == "cuDeviceGetPCIBusId" }), 0), "5",
			"prep: GPU 5 not found: this machine has 1 (use --device host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(prepBinary(t), "feed-test", dir, "--device", tc.device)
			cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+tc.libDir)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitNoGPU || !strings.HasPrefix(stderr.String(), tc.want) {
				t.Errorf("exit %v, stderr %q; want exit %d and %q", err, stderr.String(), exitNoGPU, tc.want)
			}
		})
	}
}

func TestParseNeed(t *testing.T) {
	for _, tc := range []struct {
		need  string
		step  time.Duration
		batch int
		want  float64
		usage bool
	}{
		{"", 0, 256, 0, false},
		{"2470/s", 0, 256, 2470, false},
		{" 2470 ", 0, 256, 2470, false},
		{"1.5e3/s", 0, 256, 1500, false},
		{"", 100 * time.Millisecond, 256, 2560, false},
		{"", -time.Second, 256, 0, true},
		{"0/s", 0, 256, 0, true},
		{"lots", 0, 256, 0, true},
	} {
		got, err := parseNeed(tc.need, tc.step, tc.batch)
		var ue usageError
		if got != tc.want || (err != nil) != tc.usage || (err != nil && !errors.As(err, &ue)) {
			t.Errorf("parseNeed(%q, %v, %d) = %v, %v; want %v (usage error: %v)", tc.need, tc.step, tc.batch, got, err, tc.want, tc.usage)
		}
	}
}
