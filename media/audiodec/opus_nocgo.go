//go:build !cgo

package audiodec

import "bufio"

// opusInProcess: without cgo, Opus decodes through ffmpeg.
const opusInProcess = false

func isOpus([]byte) bool { return false }

func newOpus(*bufio.Reader) (source, error) { return nil, nil }
