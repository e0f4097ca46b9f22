package hdf5

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/prep-dev/prep/formats"
)

// TestDiskFull writes a shard onto /dev/full, gathered in memory (no
// hint) and streamed (Expect): the write must fail with ENOSPC (so convert
// can say "the disk is full"), in Add or in Close, name the file, and
// leave no file under the final name.
func TestDiskFull(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("needs /dev/full")
	}
	for _, expect := range []int{0, 3} {
		t.Run(fmt.Sprintf("expect=%d", expect), func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "s.h5")
			if err := os.Symlink("/dev/full", formats.TempName(p)); err != nil {
				t.Fatal(err)
			}
			w, err := Format{}.Create(p, formats.ShardMeta{})
			if err != nil {
				t.Fatal(err)
			}
			w.(formats.Expecter).Expect(expect)
			for _, k := range []string{"a", "b", "c"} {
				if err = w.Add(imageSample(k, 0, 224, 224, 1)); err != nil {
					break
				}
			}
			if ww := w.(*writer); err != nil && len(ww.keys) == 0 && (ww.stream != nil || ww.cols != nil) {
				t.Errorf("a failed first Add left the writer holding a stream (%v) or columns (%d)", ww.stream != nil, len(ww.cols))
			}
			if err == nil {
				_, err = w.Close()
			} else {
				w.Abort()
			}
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("got %v, want ENOSPC", err)
			}
			if !strings.Contains(err.Error(), p) {
				t.Errorf("%v: want %s named", err, p)
			}
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Errorf("a file exists under the final name after a failed write (%v)", err)
			}
		})
	}
}
