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

// heifRefLoop reports whether the item references of the ISOBMFF file in
// data (meta/iref: dimg, from a derived image to its inputs, and auxl,
// from an alpha or depth image to its master, which decoding the master
// follows the other way) form a cycle, or are cut or overrun their box.
// A file without meta or iref has none: libheif judges the rest.
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
	wide := iref[0] != 0 // version 1: 32-bit item IDs
	edges := map[uint32][]uint32{}
	for rest := iref[4:]; len(rest) > 0; {
		typ, body, next, ok := nextBox(rest)
		if !ok {
			return true // a reference box overruns iref
		}
		rest = next
		id := func(b []byte) (uint32, []byte, bool) {
			if wide {
				if len(b) < 4 {
					return 0, nil, false
				}
				return binary.BigEndian.Uint32(b), b[4:], true
			}
			if len(b) < 2 {
				return 0, nil, false
			}
			return uint32(binary.BigEndian.Uint16(b)), b[2:], true
		}
		from, b, ok := id(body)
		if !ok || len(b) < 2 {
			return true
		}
		n := int(binary.BigEndian.Uint16(b))
		b = b[2:]
		for range n {
			var to uint32
			if to, b, ok = id(b); !ok {
				return true // fewer IDs than the count
			}
			switch typ {
			case "dimg":
				edges[from] = append(edges[from], to)
			case "auxl":
				edges[to] = append(edges[to], from)
			}
		}
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
