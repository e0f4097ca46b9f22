//go:build !linux

package bench

import "errors"

var errNoStatfs = errors.New("free space: not known on this system")

// FreeBytes is not known off Linux.
func FreeBytes(dir string) (int64, error) { return 0, errNoStatfs }

func inMemory(string) bool { return false }

// SameFileSystem is not known off Linux: false.
func SameFileSystem(a, b string) bool { return false }
