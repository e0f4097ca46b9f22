package hdf5

import (
	"bufio"
	"bytes"
	"io"
	"os"
)

// records are the bytes a writer keeps per sample besides its fields
// (labels, keys, a ragged column's shapes), in memory until the writer
// moves them to a scratch file beside the shard (spillTo), then there.
type records struct {
	mem   []byte
	spill *spill
}

func (r *records) write(p []byte) error {
	if r.spill != nil {
		return r.spill.write(p)
	}
	r.mem = append(r.mem, p...)
	return nil
}

func (r *records) writeString(p string) error {
	if r.spill != nil {
		return r.spill.writeString(p)
	}
	r.mem = append(r.mem, p...)
	return nil
}

// held is the bytes kept in memory.
func (r *records) held() int64 { return int64(len(r.mem)) }

// size is the bytes recorded.
func (r *records) size() int64 {
	if r.spill != nil {
		return r.spill.n
	}
	return int64(len(r.mem))
}

func (r *records) spilled() bool { return r.spill != nil }

// spillTo moves the records to a new scratch file name, where the later
// ones go too; when that fails they stay in memory.
func (r *records) spillTo(name string) error {
	s, err := createSpill(name)
	if err != nil {
		return err
	}
	if err := s.write(r.mem); err != nil {
		s.remove()
		return err
	}
	r.spill, r.mem = s, nil
	return nil
}

// reader reads the records from the first.
func (r *records) reader() (byteReader, error) {
	if r.spill == nil {
		return bytes.NewReader(r.mem), nil
	}
	if err := r.spill.w.Flush(); err != nil {
		return nil, err
	}
	return bufio.NewReaderSize(io.NewSectionReader(r.spill.f, 0, r.spill.n), spillBuffer), nil
}

// copyTo writes the records at off in dst.
func (r *records) copyTo(dst *os.File, off int64) error {
	if r.spill != nil {
		return r.spill.copyTo(dst, off)
	}
	_, err := dst.WriteAt(r.mem, off)
	return err
}

// release removes the scratch file and drops the records.
func (r *records) release() {
	if r.spill != nil {
		r.spill.remove()
	}
	*r = records{}
}

type byteReader interface {
	io.Reader
	io.ByteReader
}
