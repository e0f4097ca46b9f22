//go:build cgo

package gpu

import (
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func TestProcessUtil(t *testing.T) {
	procs := []nvml.ProcessUtilizationSample{
		{Pid: 41, SmUtil: 30, TimeStamp: 100},
		{Pid: 42, SmUtil: 70, TimeStamp: 120},
		{Pid: 41, SmUtil: 55, TimeStamp: 110},
	}
	for _, tc := range []struct {
		name     string
		procs    []nvml.ProcessUtilizationSample
		ret      nvml.Return
		pid      int
		util     int
		last     uint64
		errWords string
	}{
		{"busiest sample of the pid", procs, nvml.SUCCESS, 41, 55, 120, ""},
		{"pid ran no kernel", procs, nvml.SUCCESS, 7, 0, 120, ""},
		{"no samples since last", nil, nvml.ERROR_NOT_FOUND, 41, 0, 90, ""},
		{"not supported", nil, nvml.ERROR_NOT_SUPPORTED, 41, 0, 90, "not supported"},
		{"other error", nil, nvml.ERROR_GPU_IS_LOST, 41, 0, 90, "utilization of pid 41"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			util, last, err := processUtil(tc.procs, tc.ret, tc.pid, 90)
			if util != tc.util || last != tc.last {
				t.Errorf("util %d from %d, want %d from %d", util, last, tc.util, tc.last)
			}
			if (err != nil) != (tc.errWords != "") || err != nil && !strings.Contains(err.Error(), tc.errWords) {
				t.Errorf("error %v, want one saying %q", err, tc.errWords)
			}
		})
	}
}
