package formats

// WritebackEvery is how many bytes a shard writer writes between two
// starts of their write-back to disk (Writeback).
const WritebackEvery = 8 << 20

// Writeback has the kernel start writing a shard file out as it grows,
// without waiting for it, so that the fsync when the shard is closed
// waits for the last few MiB rather than the whole file. The kernel would
// otherwise hold it all as dirty pages until that fsync (its own
// write-back starts at a tenth of memory): a 256 MiB HDF5 shard's fsync
// took 0.49–0.59 s, and nothing overlaps the last shard's. An I/O error
// is left for that fsync to report.
type Writeback struct {
	fd      uintptr
	pending int
	starts  int // write-backs started, for the tests
}

// NewWriteback returns a Writeback for the open file descriptor fd.
func NewWriteback(fd uintptr) *Writeback { return &Writeback{fd: fd} }

// Wrote records n more bytes written and, every WritebackEvery bytes,
// starts their write-back.
func (w *Writeback) Wrote(n int) {
	w.pending += n
	if w.pending >= WritebackEvery {
		w.pending = 0
		w.starts++
		startWriteback(w.fd) // an error is the fsync's to report
	}
}
