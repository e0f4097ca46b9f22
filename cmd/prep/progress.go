package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cheggaaa/pb/v3"
	"golang.org/x/term"

	"github.com/prep-dev/prep/convert"
)

// terminal returns w's file descriptor when w is a terminal.
func terminal(w io.Writer) (int, bool) {
	file, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(file.Fd())) {
		return 0, false
	}
	return int(file.Fd()), true
}

// newBar makes a pb bar on the terminal fd. Until a speed is known, it
// shows none rather than pb's "? p/s".
func newBar(w io.Writer, fd int, total int64) *pb.ProgressBar {
	return barOfWidth(w, termWidth(fd), total).SetTemplateString(`{{counters . }} {{bar . }} {{percent . }} {{speed . "%s/s" " "}}`)
}

// termWidth is the width of the terminal fd, 0 when it cannot be told.
func termWidth(fd int) int {
	cols, _, err := term.GetSize(fd)
	if err != nil {
		return 0
	}
	return cols
}

// barOfWidth makes a pb bar for a terminal cols wide. Some terminals
// (script(1), container TTYs before a resize) report a width of 0, on
// which pb draws nothing at all; they get 100 columns.
func barOfWidth(w io.Writer, cols int, total int64) *pb.ProgressBar {
	bar := pb.New64(total).SetWriter(w)
	if cols <= 0 {
		bar.SetWidth(100)
	}
	return bar
}

// progressEvery is how often convert logs a progress line when stderr is
// not a terminal.
var progressEvery = 5 * time.Second

// rateAfter is how long the bar runs before it shows a rate: a rate
// over the first few items says little, and pb's own shows "? p/s".
const rateAfter = time.Second

// newProgress shows a pb bar on a terminal, and a log line every few
// seconds otherwise. done stops it; it may be called twice.
func newProgress(w io.Writer) (progress func(convert.Progress), done func()) {
	if fd, ok := terminal(w); ok {
		return barProgress(w, termWidth(fd))
	}
	return logProgress(w)
}

// barProgress draws convert's progress as a bar on a terminal cols wide.
// Skipped items count as done, so the bar of a finished run is full.
func barProgress(w io.Writer, cols int) (progress func(convert.Progress), done func()) {
	start := time.Now()
	var bar *pb.ProgressBar
	var last convert.Progress
	// rtime's arguments: while running, when finished, and (nothing)
	// while no speed is known.
	tmpl := `{{counters . }} items {{bar . }} {{percent . }} {{string . "rate"}} {{rtime . "ETA %s" "%s" ""}}`
	setRate := func(p convert.Progress) {
		s := time.Since(start).Seconds()
		bar.Set("rate", fmt.Sprintf("%.0f items/s, %.1f MB/s", float64(p.Items)/s, float64(p.Bytes)/1e6/s))
	}
	return func(p convert.Progress) {
			if bar == nil {
				bar = barOfWidth(w, cols, int64(p.TotalItems)).SetTemplateString(tmpl).Start()
			}
			last = p
			bar.SetCurrent(int64(p.Items))
			if time.Since(start) >= rateAfter {
				setRate(p)
			}
		}, func() {
			if bar != nil {
				setRate(last) // a run shorter than rateAfter ends with its rate too
				bar.Finish()
				bar = nil
			}
		}
}

// logProgress logs a line of convert's progress every progressEvery, for
// logs rather than a terminal.
func logProgress(w io.Writer) (progress func(convert.Progress), done func()) {
	start, last := time.Now(), time.Now()
	return func(p convert.Progress) {
		if time.Since(last) < progressEvery {
			return
		}
		last = time.Now()
		s := time.Since(start).Seconds()
		fmt.Fprintf(w, "prep: %d/%d items, %d samples, %.0f samples/s, %.1f MB/s, %d skipped\n",
			p.Items, p.TotalItems, p.Samples, float64(p.Samples)/s, float64(p.Bytes)/1e6/s, p.Skipped)
	}, func() {}
}
