package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/prep-dev/prep/bench"
	"github.com/prep-dev/prep/bench/gpu"
)

func init() { commands = append(commands, newGPUWatchCmd) }

func newGPUWatchCmd() *cobra.Command {
	var (
		device, pid        int
		interval, duration time.Duration
		maxIdle            float64
		jsonOut            bool
	)
	cmd := &cobra.Command{
		Use:   "gpu-watch",
		Short: "Sample GPU utilization while training runs, and report how long it sat idle",
		Long: `gpu-watch samples one GPU through NVML every --interval for --duration (or
until Ctrl-C, which ends the watch like the duration does): utilization (of the whole GPU, or of one process with --pid),
PCIe receive throughput and memory used. It reports the mean utilization, the
idle share (1 − mean utilization), the longest run of 0% samples, the PCIe
link, and a one-line plot of utilization over time.

It exits 4 when the idle share exceeds --max-idle — the sign of an input
pipeline that cannot keep up (try prep feed-test on the shards) — and 3 when
NVML or the GPU is missing.`,
		Example: `  # watch GPU 0 for a minute while the training job runs
  prep gpu-watch --duration 60s
  # only the training process, fail if it idles more than 20% of the time
  prep gpu-watch --pid 41234 --duration 5m --max-idle 0.2 --json`,
		Args: positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if interval <= 0 || duration < 0 || maxIdle < 0 || maxIdle > 1 {
				return usagef("--interval must be positive, --duration not negative, --max-idle between 0 and 1")
			}
			m, err := gpu.OpenMonitor(device, pid)
			if errors.Is(err, gpu.ErrNoGPU) {
				return exitError{exitNoGPU, err}
			}
			if err != nil {
				return err
			}
			defer m.Close()
			return watch(cmd.Context(), cmd.OutOrStdout(), m, watchConfig{pid, interval, duration, maxIdle, jsonOut})
		},
	}
	f := cmd.Flags()
	f.IntVar(&device, "device", 0, "GPU index")
	f.IntVar(&pid, "pid", 0, "report this process's utilization instead of the whole GPU's")
	f.DurationVar(&interval, "interval", 100*time.Millisecond, "time between samples")
	f.DurationVar(&duration, "duration", 60*time.Second, "how long to watch; 0 watches until Ctrl-C")
	f.Float64Var(&maxIdle, "max-idle", 0.3, "largest acceptable idle share (0–1); above it gpu-watch exits 4")
	f.BoolVar(&jsonOut, "json", false, "print the summary and every utilization sample as JSON")
	return cmd
}

// monitor is what gpu-watch needs of a GPU: gpu.Monitor, or a fake in
// tests.
type monitor interface {
	gpu.Sampler
	Name() string
	Link() (gpu.Link, error)
}

type watchConfig struct {
	pid                int
	interval, duration time.Duration
	maxIdle            float64
	json               bool
}

// watch samples m until the duration passes or ctx ends (Ctrl-C), prints
// the summary either way, and exits 4 when the idle share passes
// --max-idle: with --duration 0, Ctrl-C is how a watch ends.
func watch(ctx context.Context, out io.Writer, m monitor, c watchConfig) error {
	var samples []gpu.Sample
	err := gpu.Watch(ctx, m, c.interval, c.duration, func(s gpu.Sample) { samples = append(samples, s) })
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	w := watchOutput{GPU: m.Name(), PID: c.pid, Interval: c.interval.String(), Stats: gpu.Summarize(samples, c.interval)}
	// The fastest link the samples saw: read after the run, an idle board
	// may have trained down already.
	if l := w.Stats.Link; l != (gpu.Link{}) {
		w.PCIe = l.String()
	} else if l, err := m.Link(); err == nil {
		w.PCIe = l.String()
	}
	for _, s := range samples {
		w.Util = append(w.Util, s.Util)
	}
	if c.json {
		err = writeJSON(out, w)
	} else {
		err = w.writeText(out)
	}
	if err != nil {
		return err
	}
	if w.Stats.Samples > 0 && w.Stats.Idle > c.maxIdle {
		return exitError{exitThreshold, fmt.Errorf("GPU idle %.0f%% of the time, above --max-idle %.0f%%: the input pipeline is not keeping up; measure the shards with prep feed-test", 100*w.Stats.Idle, 100*c.maxIdle)}
	}
	return nil
}

type watchOutput struct {
	GPU      string    `json:"gpu"`
	PCIe     string    `json:"pcie_link,omitempty"`
	PID      int       `json:"pid,omitempty"`
	Interval string    `json:"interval"`
	Stats    gpu.Stats `json:"stats"`
	Util     []int     `json:"util"`
}

func (w *watchOutput) writeText(out io.Writer) error {
	who := "utilization"
	if w.PID > 0 {
		who = fmt.Sprintf("utilization of pid %d", w.PID)
	}
	fmt.Fprintf(out, "%s, %s\n", w.GPU, w.PCIe)
	st := w.Stats
	fmt.Fprintf(out, "%d samples every %s: %s mean %.0f%%, idle %.0f%%, 0%% in %.0f%% of samples, longest stall %s\n",
		st.Samples, w.Interval, who, st.MeanUtil, 100*st.Idle, 100*st.ZeroShare, st.LongestZero)
	fmt.Fprintf(out, "PCIe RX mean %s, peak memory used %s\n", bench.Rate(st.MeanPCIeRX), humanBytes(int64(st.PeakMemUsed)))
	vals := make([]float64, len(w.Util))
	for i, u := range w.Util {
		vals[i] = float64(u)
	}
	_, err := fmt.Fprintf(out, "util %s\n", gpu.Sparkline(vals, 72))
	return err
}
