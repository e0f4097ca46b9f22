package tarshard

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"unsafe"
)

// A Chunker hands out a stream's bytes a chunk at a time, each valid
// until the next call, and io.EOF at the end. Chunks of any length work;
// in chunks 8-byte aligned and a multiple of 512 bytes long (but for the
// last), every header is read in place.
type Chunker interface {
	Chunk() ([]byte, error)
}

// source reads a Chunker for Scan, which uses headers and member bodies
// where they lie in the chunk: take hands them out without a copy, and
// skip steps past what Scan does not use.
type source struct {
	c   Chunker
	cur []byte // the part of the current chunk not yet handed out
	// scanner copies out the members it holds in place before the next
	// chunk replaces them.
	scanner *Scanner
}

func (t *source) fill() error {
	if len(t.cur) > 0 {
		return nil
	}
	t.scanner.keepBorrowed()
	c, err := t.c.Chunk()
	if err != nil {
		return err
	}
	t.cur = c
	return nil
}

func (t *source) Read(p []byte) (int, error) {
	if err := t.fill(); err != nil {
		return 0, err
	}
	n := copy(p, t.cur)
	t.cur = t.cur[n:]
	return n, nil
}

// skip steps past the next n bytes, reading the chunks it passes; at the
// end of the stream it returns the chunk's error (io.EOF).
func (t *source) skip(n int64) error {
	if n < 0 {
		return errors.New("tar source: only forward skips")
	}
	for n > 0 {
		if err := t.fill(); err != nil {
			return err
		}
		k := min(n, int64(len(t.cur)))
		t.cur = t.cur[k:]
		n -= k
	}
	return nil
}

// take returns the next n bytes in place and steps past them, if the
// current chunk holds them all; otherwise it leaves them.
func (t *source) take(n int64) ([]byte, bool) {
	if n > 0 && t.fill() != nil {
		return nil, false
	}
	if int64(len(t.cur)) < n {
		return nil, false
	}
	b := t.cur[:n:n]
	t.cur = t.cur[n:]
	return b, true
}

// A Scanner streams WebDataset tars as Read does, from a Chunker, and
// keeps what it needs from one sample, and one tar, to the next: a
// Scanner used for every tar a reader reads allocates, once warm, only
// each sample's key (a string fn may keep): neither strings for
// extensions nor buffers for the members it copies out at chunk
// boundaries (fresh pages fill at a few hundred MB/s).
//
// It hands out members where they lie in the chunk when it can: copying
// every member out of the read buffer costs as much as the read itself
// from the page cache. Only a member that runs past the end of a chunk
// is copied.
//
// It parses the headers itself: archive/tar spends about 2 µs on each
// (trimming and UTF-8 checks of every field), which at three members a
// sample costs a third of a page-cache read. It reads USTAR and GNU
// headers, PAX path and size records (which archive/tar writes for long
// names) and GNU long names; other entry types are skipped.
type Scanner struct {
	members  map[string][]byte
	bufs     [][]byte // reused buffers for members copied out
	used     int      // of bufs, by the current sample
	borrowed []string // members of the current sample that lie in the span's buffer
	exts     []string // extensions seen, so a member's needs no new string
	sample   []string // the current sample's extensions, the map's keys
	src      source
	hdr      header
	blk      [blockSize / 8]uint64 // a header split across chunks; words keep it aligned for byteSum
	ext      []byte                // PAX or GNU long-name records
	paxName  []byte                // the path of the last PAX records
	gnuName  []byte                // the last GNU long name
}

// maxExts bounds the extensions a Scanner keeps; past it a member's
// extension is a new string.
const maxExts = 32

func (t *Scanner) own(n int64) []byte {
	if t.used == len(t.bufs) {
		t.bufs = append(t.bufs, nil)
	}
	b := t.bufs[t.used]
	if int64(cap(b)) < n {
		b = make([]byte, n)
	}
	b = b[:n]
	t.bufs[t.used] = b
	t.used++
	return b
}

