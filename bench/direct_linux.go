package bench

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

func openDirect(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EINVAL) {
		return nil, fmt.Errorf("open %s with O_DIRECT: the file system does not support direct I/O (tmpfs, some FUSE mounts); drop --direct", path)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// dropCache asks the kernel to forget the file's cached pages, so the next
// read comes from the disk. Dirty pages stay; shards are written and synced
// long before they are read.
func dropCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("drop %s from the page cache: %w", path, err)
	}
	return nil
}
