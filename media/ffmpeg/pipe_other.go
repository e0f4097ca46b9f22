//go:build !linux

package ffmpeg

import "os"

// widenPipe keeps the system's pipe size where Linux's F_SETPIPE_SZ is
// not available.
func widenPipe(*os.File) {}
