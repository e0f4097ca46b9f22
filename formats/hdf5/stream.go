package hdf5

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sync/atomic"

	"golang.org/x/sys/unix"
	"gonum.org/v1/hdf5"

	"github.com/prep-dev/prep/formats"
)

// stream is a shard written as its samples arrive. When the writer knows
// how many samples the shard will hold (Expect), the first sample creates
// the file and each field's dataset at its final size, and every sample's
// bytes go straight to their place in it with a plain write. Nothing is
// gathered in memory, and the file is all but written when the last
// sample arrives: Close adds only the labels, keys and attributes, where
// it used to write the whole shard while the converters waited (about a
// quarter of a 256-sample benchmark run).
//
// The library allocates the datasets' storage when they are created and
// never fills it (prep_dcpl), so the bytes written beside it through fd
// are the only ones in that range; it writes its own metadata on close.
type stream struct {
	fid   int64 // the handle createFile opened, with prep's file properties
	f     *hdf5.File
	fd    *os.File
	infos []formats.DatasetInfo // the columns' datasets
	wb    *formats.Writeback
}

// start begins streaming the shard after its first sample set the
// columns, if the writer knows the shard's length and every column has
// bytes to place; otherwise it gives the columns memory to gather in.
func (w *writer) start() error {
	streamable := w.expect > 0
	for _, c := range w.cols {
		streamable = streamable && c.size > 0
	}
	if !streamable {
		for _, c := range w.cols {
			w.buffer(c)
		}
		return nil
	}
	st, err := w.createStream(formats.TempName(w.path))
	if err != nil {
		return fmt.Errorf("write shard %s: %w", w.path, err)
	}
	w.stream = st
	return nil
}

// createStream makes the file and the columns' datasets, sized for
// w.expect samples.
func (w *writer) createStream(tmp string) (*stream, error) {
	lockLib()
	defer unlockLib()
	fid, f, err := openShard(tmp)
	if err != nil {
		os.Remove(tmp)
		return nil, err
	}
	st := &stream{fid: fid, f: f}
	if err := w.layOut(st, tmp); err != nil {
		err = libError(err)
		st.closeLocked()
		os.Remove(tmp)
		return nil, err
	}
	return st, nil
}

// layOut creates the columns' datasets in the new file tmp, then opens
// it for the samples' writes.
func (w *writer) layOut(st *stream, tmp string) (err error) {
	made := map[string]bool{}
	for _, c := range w.cols {
		if err := makeGroup(st.f, c.name, made); err != nil {
			return err
		}
		info, err := writeDataset(st.f, c.name, c.dtype, append([]int{w.expect}, c.shape...), nil)
		if err != nil {
			return fmt.Errorf("dataset %s: %w", c.name, err)
		}
		if info.Offset < 0 {
			return fmt.Errorf("dataset %s: no storage allocated", c.name)
		}
		info.Size = int64(w.expect) * int64(c.size)
		st.infos = append(st.infos, info)
	}
	st.fd, err = os.OpenFile(tmp, os.O_RDWR, 0)
	if err == nil {
		st.wb = formats.NewWriteback(st.fd.Fd())
	}
	return err
}

// add writes sample i's fields at their places, starting their
// write-back as the file grows (formats.Writeback).
func (st *stream) add(s *formats.Sample, i int) error {
	for k, f := range s.Fields {
		if _, err := st.fd.WriteAt(f.Data, st.infos[k].Offset+int64(i)*int64(len(f.Data))); err != nil {
			return err
		}
		st.wb.Wrote(len(f.Data))
	}
	return nil
}

// close closes the library's handles and fd, returning the first error.
func (st *stream) close() error {
	lockLib()
	defer unlockLib()
	return st.closeLocked()
}

// closeLocked is close for a caller holding the library.
func (st *stream) closeLocked() error {
	err := st.closeLib()
	if st.fd != nil {
		if cerr := st.fd.Close(); err == nil {
			err = cerr
		}
		st.fd = nil
	}
	return err
}

// closeLib closes the library's handles, leaving fd open; the caller
// holds the library.
func (st *stream) closeLib() error {
	err := closeFiles(st.f, st.fid)
	st.f, st.fid = nil, 0
	return err
}

// gather leaves streaming for gathering in memory, when the samples do
// not fit the planned file after all (a sample of another shape, more or
// fewer samples than expected): it reads back what was written, or moves
// it to spill files when it is more than the writer keeps in memory, and
// drops the file, which Close writes anew.
func (w *writer) gather() error {
	st := w.stream
	w.stream = nil
	defer os.Remove(formats.TempName(w.path))
	defer st.close()
	var streamed int64
	for _, c := range w.cols {
		streamed += int64(c.n) * int64(c.size)
	}
	if streamed > w.budget {
		return w.spillStream(st)
	}
	for k, c := range w.cols {
		w.buffer(c)
		n := c.n * c.size
		*c.buf = (*c.buf)[:n]
		if _, err := io.ReadFull(io.NewSectionReader(st.fd, st.infos[k].Offset, int64(n)), *c.buf); err != nil {
			return fmt.Errorf("write shard %s: read back %s: %w", w.path, c.name, err)
		}
	}
	return nil
}

