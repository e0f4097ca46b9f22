package ffmpeg

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestWidenPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	widenPipe(r)
	const getPipeSize = 1032 // F_GETPIPE_SZ
	size, _, errno := syscall.Syscall(syscall.SYS_FCNTL, r.Fd(), getPipeSize, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	want := pipeBytes
	if b, err := os.ReadFile("/proc/sys/fs/pipe-max-size"); err == nil {
		if limit, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && limit < want && os.Geteuid() != 0 {
			want = 64 << 10 // refused: the pipe keeps Linux's default
		}
	}
	if int(size) != want {
		t.Errorf("pipe holds %d bytes, want %d", size, want)
	}
}
