package formats

import "golang.org/x/sys/unix"

// startWriteback starts writing fd's dirty pages, all of them (offset 0,
// length 0), without waiting.
func startWriteback(fd uintptr) error {
	return unix.SyncFileRange(int(fd), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
}
