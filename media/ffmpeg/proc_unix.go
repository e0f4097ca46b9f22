//go:build unix

package ffmpeg

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup starts cmd in a new process group and makes context
// cancellation kill the whole group, so nothing ffmpeg started survives.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
