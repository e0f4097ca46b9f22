//go:build !linux

package imgdec

import (
	"errors"
	"os"
)

// Without memfd the decodes stay in process (isolate.go).
const sharedMemory = false

func nameChild() {}

type shm struct{ f *os.File }

func newShm() (*shm, error) { return nil, errors.New("no shared memory on this system") }

func (*shm) view(int, bool) ([]byte, error) {
	return nil, errors.New("no shared memory on this system")
}

func (*shm) close() {}
