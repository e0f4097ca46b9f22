package hdf5

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/internal/testenv"
)

// TestDiskFull writes a shard onto /dev/full, gathered in memory (no
// hint) and streamed (Expect): the write must fail with ENOSPC (so convert
// can say "the disk is full"), in Add or in Close, name the file, and
// leave no file under the final name.
func TestDiskFull(t *testing.T) {
	testenv.NeedFile(t, "/dev/full", "create it with mknod -m 666 /dev/full c 1 7")
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
			if ww := w.(*writer); err != nil && ww.n == 0 && (ww.stream != nil || ww.cols != nil) {
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

// TestDiskFullEverywhere fills a small tmpfs at every point of a shard's
// write, one page of room more each time: whichever call runs out of
// space (the library's own metadata writes included), the error must be
// ENOSPC and name the file, nothing may be left under the final name, and
// the library must hold no file open afterwards (nor its descriptor).
// The shard's path is long, as the library's message quotes it before
// the errno.
func TestDiskFullEverywhere(t *testing.T) {
	dir := t.TempDir()
	testenv.MountTmpfs(t, dir, "size=4k")
	long := filepath.Join(dir, strings.Repeat("d", 200), strings.Repeat("e", 200))
	const samples = 4
	ref := filepath.Join(t.TempDir(), "s.h5")
	if err := writeAll(ref, 0, samples); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(ref)
	if err != nil {
		t.Fatal(err)
	}
	for _, expect := range []int{0, samples, samples + 2} { // gathered, streamed, shrunk
		fits := false
		for kib := 4; !fits; kib += 4 {
			if kib > 256 {
				t.Fatalf("expect=%d: no shard written with 256 KiB of room (is a failed write still holding its file's space?)", expect)
			}
			if out, err := exec.Command("mount", "-o", fmt.Sprintf("remount,size=%dk", kib), dir).CombinedOutput(); err != nil {
				t.Fatalf("remount: %v: %s", err, out)
			}
			os.RemoveAll(filepath.Join(dir, strings.Repeat("d", 200)))
			if err := os.MkdirAll(long, 0o755); err != nil {
				continue // no room for the folders yet
			}
			p := filepath.Join(long, "s.h5")
			err := writeAll(p, expect, samples)
			if err == nil {
				// After all those failures, the same bytes as on a disk
				// with room.
				if got, _ := os.ReadFile(p); !bytes.Equal(got, want) {
					t.Errorf("expect=%d, %d KiB: the shard differs from one written with room", expect, kib)
				}
				fits = true
			} else if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), p) {
				t.Errorf("expect=%d, %d KiB: got %v, want ENOSPC naming %s", expect, kib, err, p)
			}
			if _, serr := os.Stat(formats.TempName(p)); err != nil && !os.IsNotExist(serr) {
				t.Errorf("expect=%d, %d KiB: temp file left after %v", expect, kib, err)
			}
			if _, serr := os.Stat(p); err != nil && !os.IsNotExist(serr) {
				t.Errorf("expect=%d, %d KiB: a file under the final name after %v", expect, kib, err)
			}
			if n := openFiles(); n != 0 {
				t.Fatalf("expect=%d, %d KiB: the library holds %d files open after %v", expect, kib, n, err)
			}
			if fds := openFDs(t, dir, "memfd:"); len(fds) > 0 {
				t.Fatalf("expect=%d, %d KiB: descriptors left open after %v: %v", expect, kib, err, fds)
			}
			os.Remove(p)
		}
	}
}

// writeAll writes n samples to a shard at p, told to expect expect.
func writeAll(p string, expect, n int) error {
	w, err := Format{}.Create(p, formats.ShardMeta{Version: "test", Recipe: "resize=8", Seed: 7, Classes: []string{"cat", "dog"}})
	if err != nil {
		return err
	}
	w.(formats.Expecter).Expect(expect)
	for i := range n {
		if err := w.Add(imageSample(fmt.Sprint(i), int64(i%2), 32, 32, byte(i))); err != nil {
			w.Abort()
			return err
		}
	}
	_, err = w.Close()
	return err
}

// openFDs lists this process's descriptors open on paths with one of the
// prefixes.
func openFDs(t *testing.T, prefixes ...string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		testenv.Need(t, fmt.Sprintf("/proc/self/fd (%v)", err), "mount proc on /proc")
	}
	var open []string
	for _, e := range ents {
		target, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		for _, p := range prefixes {
			if strings.HasPrefix(target, p) {
				open = append(open, target)
			}
		}
	}
	return open
}