// keepBorrowed copies the current sample's members that lie in the
// chunk out of it, before the chunk is overwritten.
func (t *Scanner) keepBorrowed() {
	for _, ext := range t.borrowed {
		b := t.own(int64(len(t.members[ext])))
		copy(b, t.members[ext])
		t.members[ext] = b
	}
	t.borrowed = t.borrowed[:0]
}

// extension returns x as a string, the same one for the same bytes.
func (t *Scanner) extension(x []byte) string {
	for _, e := range t.exts {
		if e == string(x) {
			return e
		}
	}
	e := string(x)
	if len(t.exts) < maxExts {
		t.exts = append(t.exts, e)
	}
	return e
}

// Scan reads one tar from c and calls fn once per sample, as Read does.
// The map and slices are valid until fn returns.
func (t *Scanner) Scan(c Chunker, fn func(key string, members map[string][]byte) error) error {
	t.src = source{c: c, scanner: t}
	defer func() { t.src = source{} }() // let go of c and its chunk
	src := &t.src
	if t.members == nil {
		t.members = make(map[string][]byte)
	}
	members, hdr := t.members, &t.hdr
	clear(members)
	t.used, t.borrowed, t.sample = 0, t.borrowed[:0], t.sample[:0]
	var (
		key     string
		started bool
	)
	flush := func() error {
		if !started {
			return nil
		}
		err := fn(key, members)
		clear(members)
		t.used, t.borrowed, t.sample, started = 0, t.borrowed[:0], t.sample[:0], false
		return err
	}
	// The name or size the next member takes from the PAX and GNU
	// entries before it, kept in t.paxName and t.gnuName.
	hasPAXName, hasGNUName := false, false
	nextSize := int64(-1)
	for {
		blk := (*[blockSize]byte)(unsafe.Pointer(&t.blk))[:]
		b, ok := src.take(blockSize)
		switch {
		case ok && uintptr(unsafe.Pointer(&b[0]))%8 != 0:
			b = blk[:copy(blk, b)] // byteSum reads words: copy the header out
		case !ok:
			b = blk
			if _, err := io.ReadFull(src, b); err != nil {
				if err == io.EOF {
					return flush() // no end-of-archive blocks: as archive/tar, the end
				}
				return fmt.Errorf("read tar: %w", err)
			}
		}
		if err := hdr.parse(b); err != nil {
			if err == errEndOfArchive {
				return flush()
			}
			return fmt.Errorf("read tar: %w", err)
		}
		meta := hdr.typ == tar.TypeXHeader || hdr.typ == tar.TypeGNULongName
		if !meta {
			// As archive/tar: a GNU long name wins over a PAX path.
			if hasPAXName {
				hdr.name = append(hdr.name[:0], t.paxName...)
			}
			if hasGNUName {
				hdr.name = append(hdr.name[:0], t.gnuName...)
			}
			if nextSize >= 0 {
				hdr.size = nextSize
			}
			hasPAXName, hasGNUName, nextSize = false, false, -1
		}
		if headerOnly(hdr.typ) {
			hdr.size = 0 // whatever the field says, as archive/tar reads them
		}
		name := hdr.name // valid until the next parse, whatever refills the buffer
		if hdr.size > MaxMember {
			return fmt.Errorf("tar member %s claims %d bytes", name, hdr.size)
		}
		pad := -hdr.size & (blockSize - 1)
		switch hdr.typ {
		case tar.TypeXHeader, tar.TypeGNULongName:
			if hdr.size > maxSpecial {
				return fmt.Errorf("read tar: %s: %d bytes of PAX records or long name, over archive/tar's limit of %d", name, hdr.size, maxSpecial)
			}
			if int64(cap(t.ext)) < hdr.size {
				t.ext = make([]byte, hdr.size)
			}
			t.ext = t.ext[:hdr.size]
			if _, err := io.ReadFull(src, t.ext); err != nil {
				return fmt.Errorf("read tar: %w", unexpected(err))
			}
			if hdr.typ == tar.TypeGNULongName {
				t.gnuName, hasGNUName = append(t.gnuName[:0], cString(t.ext)...), true
			} else if err := parsePAX(t.ext, &t.paxName, &hasPAXName, &nextSize); err != nil {
				return fmt.Errorf("read tar: %s: %w", name, err)
			}
			if err := src.skip(pad); err != nil {
				return fmt.Errorf("read tar: %w", unexpected(err))
			}
			continue
		case tar.TypeReg, 0: // 0: pre-POSIX regular file
		default:
			if err := src.skip(hdr.size + pad); err != nil {
				return fmt.Errorf("read tar: %w", unexpected(err))
			}
			continue
		}
		if !inside(name) {
			return fmt.Errorf("tar member %s: the name leaves the shard's folder (absolute, or a .. element); prep never writes one: the file was made or changed by something else", name)
		}
		// The key is the name up to the first dot after the last slash
		// (path.Split, then strings.Cut), so a prefix of the name.
		dot := -1
		for i := len(name) - 1; i >= 0 && name[i] != '/'; i-- {
			if name[i] == '.' {
				dot = i
			}
		}
		if dot < 0 {
			return fmt.Errorf("tar member %s has no extension; not a WebDataset shard", name)
		}
		if k := name[:dot]; string(k) != key || !started {
			if err := flush(); err != nil {
				return err
			}
			key, started = string(k), true
		}
		x := t.extension(name[dot+1:])
		// The sample's few extensions, most of them the same strings,
		// compare faster than a map lookup.
		if slices.Contains(t.sample, x) {
			return fmt.Errorf("tar member %s appears twice", name)
		}
		t.sample = append(t.sample, x)
		if body, ok := src.take(hdr.size); ok {
			members[x] = body
			t.borrowed = append(t.borrowed, x)
		} else {
			body, err := t.copyOut(hdr.size)
			if err != nil {
				return fmt.Errorf("read tar member %s: %w", name, err)
			}
			members[x] = body
		}
		if err := src.skip(pad); err != nil {
			return fmt.Errorf("read tar member %s: %w", name, unexpected(err))
		}
	}
}

