package cloudsrc

import (
	"context"
	"errors"
	"sync"
	"time"
)

// errStalled marks a request abandoned by its watchdog.
var errStalled = errors.New("no progress within the timeout")

// watchdog cancels its context when a request it guards runs longer than
// d without returning or showing progress: arm before the call, disarm
// after, kick on progress seen meanwhile.
type watchdog struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	d      time.Duration
	t      *time.Timer

	mu    sync.Mutex
	armed bool
}

func newWatchdog(parent context.Context, d time.Duration) *watchdog {
	ctx, cancel := context.WithCancelCause(parent)
	w := &watchdog{ctx: ctx, cancel: cancel, d: d}
	w.t = time.AfterFunc(time.Hour, func() { cancel(errStalled) })
	w.t.Stop()
	return w
}

func (w *watchdog) arm() {
	w.mu.Lock()
	w.armed = true
	w.t.Reset(w.d)
	w.mu.Unlock()
}

// kick restarts the countdown of an armed watchdog at d plus grace: the
// call it guards showed progress, and may wait grace before its next
// request. It may be called from any goroutine.
func (w *watchdog) kick(grace time.Duration) {
	w.mu.Lock()
	if w.armed && w.ctx.Err() == nil {
		w.t.Reset(w.d + grace)
	}
	w.mu.Unlock()
}

// disarm stops the timer and reports whether it fired.
func (w *watchdog) disarm() bool {
	w.mu.Lock()
	w.armed = false
	w.t.Stop()
	w.mu.Unlock()
	return errors.Is(context.Cause(w.ctx), errStalled)
}

func (w *watchdog) stop() {
	w.t.Stop()
	w.cancel(nil)
}
