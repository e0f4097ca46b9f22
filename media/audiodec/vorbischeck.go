package audiodec

import "encoding/binary"

// The Vorbis decoder sizes its codebooks from the setup header before it
// reads their contents: a 2 KB file can declare 2^24 entries of 65,535
// dimensions, gigabytes it then touches page by page (the fuzzer found
// it), and its comment count just as freely. vorbisSetupOK reads the
// comment and setup headers from the first bytes of the file and lets a
// stream through only when the comments fit in their packet and every
// codebook keeps to libvorbis's own bound (ilog(dimensions) +
// ilog(entries) <= 24) and all together to maxVorbisValues; anything
// else goes to ffmpeg, whose libvorbis checks as it reads.
const maxVorbisValues = 1 << 22

// vorbisSetupOK reports whether head, the start of an Ogg file, holds
// its Vorbis setup header whole, with codebooks of a sane size.
func vorbisSetupOK(head []byte) bool {
	// The comment header's counts size slices too (4 billion comments).
	comment, ok := oggPacket(head, 1)
	if !ok || len(comment) < 7 || comment[0] != 3 || string(comment[1:7]) != "vorbis" {
		return false
	}
	c := comment[7:]
	le := binary.LittleEndian
	if len(c) < 4 || uint64(le.Uint32(c)) > uint64(len(c)-4) {
		return false
	}
	c = c[4+le.Uint32(c):]
	if len(c) < 4 || uint64(le.Uint32(c))*4 > uint64(len(c)-4) {
		return false
	}
	for n := le.Uint32(c); n > 0; n-- {
		c = c[4:]
		if len(c) < 4 || uint64(le.Uint32(c)) > uint64(len(c)-4) {
			return false
		}
		c = c[le.Uint32(c):]
	}
	setup, ok := oggPacket(head, 2)
	if !ok || len(setup) < 7 || setup[0] != 5 || string(setup[1:7]) != "vorbis" {
		return false
	}
	r := bitReader{b: setup[7:]}
	count := r.read(8) + 1
	var total uint64
	for range count {
		if r.read(24) != 0x564342 {
			return false
		}
		dims, entries := r.read(16), r.read(24)
		if ilog(dims)+ilog(entries) > 24 {
			return false
		}
		total += uint64(entries)*uint64(max(dims, 1)) + uint64(entries)
		if total > maxVorbisValues {
			return false
		}
		if r.read(1) == 1 { // ordered lengths
			r.read(5)
			for e := uint32(0); e < entries && !r.short; {
				e += r.read(ilog(entries - e))
			}
		} else {
			sparse := r.read(1) == 1
			for e := uint32(0); e < entries && !r.short; e++ {
				if !sparse || r.read(1) == 1 {
					r.read(5)
				}
			}
		}
		switch lookup := r.read(4); lookup {
		case 0:
		case 1, 2:
			r.read(32)
			r.read(32)
			bits := r.read(4) + 1
			r.read(1)
			values := uint64(entries) * uint64(dims)
			if lookup == 1 {
				values = uint64(lookup1Values(entries, dims))
			}
			r.skip(values * uint64(bits))
		default:
			return false
		}
		if r.short {
			return false
		}
	}
	return true
}

// lookup1Values is the largest v with v^dims <= entries (Vorbis I 9.2.3).
func lookup1Values(entries, dims uint32) uint32 {
	if dims == 0 {
		return 0
	}
	v := uint32(0)
	for {
		p := uint64(1)
		for range dims {
			if p *= uint64(v + 1); p > uint64(entries) {
				return v
			}
		}
		v++
	}
}

func ilog(x uint32) uint32 {
	n := uint32(0)
	for ; x > 0; x >>= 1 {
		n++
	}
	return n
}

// bitReader reads Vorbis's LSB-first bit packing; past the end it reads
// zeros and sets short.
type bitReader struct {
	b     []byte
	pos   uint64 // bits read
	short bool
}

func (r *bitReader) read(n uint32) uint32 {
	var v uint32
	for i := range n {
		byteAt := r.pos >> 3
		if byteAt >= uint64(len(r.b)) {
			r.short = true
			return v
		}
		if r.b[byteAt]>>(r.pos&7)&1 == 1 {
			v |= 1 << i
		}
		r.pos++
	}
	return v
}

func (r *bitReader) skip(n uint64) {
	r.pos += n
	if r.pos > uint64(len(r.b))*8 {
		r.short = true
	}
}

// oggPacket returns packet k (from 0) of the first logical stream in
// b, the start of an Ogg file, when b holds it whole.
func oggPacket(b []byte, k int) ([]byte, bool) {
	var packet []byte
	var serial uint32
	first := true
	for len(b) >= 27 {
		if string(b[:4]) != "OggS" {
			return nil, false
		}
		nseg := int(b[26])
		if len(b) < 27+nseg {
			return nil, false
		}
		segs := b[27 : 27+nseg]
		body := b[27+nseg:]
		s := binary.LittleEndian.Uint32(b[14:])
		if first {
			serial, first = s, false
		}
		size := 0
		for _, l := range segs {
			size += int(l)
		}
		if len(body) < size {
			return nil, false
		}
		if s == serial {
			for _, l := range segs {
				packet = append(packet, body[:l]...)
				body = body[l:]
				if l < 255 { // the packet ends here
					if k == 0 {
						return packet, true
					}
					k--
					packet = packet[:0]
				}
			}
		}
		b = b[27+nseg+size:]
	}
	return nil, false
}