const blockSize = 512

// inside reports whether a member name stays inside the folder it would
// be extracted to: not absolute, no ".." element. Stem never makes
// another, and a reader that trusted one could be led anywhere.
func inside(name []byte) bool {
	if len(name) > 0 && name[0] == '/' {
		return false
	}
	for len(name) > 0 {
		seg := name
		if i := bytes.IndexByte(name, '/'); i >= 0 {
			seg, name = name[:i], name[i+1:]
		} else {
			name = nil
		}
		if len(seg) == 2 && seg[0] == '.' && seg[1] == '.' {
			return false
		}
	}
	return true
}

// maxSpecial bounds PAX records and GNU long names, as archive/tar does.
const maxSpecial = 1 << 20

// copyStep is the first size copyOut gives a buffer that must grow.
const copyStep = 1 << 20

// copyOut reads the next n bytes of member body into a buffer of its own,
// as own does. A buffer too small grows as the bytes arrive, doubling
// from copyStep, so that a header claiming gigabytes (up to MaxMember) in
// a small, damaged tar allocates no more than copyStep or twice what the
// tar holds. A warm Scanner's buffers are as large as the members it has
// read, and grow no more.
func (t *Scanner) copyOut(n int64) ([]byte, error) {
	b, i := t.own(0), t.used-1
	// Keep what grew for the next sample. (Reads may own more buffers,
	// for the members keepBorrowed copies out.)
	defer func() { t.bufs[i] = b }()
	for int64(len(b)) < n {
		if len(b) == cap(b) {
			grown := make([]byte, len(b), min(n, max(2*int64(cap(b)), copyStep)))
			copy(grown, b)
			b = grown
		}
		k, err := t.src.Read(b[len(b):min(int64(cap(b)), n)])
		b = b[:len(b)+k]
		if err != nil {
			return nil, unexpected(err)
		}
	}
	return b, nil
}

// headerOnly reports whether entries of type typ have no data: links,
// devices, folders and FIFOs.
func headerOnly(typ byte) bool {
	switch typ {
	case tar.TypeLink, tar.TypeSymlink, tar.TypeChar, tar.TypeBlock, tar.TypeDir, tar.TypeFifo:
		return true
	}
	return false
}

