package ffmpeg

import (
	"os"
	"syscall"
)

// pipeBytes is the pipe capacity asked for ffmpeg's frames: Linux's
// default 64 KiB holds under half a 224×224 RGB frame, so ffmpeg and the
// reader took turns several times a frame. 1 MiB is the default
// /proc/sys/fs/pipe-max-size for unprivileged processes.
const pipeBytes = 1 << 20

// widenPipe asks for a pipe of pipeBytes. It is only a speed-up: a refusal
// (a lower pipe-max-size, a per-user pipe limit) leaves the pipe as it was.
func widenPipe(f *os.File) {
	const setPipeSize = 1031 // F_SETPIPE_SZ
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			syscall.Syscall(syscall.SYS_FCNTL, fd, setPipeSize, pipeBytes)
		})
	}
}
