package imgdec

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

const sharedMemory = true

// nameChild names this process prep-decode for ps and top, which would
// say "exe": the name of the file it was started from, /proc/self/exe.
func nameChild() {
	os.WriteFile("/proc/self/comm", []byte(childName), 0) // best effort: only a name
}

// shm is the memory a parent and its decoding child share: a memfd,
// grown by the child to the largest image it has sent, mapped by each.
type shm struct {
	f *os.File
	b []byte // the mapping, as large as the file when it was made
}

// newShm makes the memory, sealed against shrinking: the parent reads
// what it maps, and a page cut off under it would be a SIGBUS in the
// parent, which a child taken over by a crafted file could cause.
func newShm() (*shm, error) {
	fd, err := unix.MemfdCreate("prep-imgdec", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "prep-imgdec")
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return nil, fmt.Errorf("sealing a memfd: %w", err)
	}
	return &shm{f: f}, nil
}

// view returns the first n bytes of the shared memory, mapped anew when
// the mapping is smaller: after growing the file to n bytes and more when
// grow is set (the child), else as large as the child made it.
func (m *shm) view(n int, grow bool) ([]byte, error) {
	if n <= len(m.b) {
		return m.b[:n], nil
	}
	size := int64(n)
	if grow {
		size = (size + 1<<20 - 1) &^ (1<<20 - 1) // whole MiB: fewer remaps
		if err := m.f.Truncate(size); err != nil {
			return nil, fmt.Errorf("growing the shared memory to %d bytes: %w", size, err)
		}
	} else if st, err := m.f.Stat(); err != nil {
		return nil, err
	} else if size = st.Size(); size < int64(n) {
		return nil, fmt.Errorf("the shared memory holds %d bytes, not the %d of the image", size, n)
	}
	m.unmap()
	prot := unix.PROT_READ // the parent only reads
	if grow {
		prot |= unix.PROT_WRITE
	}
	b, err := unix.Mmap(int(m.f.Fd()), 0, int(size), prot, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping %d bytes of shared memory: %w", size, err)
	}
	m.b = b
	return b[:n], nil
}

func (m *shm) unmap() {
	if m.b != nil {
		unix.Munmap(m.b)
		m.b = nil
	}
}

func (m *shm) close() {
	m.unmap()
	m.f.Close()
}
