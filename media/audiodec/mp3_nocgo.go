//go:build !cgo

package audiodec

import "bufio"

// Without cgo there is no libmpg123: MP3 goes to ffmpeg (mp3_cgo.go).
const mp3InProcess = false

// MPG123Available reports whether MP3 decodes in process (cgo builds).
func MPG123Available() bool { return false }

func newMP3(*bufio.Reader, mp3Info) (source, error) { return nil, nil }
