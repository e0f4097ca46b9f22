package bench

import (
	"context"
	"errors"
	"time"

	"github.com/prep-dev/prep/bench/gpu"
)

// Telemetry is what the Sampler saw during the run.
type Telemetry struct {
	gpu.Stats
	Interval string `json:"interval"`
	// Error, if set, stopped the sampling early.
	Error string `json:"error,omitempty"`
}

// sample reads s every interval on a goroutine of its own until stop is
// called; stop returns what was sampled, with the error that ended
// sampling early, if one did, in its Error.
func sample(s gpu.Sampler, every time.Duration) (stop func() *Telemetry) {
	ctx, cancel := context.WithCancel(context.Background())
	var samples []gpu.Sample
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		err = gpu.Watch(ctx, s, every, 0, func(x gpu.Sample) { samples = append(samples, x) })
	}()
	return func() *Telemetry {
		cancel()
		<-done
		t := &Telemetry{Stats: gpu.Summarize(samples, every), Interval: every.String()}
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Error = err.Error()
		}
		return t
	}
}

// endSampling calls stop, if sampling ran, and records what it saw in
// res.Telemetry; otherwise it records why nothing was sampled.
func (res *FeedResult) endSampling(stop func() *Telemetry) {
	if stop != nil {
		res.Telemetry = stop()
		return
	}
	res.NoTelemetry = "no GPU sampler"
	if !res.GPU {
		res.NoTelemetry = "host memory"
	}
}
