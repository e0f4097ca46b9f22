package convert

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLockRefusesSecondRun: a run into a destination that another live
// run holds is refused, naming the holder, before it touches anything; a
// lock left by a process that is gone is taken over; a finished run
// leaves no lock behind.
func TestLockRefusesSecondRun(t *testing.T) {
	src := t.TempDir()
	writeImages(t, src, []string{"a", "b"}, 3)
	host, _ := os.Hostname()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		holder lockHolder
		want   string // error; "" for a run that succeeds
	}{
		{"live holder", lockHolder{Host: host, PID: os.Getpid(), Started: "then"},
			"is in use by another prep convert (pid " + strconv.Itoa(os.Getpid()) + " on " + host + ", since then): wait for it to finish; if it is no longer running, delete "},
		{"other host", lockHolder{Host: "elsewhere", PID: 1, Started: "then"}, "(pid 1 on elsewhere, since then)"},
		{"stale", lockHolder{Host: host, PID: dead.Process.Pid, Started: "then"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := t.TempDir()
			data, _ := json.Marshal(tt.holder)
			os.WriteFile(filepath.Join(dst, ".prep-lock"), data, 0o644)
			// A temp file the holder was writing: kept while it is live.
			os.WriteFile(filepath.Join(dst, "shard-000000.h5.tmp"), []byte("x"), 0o644)
			_, _, err := convertDir(t, context.Background(), src, dst, nil)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error %v, want one containing %q", err, tt.want)
				}
				if _, err := os.Stat(filepath.Join(dst, "shard-000000.h5.tmp")); err != nil {
					t.Errorf("the holder's temp file was touched: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if left, _ := filepath.Glob(filepath.Join(dst, ".prep-lock*")); len(left) != 0 {
				t.Errorf("lock left behind: %v", left)
			}
		})
	}
}

// TestLockConcurrentRuns starts two runs into one destination at once:
// exactly one converts, the other is refused, and the result is whole.
func TestLockConcurrentRuns(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	writeImages(t, src, []string{"a", "b"}, 4)
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, _, err := convertDir(t, context.Background(), src, dst, nil)
			errs <- err
		}()
	}
	var ok, refused int
	for range 2 {
		switch err := <-errs; {
		case err == nil:
			ok++
		case strings.Contains(err.Error(), "is in use by another prep convert"),
			strings.Contains(err.Error(), "already holds shards from an earlier run"):
			refused++ // the second came after the first had finished
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	if ok != 1 || refused != 1 {
		t.Fatalf("%d runs succeeded, %d refused; want 1 and 1", ok, refused)
	}
	if _, _, err := convertDir(t, context.Background(), src, dst, func(o *Options) { o.Resume = true }); err != nil {
		t.Fatalf("resume of the finished run: %v", err)
	}
}

func TestLockNames(t *testing.T) {
	for _, tt := range []struct {
		name string
		want bool
	}{
		{LockName(0, 1), true}, {LockName(3, 8), true}, {".prep-lock-task-00003", true},
		{".prep-lock-task-", false}, {".prep-lock-task-12a45", false}, {".prep-lockx", false},
	} {
		if got := IsLockName(tt.name); got != tt.want {
			t.Errorf("IsLockName(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
	if LockName(3, 8) != ".prep-lock-task-00003" {
		t.Errorf("LockName(3, 8) = %q", LockName(3, 8))
	}
}
