package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"
	"unsafe"
)

// align is the offset, length and address alignment O_DIRECT needs; 4096
// covers every logical block size in use.
const align = 4096

// DefaultChunk is the size of one read: large enough that syscall overhead
// vanishes, small enough to stay in cache between read and use.
const DefaultChunk = 16 << 20

// newBuffer returns n bytes (rounded up to align) starting on an aligned
// address, every page already touched: filling fresh pages runs at a few
// hundred MB/s on these VMs, so a reader that reuses one touched buffer is
// what reaches page-cache speed.
func newBuffer(n int) []byte {
	n = (n + align - 1) &^ (align - 1)
	b := make([]byte, n+align)
	skip := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b)))) & (align - 1)
	b = b[skip : skip+n : skip+n]
	for i := 0; i < len(b); i += align {
		b[i] = 0
	}
	return b
}

// file is a shard opened for sequential reads, with O_DIRECT or through
// the page cache.
type file struct {
	f      *os.File
	path   string
	direct bool
}

func openFile(path string, direct bool) (*file, error) {
	if !direct {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		return &file{f: f, path: path}, nil
	}
	f, err := openDirect(path)
	if err != nil {
		return nil, err
	}
	return &file{f: f, path: path, direct: true}, nil
}

func (f *file) Close() error { return f.f.Close() }

// span reads the bytes [off, end) of a file in chunks of len(buf). With
// O_DIRECT it reads whole aligned blocks and hands out only the requested
// part of the first and the last.
type span struct {
	f        *file
	buf      []byte
	pos, end int64 // next byte to hand out; end of the range
	next     int64 // next file offset to read
	readTime time.Duration
	read     int64 // bytes read from the file, alignment included
}

func (f *file) span(buf []byte, off, n int64) *span {
	s := &span{f: f, buf: buf, pos: off, end: off + n, next: off}
	if f.direct {
		s.next = off &^ (align - 1)
	}
	return s
}

// Chunk returns the next piece of the range, or io.EOF after the last. The
// piece lives in the buffer until the next call.
func (s *span) Chunk() ([]byte, error) {
	if s.pos >= s.end {
		return nil, io.EOF
	}
	want := min(int64(len(s.buf)), s.end-s.next)
	if s.f.direct {
		want = min(int64(len(s.buf)), (s.end-s.next+align-1)&^(align-1))
	}
	start := time.Now()
	k, err := s.f.f.ReadAt(s.buf[:want], s.next)
	s.readTime += time.Since(start)
	s.read += int64(k)
	// A short read at the end of the file is expected with O_DIRECT, whose
	// last block runs past it; short of the range's end it is truncation.
	if s.next+int64(k) < min(s.end, s.next+want) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read %s at byte %d: %w (is the shard truncated?)", s.f.path, s.next, err)
	}
	p := s.buf[s.pos-s.next : min(int64(k), s.end-s.next)]
	s.next += int64(k)
	s.pos += int64(len(p))
	return p, nil
}

// each calls fn with every piece of the range.
func (s *span) each(fn func([]byte) error) error {
	for {
		p, err := s.Chunk()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(p); err != nil {
			return err
		}
	}
}
