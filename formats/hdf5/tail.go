package hdf5

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"github.com/prep-dev/prep/formats"
)

// A shard's labels and keys are one small record per sample, and a shard
// of small samples has many: 300,000 8x8 images held 300,000 key strings
// and labels until Close, a third of the run's memory (issue #14). So the
// writer keeps them as the bytes they will be written as, up to tailAfter
// bytes a shard, then moves them to two scratch files beside the shard,
// and Close fills the labels and keys datasets from there in bounded
// blocks, once the library has let go of the file. Only the count and the
// longest key, which fixes the keys' width, stay in memory.
const tailAfter = 1 << 20

// keyBlock is how many bytes of padded keys Close writes at a time, at
// most the size of copyBufPool's buffers; a variable for tests.
var keyBlock = 1 << 20

// tail gathers a shard's labels and keys.
type tail struct {
	width  int     // the longest key, in bytes
	labels records // little-endian int64s
	keys   records // each key as a uvarint length and its bytes
}

// tailSpillNames returns the names of the labels' and keys' scratch files:
// SpillName's numbers after the columns', so IsTemp knows them too.
func (w *writer) tailSpillNames() (labels, keys string) {
	return formats.SpillName(w.path, len(w.cols)), formats.SpillName(w.path, len(w.cols)+1)
}

// addTail records a sample's label and key, moving the records to their
// scratch files first when they would pass the writer's tail budget.
func (w *writer) addTail(label int64, key string) error {
	t := &w.tail
	t.width = max(t.width, len(key))
	var rec [8 + binary.MaxVarintLen64]byte
	binary.LittleEndian.PutUint64(rec[:8], uint64(label))
	n := 8 + binary.PutUvarint(rec[8:], uint64(len(key)))
	if !t.labels.spilled() && t.labels.held()+t.keys.held()+int64(n+len(key)) > w.tailBudget {
		if err := w.spillTail(); err != nil {
			return fmt.Errorf("write shard %s: %w", w.path, err)
		}
	}
	// The shard cannot be finished after a failed write: the caller
	// aborts it.
	err := t.labels.write(rec[:8])
	if err == nil {
		err = t.keys.write(rec[8:n])
	}
	if err == nil {
		err = t.keys.writeString(key)
	}
	if err != nil {
		return fmt.Errorf("write shard %s: spill keys: %w", w.path, err)
	}
	return nil
}

// spillTail moves the labels and keys gathered in memory to their
// scratch files.
func (w *writer) spillTail() error {
	ln, kn := w.tailSpillNames()
	if err := w.tail.labels.spillTo(ln); err != nil {
		return fmt.Errorf("spill labels: %w", err)
	}
	if err := w.tail.keys.spillTo(kn); err != nil {
		return fmt.Errorf("spill keys: %w", err)
	}
	return nil
}

// release removes the scratch files and drops what is held in memory.
func (t *tail) release() {
	t.labels.release()
	t.keys.release()
	*t = tail{}
}

// keysWidth is the size of the keys' fixed-length strings: the longest
// key, and at least 1, as HDF5 has no strings of size 0.
func (w *writer) keysWidth() int { return max(1, w.tail.width) }

// fillTail writes the labels and keys into the datasets writeTail laid
// out in the finished file fd: the labels as they are, the keys padded
// with NULs to the width, keyBlock bytes at a time.
func (w *writer) fillTail(fd *os.File, infos []formats.DatasetInfo) error {
	t := &w.tail
	labels, ok := datasetNamed(infos, "labels")
	if want := 8 * int64(w.n); !ok || labels.Size != want {
		return fmt.Errorf("dataset labels: laid out for %d bytes, want %d", labels.Size, want)
	}
	keys, ok := datasetNamed(infos, "keys")
	width := w.keysWidth()
	if want := int64(width) * int64(w.n); !ok || keys.Size != want {
		return fmt.Errorf("dataset keys: laid out for %d bytes, want %d", keys.Size, want)
	}
	if w.n == 0 {
		return nil // empty datasets have no storage (offset -1)
	}
	if got := t.labels.size(); got != labels.Size {
		how := "gathered"
		if t.labels.spilled() {
			how = "spilled"
		}
		return fmt.Errorf("dataset labels: %d bytes %s, want %d", got, how, labels.Size)
	}
	if err := t.labels.copyTo(fd, labels.Offset); err != nil {
		return fmt.Errorf("dataset labels: %w", err)
	}
	src, err := t.keys.reader()
	if err != nil {
		return fmt.Errorf("dataset keys: spill: %w", err)
	}
	if err := fillKeys(fd, keys.Offset, width, w.n, src); err != nil {
		return fmt.Errorf("dataset keys: %w", err)
	}
	return nil
}

// fillKeys reads n keys from src and writes them at off in fd, each
// padded with NULs to width bytes.
func fillKeys(fd *os.File, off int64, width, n int, src byteReader) error {
	per := max(1, keyBlock/width) // keys a block
	buf := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(buf)
	block := *buf
	if per*width > len(block) { // a key longer than the pool's buffers
		block = make([]byte, per*width)
	}
	for i := 0; i < n; i += per {
		b := block[:min(per, n-i)*width]
		for slot := b; len(slot) > 0; slot = slot[width:] {
			k := i + (len(b)-len(slot))/width
			l, err := binary.ReadUvarint(src)
			if err != nil {
				return fmt.Errorf("key %d of %d: %w", k, n, err)
			}
			if l > uint64(width) {
				return fmt.Errorf("key %d of %d: %d bytes, more than the width %d", k, n, l, width)
			}
			if _, err := io.ReadFull(src, slot[:l]); err != nil {
				return fmt.Errorf("key %d of %d: %w", k, n, err)
			}
			clear(slot[l:width])
		}
		if _, err := fd.WriteAt(b, off); err != nil {
			return err
		}
		off += int64(len(b))
	}
	if _, err := src.ReadByte(); err != io.EOF {
		return fmt.Errorf("more gathered than %d keys", n)
	}
	return nil
}
