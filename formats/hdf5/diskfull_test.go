package hdf5

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/prep-dev/prep/formats"
)

// TestDiskFull writes a shard onto /dev/full: Close must report ENOSPC (so
// convert can say "the disk is full"), name the file, and leave no file
// under the final name.
func TestDiskFull(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("needs /dev/full")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "s.h5")
	if err := os.Symlink("/dev/full", formats.TempName(p)); err != nil {
		t.Fatal(err)
	}
	w, err := Format{}.Create(p, formats.ShardMeta{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if err := w.Add(imageSample(k, 0, 224, 224, 1)); err != nil {
			t.Fatal(err)
		}
	}
	_, err = w.Close()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Close: %v, want ENOSPC", err)
	}
	if !strings.Contains(err.Error(), p) {
		t.Errorf("Close: %v, want %s named", err, p)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("a file exists under the final name after a failed Close (%v)", err)
	}
}
