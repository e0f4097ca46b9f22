package bench

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// FreeBytes is the space an unprivileged user may still write on the
// file system holding dir.
func FreeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("free space on %s: %w", dir, err)
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// inMemory reports whether dir is on tmpfs, whose "disk" is memory.
func inMemory(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.TMPFS_MAGIC
}

// SameFileSystem reports whether a and b lie on one file system.
func SameFileSystem(a, b string) bool {
	var sa, sb unix.Stat_t
	return unix.Stat(a, &sa) == nil && unix.Stat(b, &sb) == nil && sa.Dev == sb.Dev
}
