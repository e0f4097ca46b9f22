package convert

import (
	"math"
	"testing"
)

// TestEstimateSeconds checks the wall time prediction: the slowest of
// converting, fetching and writing, divided over the tasks.
func TestEstimateSeconds(t *testing.T) {
	e := &Estimate{Items: 1000, FetchBytes: 100e6, Bytes: Span{Mean: 400e6},
		Rate: Rate{Workers: 2, ItemsPerSec: 100, CorePerSec: 50, FetchMBps: 50, WriteMBps: 1000}}
	for _, tc := range []struct {
		tasks, cores int
		want         float64
	}{
		{1, 0, 10},      // 1000 items at 100/s here
		{1, 4, 5},       // 4 cores of 50/s
		{4, 4, 1.25},    // and 4 tasks
		{100, 8, 0.025}, // 1000 / (8 × 50) / 100
	} {
		if got := e.Seconds(tc.tasks, tc.cores); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Seconds(%d, %d) = %g, want %g", tc.tasks, tc.cores, got, tc.want)
		}
	}
	e.Rate.FetchMBps = 5 // 100 MB at 5 MB/s: fetching bounds it
	if got := e.Seconds(2, 8); math.Abs(got-10) > 1e-9 {
		t.Errorf("fetch-bound: %g s, want 10", got)
	}
	e.Rate.FetchMBps, e.Rate.WriteMBps = 0, 10 // 400 MB at 10 MB/s
	if got := e.Seconds(1, 0); math.Abs(got-40) > 1e-9 {
		t.Errorf("write-bound: %g s, want 40", got)
	}
}
