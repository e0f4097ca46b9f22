package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/prep-dev/prep/bench"
	"github.com/prep-dev/prep/bench/gpu"
)

func init() { commands = append(commands, newFeedTestCmd) }

func newFeedTestCmd() *cobra.Command {
	var (
		opt     bench.FeedOptions
		device  string
		need    string
		step    time.Duration
		jsonOut bool
	)
	cmd := &cobra.Command{
		Use:   "feed-test SHARD|DIR",
		Short: "Feed shards into GPU memory the way a training loader would, and judge the rate",
		Long: `feed-test streams the shards' samples (the HDF5 data dataset, or the decoded
PNG/WAV of tar shards) into batches in pinned host buffers — a ring of
--slots, so readers fill one while the previous batch crosses the link — and
queues each batch's copy to GPU memory on a CUDA stream, while NVML samples
the GPU every 100 ms. It reports the delivered samples/s and GB/s, the pinned
host-to-device speed measured in the same run, the GPU's utilization, PCIe
receive throughput, memory used and link during the run, how busy each stage
was (disk read, decode, assemble, copy) and which one limits the rate.

--need (samples/s) or --step (the time one training step takes on a batch)
says what training needs; feed-test exits 4 when the shards cannot keep up,
and 3 when there is no GPU or NVIDIA driver. --device host runs the same
pipeline into host memory, to test it on a machine without a GPU; its
numbers are never a GPU result.`,
		Example: `  # can these shards keep GPU 0 busy at 2,470 images/s?
  prep feed-test ./shards --device 0 --batch 256 --need 2470/s
  # the same need, given as the model's step time for a batch of 256
  prep feed-test ./shards --batch 256 --step 100ms --readers 4
  # without a GPU: exercise the pipeline into host memory
  prep feed-test ./shards --device host --json`,
		Args: positional("SHARD|DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opt.Batch < 1 || opt.Readers < 1 || opt.Slots < 2 {
				return usagef("--batch and --readers must be 1 or more, --slots 2 or more")
			}
			if need != "" && step != 0 {
				return usagef("give --need or --step, not both")
			}
			rate, err := parseNeed(need, step, opt.Batch)
			if err != nil {
				return err
			}
			if err := needTarget("feed-test", args[0]); err != nil {
				return err
			}
			dev, index, err := openDevice(device)
			if err != nil {
				return err
			}
			defer dev.Close()
			shards, err := bench.Find(args[0], shardFormats)
			if err != nil {
				return fmt.Errorf("feed-test: %w", err)
			}
			opt.Device = dev
			noTelemetry := ""
			if dev.IsGPU() {
				// NVML numbers GPUs in PCI bus order and ignores
				// CUDA_VISIBLE_DEVICES, so it finds CUDA's GPU by bus ID;
				// by index only if the driver gave none.
				m, err := openMonitor(dev, index)
				if err != nil {
					noTelemetry = "NVML: " + err.Error()
				} else {
					defer m.Close()
					opt.Sampler = m
				}
			}
			var done func()
			var total int64
			for _, s := range shards {
				total += feedBytes(s)
			}
			opt.Progress, done = byteBar(cmd.ErrOrStderr(), total)
			res, err := bench.Feed(cmd.Context(), shards, opt)
			done()
			if err != nil {
				return err
			}
			if noTelemetry != "" {
				res.NoTelemetry = noTelemetry
			}
			v := bench.Judge(res, rate)
			if jsonOut {
				err = writeJSON(cmd.OutOrStdout(), feedOutput{FeedResult: res, Verdict: v})
			} else {
				err = res.WriteText(cmd.OutOrStdout(), v)
			}
			if err != nil {
				return err
			}
			if !v.OK {
				return exitError{exitThreshold, fmt.Errorf("feed-test: %s samples/s delivered, %s needed", bench.Commas(res.SamplesPerSec), bench.Commas(rate))}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&device, "device", "0", `GPU index, or "host" for host memory (no GPU)`)
	f.IntVar(&opt.Batch, "batch", 256, "samples per batch")
	f.StringVar(&need, "need", "", `samples per second training needs, e.g. "2470/s"`)
	f.DurationVar(&step, "step", 0, "time of one training step on a batch; the need is --batch per --step")
	f.IntVar(&opt.Readers, "readers", 1, "shards read at the same time")
	f.IntVar(&opt.Slots, "slots", 3, "pinned host batch buffers in the ring (2: double buffering)")
	f.BoolVar(&opt.Direct, "direct", false, "read with O_DIRECT, bypassing the page cache")
	f.BoolVar(&opt.Verify, "verify", false, "copy every batch back and report a sha256 per shard of what reached the device (slower)")
	f.BoolVar(&jsonOut, "json", false, "print the result and verdict as JSON on stdout")
	return cmd
}

type feedOutput struct {
	*bench.FeedResult
	Verdict bench.Verdict `json:"verdict"`
}

// parseNeed turns --need "2470/s" or --step into samples per second; 0
// means no requirement.
func parseNeed(need string, step time.Duration, batch int) (float64, error) {
	if step < 0 {
		return 0, usagef("--step %v: want a positive duration such as 100ms", step)
	}
	if step > 0 {
		return float64(batch) / step.Seconds(), nil
	}
	if need == "" {
		return 0, nil
	}
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(need), "/s"), 64)
	if err != nil || v <= 0 {
		return 0, usagef(`--need %q: want samples per second, such as "2470/s"`, need)
	}
	return v, nil
}

// openMonitor opens NVML on the GPU dev drives.
func openMonitor(dev gpu.Device, index int) (*gpu.Monitor, error) {
	if p, ok := dev.(gpu.PCIDevice); ok && p.PCIBusID() != "" {
		return gpu.OpenMonitorBus(p.PCIBusID(), 0)
	}
	return gpu.OpenMonitor(index, 0)
}

// openDevice opens "host" or a CUDA GPU index; a missing GPU or driver
// exits 3.
func openDevice(s string) (gpu.Device, int, error) {
	if s == "host" {
		return gpu.NewHost(), -1, nil
	}
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 {
		return nil, 0, usagef(`--device %q: want a GPU index such as 0, or "host"`, s)
	}
	dev, err := gpu.OpenCUDA(i)
	if errors.Is(err, gpu.ErrNoGPU) {
		return nil, 0, exitError{exitNoGPU, fmt.Errorf("%w (use --device host to run the pipeline into host memory)", err)}
	}
	return dev, i, err
}

// feedBytes is about what feed-test delivers from a shard: its data
// dataset, or for a tar shard its size, close to that of its PNG-0 or WAV
// members decoded.
func feedBytes(s bench.Shard) int64 {
	for _, d := range s.Datasets {
		if d.Name == "data" {
			return d.Size
		}
	}
	return s.Bytes
}
