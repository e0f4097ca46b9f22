//go:build !cgo

package audiodec

import "io"

// FLAC decodes through github.com/mewkiz/flac without cgo (flac_cgo.go).
func newFLAC(r io.Reader) (source, error) { return newGoFLAC(r) }

// LibFLACAvailable reports whether FLAC decodes through libFLAC (cgo).
func LibFLACAvailable() bool { return false }
