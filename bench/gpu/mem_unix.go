//go:build unix

package gpu

import "golang.org/x/sys/unix"

// mapMem returns n bytes of anonymous memory outside the Go heap, pages
// touched. Like real pinned buffers, they do not count towards the
// garbage collector's heap goal: a heap inflated by large buffers lets
// garbage pile up between collections, and every collection cycle then
// faults in fresh pages, which costs more than the work on these VMs.
func mapMem(n int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, err
	}
	touch(b)
	return b, nil
}

func unmapMem(b []byte) error { return unix.Munmap(b) }
