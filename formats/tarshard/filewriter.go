package tarshard

import (
	"os"
	"sync"
	"sync/atomic"

	"github.com/prep-dev/prep/formats"
)

// chunkSize is the unit fileWriter hands to its goroutine: large enough
// for few system calls, small enough to keep both sides busy.
const chunkSize = 1 << 20

// chunkPool recycles chunks across shards: fresh memory is slow to touch,
// reused memory is not.
var chunkPool = sync.Pool{New: func() any { b := make([]byte, 0, chunkSize); return &b }}

// fileWriter buffers writes into chunks and hashes and writes full chunks
// to the file on a goroutine of its own, so encoding the next samples
// overlaps with SHA-256 and the write system calls, which otherwise take
// most of a shard writer's time. close or abort ends the goroutine.
type fileWriter struct {
	file *os.File
	cur  *[]byte
	full chan *[]byte // chunks to hash and write, in order
	free chan *[]byte // chunks written, ready to fill again
	done chan struct{}
	err  atomic.Pointer[error] // the goroutine's first error

	// Owned by the goroutine until done is closed.
	h  *formats.Sums
	n  int64
	wb *formats.Writeback
}

func newFileWriter(file *os.File) *fileWriter {
	f := &fileWriter{
		file: file,
		cur:  chunkPool.Get().(*[]byte),
		full: make(chan *[]byte, 1),
		free: make(chan *[]byte, 2),
		done: make(chan struct{}),
		h:    formats.NewSums(),
		wb:   formats.NewWriteback(file.Fd()),
	}
	*f.cur = (*f.cur)[:0]
	f.free <- chunkPool.Get().(*[]byte)
	go f.run()
	return f
}

func (f *fileWriter) run() {
	defer close(f.done)
	for b := range f.full {
		if f.err.Load() == nil {
			f.h.Write(*b)
			n, err := f.file.Write(*b)
			f.n += int64(n)
			f.wb.Wrote(n)
			if err != nil {
				f.err.Store(&err)
			}
		}
		*b = (*b)[:0]
		f.free <- b
	}
}

func (f *fileWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		if err := f.err.Load(); err != nil {
			return written, *err
		}
		n := copy((*f.cur)[len(*f.cur):chunkSize], p)
		*f.cur = (*f.cur)[:len(*f.cur)+n]
		p, written = p[n:], written+n
		if len(*f.cur) == chunkSize {
			f.full <- f.cur
			f.cur = <-f.free
		}
	}
	return written, nil
}

// close writes what is buffered, waits for the goroutine, syncs and closes
// the file, and returns the size and checksums of everything written.
func (f *fileWriter) close() (int64, *formats.Sums, error) {
	if len(*f.cur) > 0 {
		f.full <- f.cur
		f.cur = <-f.free
	}
	f.stop()
	var err error
	if p := f.err.Load(); p != nil {
		err = *p
	}
	if err == nil {
		err = f.file.Sync()
	}
	if cerr := f.file.Close(); err == nil {
		err = cerr
	}
	return f.n, f.h, err
}

// abort stops the goroutine and closes the file, dropping what is buffered.
func (f *fileWriter) abort() {
	f.stop()
	f.file.Close()
}

// stop ends the goroutine and returns the chunks to the pool.
func (f *fileWriter) stop() {
	close(f.full)
	<-f.done
	chunkPool.Put(f.cur)
	chunkPool.Put(<-f.free) // two chunks in all: cur and this one
	f.cur = nil
}
