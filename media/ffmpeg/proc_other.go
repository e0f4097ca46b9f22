//go:build !unix

package ffmpeg

import "os/exec"

// ownProcessGroup keeps exec's default: cancellation kills the process.
func ownProcessGroup(cmd *exec.Cmd) {}
