package gpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Sample is one NVML reading.
type Sample struct {
	At      time.Duration // since the monitor started sampling
	Util    int           // percent of the period a kernel ran (the process's SM share with a pid)
	MemUtil int           // percent of the period device memory was read or written
	PCIeRX  float64       // host-to-device bytes per second
	MemUsed uint64        // bytes of device memory in use
	Link    Link          // the PCIe link as trained at the time; zero if unknown
}

// A Sampler takes one reading of a GPU each time it is asked; Monitor is
// the NVML one.
type Sampler interface {
	Sample() (Sample, error)
}

// Watch takes a sample now and then every interval until ctx ends or
// duration passes (0: no limit), and hands each to fn, from the calling
// goroutine. It returns nil when duration passes, ctx's error when ctx
// ends first, and a sampling error as soon as one occurs.
func Watch(ctx context.Context, s Sampler, interval, duration time.Duration, fn func(Sample)) error {
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		smp, err := s.Sample()
		if err != nil {
			return err
		}
		fn(smp)
		// An end that has come wins over a tick that is also ready: select
		// picks at random among ready cases, which would take one sample
		// too many.
		if err := ctx.Err(); err != nil {
			return watchEnd(err, duration)
		}
		select {
		case <-ctx.Done():
			return watchEnd(ctx.Err(), duration)
		case <-tick.C:
		}
	}
}

// watchEnd is Watch's result when its context ends: nil when the
// duration ran out, the cancellation otherwise.
func watchEnd(err error, duration time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) && duration > 0 {
		return nil
	}
	return err
}

// Stats summarises a series of samples.
type Stats struct {
	Samples     int           `json:"samples"`
	MeanUtil    float64       `json:"mean_util"`    // percent
	PeakUtil    int           `json:"peak_util"`    // percent
	Idle        float64       `json:"idle"`         // 1 - mean utilization: the share of time no kernel ran
	ZeroShare   float64       `json:"zero_share"`   // share of samples at 0% utilization
	LongestZero time.Duration `json:"longest_zero"` // longest run of consecutive 0% samples
	MeanPCIeRX  float64       `json:"mean_pcie_rx"` // bytes/s
	PeakPCIeRX  float64       `json:"peak_pcie_rx"` // bytes/s
	PeakMemUsed uint64        `json:"peak_mem_used"`
	// Link is the fastest link seen: boards train down when idle.
	Link Link `json:"link"`
}

// Summarize computes Stats over samples taken every interval.
func Summarize(samples []Sample, interval time.Duration) Stats {
	st := Stats{Samples: len(samples)}
	if len(samples) == 0 {
		return st
	}
	var util, rx float64
	zeros, run, longest := 0, 0, 0
	for _, s := range samples {
		util += float64(s.Util)
		rx += s.PCIeRX
		st.PeakUtil = max(st.PeakUtil, s.Util)
		st.PeakPCIeRX = max(st.PeakPCIeRX, s.PCIeRX)
		st.PeakMemUsed = max(st.PeakMemUsed, s.MemUsed)
		if s.Link.Width<<s.Link.Gen > st.Link.Width<<st.Link.Gen { // each generation doubles a lane
			st.Link = s.Link
		}
		if s.Util == 0 {
			zeros++
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	n := float64(len(samples))
	st.MeanUtil = util / n
	st.Idle = 1 - st.MeanUtil/100
	st.ZeroShare = float64(zeros) / n
	st.LongestZero = time.Duration(longest) * interval
	st.MeanPCIeRX = rx / n
	return st
}

var bars = []rune("▁▂▃▄▅▆▇█")

// Sparkline draws percentages (0–100) as one line of at most width
// block characters, averaging neighbours when there are more values.
func Sparkline(values []float64, width int) string {
	if len(values) == 0 || width <= 0 {
		return ""
	}
	cols := min(width, len(values))
	var b strings.Builder
	for c := range cols {
		lo, hi := c*len(values)/cols, (c+1)*len(values)/cols
		var sum float64
		for _, v := range values[lo:hi] {
			sum += v
		}
		mean := math.Min(math.Max(sum/float64(hi-lo), 0), 100)
		b.WriteRune(bars[int(math.Round(mean/100*float64(len(bars)-1)))])
	}
	return b.String()
}

// Link is a PCIe link's current generation and width.
type Link struct {
	Gen   int `json:"gen"`
	Width int `json:"width"`
}

func (l Link) String() string {
	if l == (Link{}) {
		return "PCIe link unknown"
	}
	return fmt.Sprintf("PCIe Gen%d x%d", l.Gen, l.Width)
}
