package imgdec

import (
	"encoding/binary"
	"errors"
)

// errHEIFLoop is a HEIF whose items depend on each other in a circle, or
// whose item references cannot be read. libheif 1.15 (Debian 12) follows
// such references without end: with its threads it hangs, without them
// it overflows the stack and the whole process dies (FuzzHEIFJXL found
// one: an alpha grid whose tile is the image it is the alpha of, the box
// after it damaged). So prep reads the references first.
var errHEIFLoop = errors.New("its item references are damaged or form a loop (libheif would never finish it)")

// screenHEIF turns heifRefLoop's check on; tests turn it off to crash
// libheif in a child process on purpose.
var screenHEIF = true

// heifRefLoop reports whether the item references of the ISOBMFF file in
// data (meta/iref: dimg, from a derived image to its inputs, and auxl,
// from an alpha or depth image to its master, which decoding the master
// follows the other way) form a cycle, or are cut or damaged.
// A file without meta or iref has none: libheif judges the rest.
//
// The references are read as libheif reads them: one after another, the
// size in each reference box's header unused. A size that disagrees with
// what is read makes libheif's graph differ from the boxes' (FuzzHEIFJXL:
// a first reference box of size 0, "to the end", hid a loop behind it),
// so it counts as damaged.
func heifRefLoop(data []byte) bool {
	meta, ok := findBox(data, "meta")
	if !ok || len(meta) < 4 {
		return false
	}
	iref, ok := findBox(meta[4:], "iref") // meta is a full box: version, flags
	if !ok {
		return false
	}
	if len(iref) < 4 {
		return true
	}
	r := refReader{wide: iref[0] != 0} // version 1: 32-bit item IDs
	edges := map[uint32][]uint32{}
	for rest := iref[4:]; len(rest) > 0; {
		r.b = rest
		size, typ := r.header()
		from := r.id()
		for n := r.u16(); n > 0 && !r.cut; n-- {
			switch to := r.id(); typ {
			case "dimg":
				edges[from] = append(edges[from], to)
			case "auxl":
				edges[to] = append(edges[to], from)
			}
		}
		if r.cut || uint64(len(rest)-len(r.b)) != size {
			return true
		}
		rest = r.b
	}
	// Depth-first, colouring items: 1 on the path, 2 done.
	state := map[uint32]int{}
	var visit func(uint32) bool
	visit = func(v uint32) bool {
		state[v] = 1
		for _, w := range edges[v] {
			if state[w] == 1 || state[w] == 0 && visit(w) {
				return true
			}
		}
		state[v] = 2
		return false
	}
	for v := range edges {
		if state[v] == 0 && visit(v) {
			return true
		}
	}
	return false
}

// findBox returns the body of the first box of type typ among the boxes
// that fill data.
func findBox(data []byte, typ string) ([]byte, bool) {
	for {
		t, body, next, ok := nextBox(data)
		if !ok {
			return nil, false
		}
		if t == typ {
			return body, true
		}
		data = next
	}
}

// nextBox splits the first ISOBMFF box off data: its type, its body and
// what follows it.
func nextBox(data []byte) (typ string, body, rest []byte, ok bool) {
	if len(data) < 8 {
		return "", nil, nil, false
	}
	size, hdr := uint64(binary.BigEndian.Uint32(data)), uint64(8)
	switch size {
	case 0: // to the end
		size = uint64(len(data))
	case 1: // a 64-bit size follows the type
		if len(data) < 16 {
			return "", nil, nil, false
		}
		size, hdr = binary.BigEndian.Uint64(data[8:]), 16
	}
	if size < hdr || size > uint64(len(data)) {
		return "", nil, nil, false
	}
	return string(data[4:8]), data[hdr:size], data[size:], true
}

// refReader reads an iref box's reference boxes; cut is set once a read
// runs past the end.
type refReader struct {
	b    []byte
	wide bool // 32-bit item IDs
	cut  bool
}

func (r *refReader) next(n int) []byte {
	if len(r.b) < n {
		r.cut, r.b = true, nil
		return make([]byte, n)
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *refReader) u16() uint16 { return binary.BigEndian.Uint16(r.next(2)) }

func (r *refReader) id() uint32 {
	if r.wide {
		return binary.BigEndian.Uint32(r.next(4))
	}
	return uint32(r.u16())
}

// header reads a box header as libheif does: a 32-bit size, the type, a
// 64-bit size when the first is 1, a 16-byte extended type for "uuid".
func (r *refReader) header() (size uint64, typ string) {
	size = uint64(binary.BigEndian.Uint32(r.next(4)))
	typ = string(r.next(4))
	if size == 1 {
		size = binary.BigEndian.Uint64(r.next(8))
	}
	if typ == "uuid" {
		r.next(16)
	}
	return size, typ
}
