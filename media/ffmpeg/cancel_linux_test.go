package ffmpeg

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// children returns the pids of this process's live children whose
// command line mentions arg.
func children(t *testing.T, arg string) []int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, d := range dirs {
		stat, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		cmdline, _ := os.ReadFile(d + "/cmdline")
		if len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) && strings.Contains(string(cmdline), arg) {
			pid, _ := strconv.Atoi(filepath.Base(d))
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestFramesCancel cancels the context in the middle of a long video and
// checks that ffmpeg is gone, reaped, by the time Frames returns; the
// same when the callback stops early.
func TestFramesCancel(t *testing.T) {
	path := generate(t, "long.mp4", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=20",
		"-c:v", "mpeg4", "-q:v", "10")
	for _, how := range []string{"context", "callback"} {
		t.Run(how, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stop := errors.New("enough")
			var pids []int
			frames := 0
			_, _, err := Frames(ctx, path, FrameOptions{}, func(f Frame) error {
				frames++
				if f.Index < 3 {
					return nil
				}
				pids = children(t, path)
				if how == "callback" {
					return stop
				}
				cancel()
				return nil
			})
			if len(pids) != 1 {
				t.Fatalf("found %d ffmpeg processes mid-stream, want 1", len(pids))
			}
			want := stop
			if how == "context" {
				want = context.Canceled
			}
			if !errors.Is(err, want) {
				t.Errorf("error %v, want %v", err, want)
			}
			if frames != 4 {
				t.Errorf("%d frames delivered, want 4 (stopped at frame 3)", frames)
			}
			// Frames waited for ffmpeg, so not even a zombie is left.
			if err := syscall.Kill(pids[0], 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("ffmpeg (pid %d) still exists after Frames returned: kill 0: %v", pids[0], err)
			}
			if left := children(t, path); len(left) != 0 {
				t.Errorf("processes left: %v", left)
			}
		})
	}
}
