package hdf5

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/prep-dev/prep/formats"
)

// A contiguous dataset needs its final size when it is created, which a
// ragged column (images without a crop, audio without --duration, .npy
// of mixed shapes) has only once the shard's last sample came: until then
// the writer gathers the column's bytes. It keeps them in memory up to
// spillAfter bytes a shard, then moves every gathered column to a scratch
// file beside the shard (formats.SpillName), and Close copies each into
// its dataset, laid out at its final size. A shard's memory then stays
// within about spillAfter whatever its size (a 4 GiB shard of photos of
// mixed sizes held 1.3 GB), for one extra copy of the spilled bytes, done
// by the kernel where it can (copyRange). 8 MiB, not more: 64 MiB gave
// no speed (8 photos × 48 without a recipe ran in 2.08 s at 64 MiB, 1.48 s
// at 8 MiB; peak RSS 321 vs 164 MB), and a shard of small samples under
// the budget cost more memory than one past it (2 PNGs × 30,000 copies
// 96 MB, × 300,000 191 MB; at 8 MiB 76 MB for both).
const spillAfter = 8 << 20

// spillBuffer is the write buffer of a spill file: samples arrive one
// field at a time, and a .npy field may be a few bytes.
const spillBuffer = 64 << 10

// spill is a column's bytes on disk.
type spill struct {
	name string
	f    *os.File
	w    *bufio.Writer
	n    int64 // bytes written
}

// createSpill creates the spill file name, empty.
func createSpill(name string) (*spill, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return &spill{name: name, f: f, w: bufio.NewWriterSize(f, spillBuffer)}, nil
}

func (s *spill) write(p []byte) error {
	n, err := s.w.Write(p)
	s.n += int64(n)
	return err
}

func (s *spill) writeString(p string) error {
	n, err := s.w.WriteString(p)
	s.n += int64(n)
	return err
}

// copyTo copies the spilled bytes into dst at off.
func (s *spill) copyTo(dst *os.File, off int64) error {
	if err := s.w.Flush(); err != nil {
		return err
	}
	return copyRange(dst, off, s.f, 0, s.n)
}

// remove closes and removes the spill file.
func (s *spill) remove() {
	s.f.Close()
	os.Remove(s.name)
}

// heldBytes is what the gathered columns hold in memory.
func (w *writer) heldBytes() int64 {
	var n int64
	for _, c := range w.cols {
		if c.buf != nil {
			n += int64(len(*c.buf))
		}
	}
	return n
}

// spillAll moves every column gathered in memory to its spill file and
// gives its buffer back for the next shard.
func (w *writer) spillAll() error {
	for k, c := range w.cols {
		if c.buf == nil {
			continue
		}
		s, err := createSpill(formats.SpillName(w.path, k))
		if err != nil {
			return fmt.Errorf("write shard %s: %w", w.path, err)
		}
		c.spill = s
		if err := s.write(*c.buf); err != nil {
			return fmt.Errorf("write shard %s: spill %s: %w", w.path, c.name, err)
		}
		putBuf(c.buf)
		c.buf = nil
	}
	return nil
}

// spillStream moves the columns streamed so far (n samples each) from the
// stream's file to spill files, when they are too large to read back
// into memory (gather).
func (w *writer) spillStream(st *stream) error {
	for k, c := range w.cols {
		s, err := createSpill(formats.SpillName(w.path, k))
		if err != nil {
			return fmt.Errorf("write shard %s: %w", w.path, err)
		}
		c.spill = s
		n := int64(c.n) * int64(c.size)
		if err := copyRange(s.f, 0, st.fd, st.infos[k].Offset, n); err != nil {
			return fmt.Errorf("write shard %s: spill %s: %w", w.path, c.name, err)
		}
		s.n = n
		if _, err := s.f.Seek(n, io.SeekStart); err != nil {
			return fmt.Errorf("write shard %s: spill %s: %w", w.path, c.name, err)
		}
	}
	return nil
}

// fill writes the spilled columns, the ragged columns' offsets, shapes
// and ranks, the labels and the keys into the finished file tmp, at the
// offsets write or finishStream gave their datasets. It runs once the
// library has closed the file: the datasets' storage was allocated and
// never filled (prep_dcpl), so these bytes are the only ones in their
// ranges, and the writes do not hold the library from the next shard.
func (w *writer) fill(tmp string, infos []formats.DatasetInfo) error {
	fd, err := os.OpenFile(tmp, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer fd.Close() // syncAndHash syncs the file
	for _, c := range w.cols {
		if c.spill == nil {
			continue
		}
		info, ok := datasetNamed(infos, c.name)
		if !ok || info.Size != c.spill.n {
			return fmt.Errorf("dataset %s: laid out for %d bytes, %d spilled", c.name, info.Size, c.spill.n)
		}
		if err := c.spill.copyTo(fd, info.Offset); err != nil {
			return fmt.Errorf("dataset %s: copy spilled bytes: %w", c.name, err)
		}
	}
	for _, c := range w.cols {
		if !c.fixed {
			if err := c.fillShapes(fd, infos); err != nil {
				return err
			}
		}
	}
	return w.fillTail(fd, infos)
}

func datasetNamed(infos []formats.DatasetInfo, name string) (formats.DatasetInfo, bool) {
	for _, d := range infos {
		if d.Name == name {
			return d, true
		}
	}
	return formats.DatasetInfo{}, false
}
