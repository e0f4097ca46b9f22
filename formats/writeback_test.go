package formats

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestWriteback: write-back starts once per WritebackEvery bytes,
// whatever the sizes of the writes, and the system call takes a shard's
// file descriptor.
func TestWriteback(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "shard"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		name   string
		writes []int
		starts int
	}{
		{"none", nil, 0},
		{"just under", []int{WritebackEvery - 1}, 0},
		{"exactly", []int{WritebackEvery}, 1},
		{"in small writes", []int{WritebackEvery / 2, WritebackEvery / 4, WritebackEvery / 4, 1}, 1},
		{"one large write", []int{3 * WritebackEvery}, 1},
		{"several", []int{WritebackEvery, WritebackEvery - 1, 2, WritebackEvery}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := NewWriteback(f.Fd())
			for _, n := range c.writes {
				w.Wrote(n)
			}
			if w.starts != c.starts {
				t.Errorf("%d write-backs started, want %d", w.starts, c.starts)
			}
		})
	}
	if _, err := f.Write(make([]byte, 1<<16)); err != nil {
		t.Fatal(err)
	}
	if err := startWriteback(f.Fd()); err != nil {
		t.Errorf("sync_file_range on %s: %v", runtime.GOOS, err)
	}
}
