package main

import (
	"io"
	"os"

	"github.com/cheggaaa/pb/v3"
	"golang.org/x/term"
)

// terminal returns w's file descriptor when w is a terminal.
func terminal(w io.Writer) (int, bool) {
	file, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(file.Fd())) {
		return 0, false
	}
	return int(file.Fd()), true
}

// newBar starts a pb bar on the terminal fd. Some terminals (script(1),
// container TTYs before a resize) report a width of 0, on which pb draws
// nothing at all; they get 100 columns.
func newBar(w io.Writer, fd int, total int64) *pb.ProgressBar {
	bar := pb.New64(total).SetWriter(w)
	if cols, _, err := term.GetSize(fd); err != nil || cols <= 0 {
		bar.SetWidth(100)
	}
	return bar
}
