package bench

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// maxMember bounds a tar member's size, as tarshard.Read does, so a
// corrupt header cannot ask for an absurd allocation.
const maxMember = 4 << 30

// tarSource feeds a span to archive/tar, which parses the headers, while
// member bodies are used where they lie in the span's buffer: peek hands
// them out without a copy and tar.Reader then skips them with Seek. Only a
// member that runs past the end of a chunk is copied. This is what brings
// a tar pass to the speed of plain reads: copying every member out of the
// read buffer costs as much as the read itself from the page cache.
type tarSource struct {
	s   *span
	cur []byte // the part of the current chunk not yet handed out
	off int64
	// beforeRefill runs before the buffer is overwritten with the next
	// chunk, while what peek returned is still intact.
	beforeRefill func()
}

func (t *tarSource) fill() error {
	if len(t.cur) > 0 {
		return nil
	}
	if t.beforeRefill != nil {
		t.beforeRefill()
	}
	c, err := t.s.chunk()
	if err != nil {
		return err
	}
	t.cur = c
	return nil
}

func (t *tarSource) Read(p []byte) (int, error) {
	if err := t.fill(); err != nil {
		return 0, err
	}
	n := copy(p, t.cur)
	t.cur = t.cur[n:]
	t.off += int64(n)
	return n, nil
}

// Seek moves forward from the current position (tar.Reader skips member
// bodies with Seek(n, io.SeekCurrent)), reading the chunks it passes.
func (t *tarSource) Seek(offset int64, whence int) (int64, error) {
	if whence != io.SeekCurrent || offset < 0 {
		return t.off, errors.New("tar source: only forward seeks from the current position")
	}
	for offset > 0 {
		if err := t.fill(); err != nil {
			return t.off, err
		}
		k := min(offset, int64(len(t.cur)))
		t.cur = t.cur[k:]
		t.off += k
		offset -= k
	}
	return t.off, nil
}

// peek returns the next n bytes in place, without consuming them, if the
// current chunk holds them all.
func (t *tarSource) peek(n int64) ([]byte, bool) {
	if n > 0 && t.fill() != nil {
		return nil, false
	}
	if int64(len(t.cur)) < n {
		return nil, false
	}
	return t.cur[:n:n], true
}

// readTar streams a WebDataset tar as tarshard.Read does — fn sees each
// sample's key and its members by extension, with the same checks — but
// without copying member bodies out of the span's buffer where it can
// avoid it. The map and slices are valid until fn returns.
func readTar(src *tarSource, fn func(key string, members map[string][]byte) error) error {
	tr := tar.NewReader(src)
	members := make(map[string][]byte)
	var (
		bufs     [][]byte // reused buffers for members copied out
		used     int      // of bufs, by the current sample
		borrowed []string // members of the current sample that lie in the span's buffer
		key      string
		started  bool
	)
	own := func(n int64) []byte {
		if used == len(bufs) {
			bufs = append(bufs, nil)
		}
		b := bufs[used]
		if int64(cap(b)) < n {
			b = make([]byte, n)
		}
		b = b[:n]
		bufs[used] = b
		used++
		return b
	}
	src.beforeRefill = func() {
		for _, ext := range borrowed {
			b := own(int64(len(members[ext])))
			copy(b, members[ext])
			members[ext] = b
		}
		borrowed = borrowed[:0]
	}
	flush := func() error {
		if !started {
			return nil
		}
		err := fn(key, members)
		clear(members)
		used, borrowed, started = 0, borrowed[:0], false
		return err
	}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return flush()
		}
		if err != nil {
			return fmt.Errorf("read tar: %w", err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		dir, base := path.Split(hdr.Name)
		stem, ext, ok := strings.Cut(base, ".")
		if !ok {
			return fmt.Errorf("tar member %s has no extension; not a WebDataset shard", hdr.Name)
		}
		if k := dir + stem; k != key || !started {
			if err := flush(); err != nil {
				return err
			}
			key, started = k, true
		}
		if _, dup := members[ext]; dup {
			return fmt.Errorf("tar member %s appears twice", hdr.Name)
		}
		if hdr.Size > maxMember {
			return fmt.Errorf("tar member %s claims %d bytes", hdr.Name, hdr.Size)
		}
		if body, ok := src.peek(hdr.Size); ok {
			// tar.Reader's next call skips the body with Seek.
			members[ext] = body
			borrowed = append(borrowed, ext)
			continue
		}
		b := own(hdr.Size)
		if _, err := io.ReadFull(tr, b); err != nil {
			return fmt.Errorf("read tar member %s: %w", hdr.Name, err)
		}
		members[ext] = b
	}
}
