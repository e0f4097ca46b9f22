package bench

import (
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"
)

// WriteText prints a bench-read result for people.
func (r *ReadResult) WriteText(w io.Writer) error {
	mode := "page cache"
	switch {
	case r.Direct:
		mode = "O_DIRECT"
	case r.Cold:
		mode = "page cache, dropped before each pass"
	}
	fmt.Fprintf(w, "reads: %s, via %s, %d reader(s); raw = plain read() of the whole file into the same buffer\n", mode, r.Via, r.Readers)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "shard\tsamples\tMB\tsamples/s\tprep MB/s\traw MB/s\tefficiency\t")
	for _, s := range r.Shards {
		name := filepath.Base(s.File)
		if len(s.Library) > 0 {
			name += fmt.Sprintf(" (library: %v)", s.Library)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%s\t%.0f\t%.0f\t%.2f\t\n", name, s.Samples, float64(s.Prep.Bytes)/1e6, Commas(s.SamplesPerSec), s.Prep.MBps, s.Raw.MBps, s.Efficiency)
	}
	fmt.Fprintf(tw, "total\t%d\t%.1f\t%s\t%.0f\t%.0f\t%.2f\t\n", r.Samples, float64(r.Prep.Bytes)/1e6, Commas(r.SamplesPerSec), r.Prep.MBps, r.Raw.MBps, r.Efficiency)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s samples/s at %.0f MB/s: enough for %s samples/s of %s\n",
		Commas(r.SamplesPerSec), r.Prep.MBps, Commas(r.FeedsPerSec), r.Sample)
	_, err := fmt.Fprintf(w, "efficiency %.2f of raw sequential reads\n", r.Efficiency)
	return err
}

// WriteText prints a feed-test result and its verdict for people.
func (r *FeedResult) WriteText(w io.Writer, v Verdict) error {
	fmt.Fprintf(w, "device: %s\n", r.Device)
	fmt.Fprintf(w, "batches of %d × %s (%s) in %d pinned %s, %d reader(s)\n",
		r.Batch, r.Sample, sizeString(float64(r.Batch)*r.Sample.Bytes), r.Slots, noun(r.Slots, "buffer", "buffers"), r.Readers)
	fmt.Fprintf(w, "delivered %s %s in %d %s: %s samples/s, %.2f GB/s\n", Commas(float64(r.Samples)), noun(r.Samples, "sample", "samples"),
		r.Batches, noun(r.Batches, "batch", "batches"), Commas(r.SamplesPerSec), r.GBps)
	if r.GPU {
		fmt.Fprintf(w, "pinned host-to-device limit, same run: %.1f GB/s\n", r.LinkGBps)
	} else {
		fmt.Fprintf(w, "host memcpy limit (no GPU), same run: %.1f GB/s\n", r.LinkGBps)
	}
	r.writeTelemetry(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "stage\tbusy\trate alone\t")
	for _, s := range r.Stages {
		mark := ""
		if s.Name == r.Limit {
			mark = "  ← limit"
		}
		fmt.Fprintf(tw, "%s\t%3.0f%%\t%s\t%s\n", s.Name, 100*s.Busy, Rate(s.Rate), mark)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "verdict:", v.Text)
	return err
}

func (r *FeedResult) writeTelemetry(w io.Writer) {
	t := r.Telemetry
	switch {
	case t == nil:
		fmt.Fprintf(w, "GPU telemetry: none (%s)\n", r.NoTelemetry)
		return
	case t.Samples == 0:
		fmt.Fprintf(w, "GPU telemetry: none (sampling failed: %s)\n", t.Error)
		return
	}
	fmt.Fprintf(w, "GPU telemetry, %d samples every %s: utilization mean %.0f%%, peak %d%%; PCIe RX mean %s, peak %s; memory used peak %s; %s\n",
		t.Samples, t.Interval, t.MeanUtil, t.PeakUtil, Rate(t.MeanPCIeRX), Rate(t.PeakPCIeRX), sizeString(float64(t.PeakMemUsed)), t.Link)
	if t.Error != "" {
		fmt.Fprintf(w, "GPU telemetry stopped early: %s\n", t.Error)
	}
}

// noun is the form of a noun for n things: "1 batch", "2 batches".
func noun(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