// shrink lays the shard out again when fewer samples came than expected
// (an input failed after the shard began, as a corrupt photo does; videos
// gave fewer frames than the first one planned): a new file with the
// datasets at their real length. Gathering the samples instead would cost
// the memory and the whole write that streaming saves.
//
// Where every column's samples start at the same offset in both files (a
// single column: what comes before it does not depend on the length), the
// samples stay where they are: the new file is laid out beside the old one
// (formats.LayoutName) and Close moves its other bytes, a few KiB of
// metadata, labels and keys, into the old file (transplant). Copying the
// samples into the new file instead left its whole size to write back on
// the fsync that publishes it: 0.86 s for 360 MB of video frames, after
// the old file's write-back had already overlapped the conversion.
// Otherwise the kernel copies the samples' bytes into the new file.
func (w *writer) shrink() error {
	old := w.stream
	w.stream = nil
	tmp, layout := formats.TempName(w.path), formats.LayoutName(w.path)
	lockLib()
	err := old.closeLib()
	unlockLib()
	if err != nil {
		old.close()
		return fmt.Errorf("write shard %s: %w", w.path, err)
	}
	w.expect = w.n
	st, err := w.createStream(layout)
	if err != nil {
		old.close()
		return fmt.Errorf("write shard %s: %w", w.path, err)
	}
	w.stream = st
	if sameStarts(st.infos, old.infos) {
		w.kept = old
		inPlaceShrinks.Add(1)
		return nil
	}
	defer old.close()
	// The new file takes the temp name; the library keeps its handle.
	if err := os.Rename(layout, tmp); err != nil {
		return fmt.Errorf("write shard %s: %w", w.path, err)
	}
	for k, c := range w.cols {
		if err := copyRange(st.fd, st.infos[k].Offset, old.fd, old.infos[k].Offset, int64(c.n)*int64(c.size)); err != nil {
			return fmt.Errorf("write shard %s: copy %s: %w", w.path, c.name, err)
		}
	}
	return nil
}

// inPlaceShrinks counts the shrinks that kept the samples in place, for
// the tests.
var inPlaceShrinks atomic.Int64

// sameStarts reports whether the columns' datasets start at the same
// offsets in two layouts of a shard.
func sameStarts(a, b []formats.DatasetInfo) bool {
	return slices.EqualFunc(a, b, func(x, y formats.DatasetInfo) bool { return x.Offset == y.Offset })
}

// transplant finishes an in-place shrink: it copies every byte of the
// laid-out file but the columns' samples into the kept file at the same
// offsets, cuts the kept file to the laid-out file's size, and removes the
// laid-out file. The kept file, at the temp name, is then byte for byte
// the laid-out file with the samples in place.
func (w *writer) transplant(laidOut string) error {
	src, err := os.Open(laidOut)
	if err != nil {
		return err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	dst := w.kept.fd
	var at int64
	for k, c := range w.cols {
		start := w.kept.infos[k].Offset
		if err := copyRange(dst, at, src, at, start-at); err != nil {
			return fmt.Errorf("move the layout before %s: %w", c.name, err)
		}
		at = start + int64(c.n)*int64(c.size)
	}
	if err := copyRange(dst, at, src, at, size-at); err != nil {
		return fmt.Errorf("move the layout after the samples: %w", err)
	}
	if err := dst.Truncate(size); err != nil {
		return err
	}
	err = w.kept.close()
	w.kept = nil
	if rerr := os.Remove(laidOut); err == nil {
		err = rerr
	}
	return err
}

// dropKept closes the file an in-place shrink kept, if any, and removes
// the laid-out file beside it, if still there.
func (w *writer) dropKept() {
	if w.kept == nil {
		return
	}
	w.kept.close()
	w.kept = nil
	os.Remove(formats.LayoutName(w.path))
}

// copyRange copies n bytes from src at soff to dst at doff, within the
// kernel where it can (copy_file_range), else through a buffer.
func copyRange(dst *os.File, doff int64, src *os.File, soff, n int64) error {
	for n > 0 {
		k, err := unix.CopyFileRange(int(src.Fd()), &soff, int(dst.Fd()), &doff, int(min(n, 1<<30)), 0)
		if err != nil || k == 0 {
			break // not supported here (another file system, an old kernel): copy below
		}
		n -= int64(k)
	}
	if n == 0 {
		return nil
	}
	buf := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(buf)
	k, err := io.CopyBuffer(io.NewOffsetWriter(dst, doff), io.NewSectionReader(src, soff, n), *buf)
	if err == nil && k < n {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// finishStream completes the streamed file: the datasets after the
// columns, then the library's metadata on close.
func (w *writer) finishStream() ([]formats.DatasetInfo, error) {
	st := w.stream
	w.stream = nil
	lockLib()
	infos, err := w.writeTail(st.f, st.infos)
	err = libError(err)
	unlockLib()
	if cerr := st.close(); err == nil {
		err = cerr
	}
	return infos, err
}