var errEndOfArchive = errors.New("end of archive")

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// header holds the fields of a header block Scan uses.
type header struct {
	name []byte // a copy, as the block may be overwritten; reused
	size int64
	typ  byte
}

// parse reads a USTAR or GNU header block, checking its checksum; an
// all-zero block is the end of the archive.
func (h *header) parse(b []byte) error {
	all := byteSum((*[blockSize]byte)(b))
	if all == 0 {
		return errEndOfArchive // only zero bytes sum to zero
	}
	// The checksum field counts as spaces.
	sum := all + 8*' '
	for _, c := range b[148:156] {
		sum -= int64(c)
	}
	want, ok := octal(b[148:156])
	if !ok || want != sum {
		return tar.ErrHeader
	}
	if b[124]&0x80 != 0 {
		return fmt.Errorf("%w: base-256 size", tar.ErrHeader)
	}
	size, ok := octal(b[124:136])
	if !ok || size < 0 {
		return tar.ErrHeader
	}
	h.size, h.typ = size, b[156]
	h.name = h.name[:0]
	// USTAR ("ustar\x0000") splits long names into a prefix; GNU
	// ("ustar  \x00") uses those bytes for other fields.
	if string(b[257:263]) == "ustar\x00" {
		if prefix := cString(b[345:500]); len(prefix) > 0 {
			h.name = append(append(h.name, prefix...), '/')
		}
	}
	h.name = append(h.name, cString(b[:100])...)
	return nil
}

// byteSum returns the sum of a header block's bytes, eight at a time in
// 16-bit lanes (a sum needs no byte order): the byte loop cost half a
// microsecond a member, which shows against a page-cache read. Headers
// are 8-byte aligned: they lie at multiples of 512 in page-aligned
// buffers, or in Scanner.blk.
func byteSum(b *[blockSize]byte) int64 {
	const lanes = 0x00ff00ff00ff00ff
	// Each lane gains at most 4×255 a step from 32 steps: below 2^16.
	var acc uint64
	w := (*[blockSize / 8]uint64)(unsafe.Pointer(b))
	for i := 0; i < len(w); i += 2 {
		x, y := w[i], w[i+1]
		acc += x&lanes + y&lanes + (x>>8&lanes + y>>8&lanes)
	}
	acc = acc&0x0000ffff0000ffff + acc>>16&0x0000ffff0000ffff
	return int64(acc&0xffffffff + acc>>32)
}

// octal parses a NUL- or space-padded octal field.
func octal(b []byte) (int64, bool) {
	var n int64
	digits := false
	for _, c := range b {
		switch {
		case c >= '0' && c <= '7':
			if n > 1<<60 {
				return 0, false
			}
			n = n<<3 | int64(c-'0')
			digits = true
		case c == ' ' || c == 0:
			if digits {
				return n, true
			}
		default:
			return 0, false
		}
	}
	return n, true
}

// cString returns b up to its first NUL.
func cString(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return b
}

// parsePAX reads the path and size of PAX records ("LEN key=value\n"),
// copying the path into *name.
func parsePAX(b []byte, name *[]byte, hasName *bool, size *int64) error {
	for len(b) > 0 {
		sp := bytes.IndexByte(b, ' ')
		if sp <= 0 {
			return tar.ErrHeader
		}
		n, err := strconv.Atoi(string(b[:sp]))
		if err != nil || n <= sp+1 || n > len(b) || b[n-1] != '\n' {
			return tar.ErrHeader
		}
		k, v, ok := bytes.Cut(b[sp+1:n-1], []byte("="))
		if !ok {
			return tar.ErrHeader
		}
		switch string(k) {
		case "path":
			*name, *hasName = append((*name)[:0], v...), true
		case "size":
			if *size, err = strconv.ParseInt(string(v), 10, 64); err != nil || *size < 0 {
				return tar.ErrHeader
			}
		}
		b = b[n:]
	}
	return nil
}
