package imgdec

import "bytes"

// dropACScans appends to dst the JPEG in data without the entropy-coded
// data of the AC scans (a scan of one component with Ss > 0) of the
// components whose IDs are in ids, and reports whether it could. A
// progressive JPEG decoded at 1/8 scale reads only the DC coefficient of a
// component whose inverse DCT is 1×1 (libjpeg's DCT_scaled_size; for
// 4:2:0 the luma), yet its Huffman decoder works through every AC scan of
// it, most of the file. The scans' headers stay: libjpeg checks them and
// records the progression from them as it would, then finds each such
// scan empty (a warning, which prep_decode drops, and zero bits decoded
// into that component's ACs only), so the decode's output is the same.
//
// It copies every marker segment and every other scan as it is, and
// returns ok false, so that the caller decodes data whole, unless data is
// a well-formed marker sequence whose scans bring every coefficient of
// every component to full precision (libjpeg's block smoothing then has
// nothing to guess), ending in an EOI marker: a file cut off inside a
// dropped scan must fail as it would otherwise. Damage inside a dropped
// scan's data goes unseen, as it would not show.
func dropACScans(dst, data []byte, ids []byte) (out []byte, ok bool) {
	if len(data) < 4 || data[0] != 0xFF || data[1] != 0xD8 {
		return dst, false
	}
	var comps []byte     // component IDs, from the frame header
	var done [256]uint64 // per component ID, the coefficients brought to Al = 0
	out = append(dst, 0xFF, 0xD8)
	p := 2
	for {
		// A marker is 0xFF and a code, optionally after more 0xFF fill.
		if p >= len(data) || data[p] != 0xFF {
			return dst, false
		}
		for p < len(data) && data[p] == 0xFF {
			p++
		}
		if p >= len(data) {
			return dst, false
		}
		code := data[p]
		p++
		switch {
		case code == 0xD9: // EOI
			if len(comps) == 0 {
				return dst, false
			}
			for _, c := range comps {
				if done[c] != ^uint64(0) {
					return dst, false // an incomplete progression
				}
			}
			return append(out, 0xFF, 0xD9), true
		case code == 0x00 || code == 0x01 || code >= 0xD0 && code <= 0xD8:
			// Stuffing, TEM, a restart or a second SOI outside a scan.
			return dst, false
		}
		if p+2 > len(data) {
			return dst, false
		}
		n := int(data[p])<<8 | int(data[p+1])
		if n < 2 || p+n > len(data) {
			return dst, false
		}
		seg := data[p-2 : p+n] // the marker and its segment
		p += n
		if code >= 0xC0 && code <= 0xCF && code != 0xC4 && code != 0xC8 && code != 0xCC {
			// SOFn: P, Y, X, Nf, then Nf (C, H/V, Tq).
			if comps != nil || len(seg) < 10 || len(seg) != 10+3*int(seg[9]) {
				return dst, false
			}
			comps = make([]byte, 0, seg[9])
			for i := range int(seg[9]) {
				comps = append(comps, seg[10+3*i])
			}
		}
		if code != 0xDA { // not SOS
			out = append(out, seg...)
			continue
		}
		h := seg[4:]
		// Ns, then Ns (Cs, Td/Ta) pairs, then Ss, Se, Ah/Al.
		if len(h) == 0 || len(h) != 1+2*int(h[0])+3 {
			return dst, false
		}
		ns := int(h[0])
		ss, se, al := h[1+2*ns], h[2+2*ns], h[3+2*ns]&0x0F
		if ss > se || se > 63 {
			return dst, false
		}
		if al == 0 {
			band := ^uint64(0) >> (63 - (se - ss)) << ss
			for i := range ns {
				done[h[1+2*i]] |= band
			}
		}
		end, found := scanEnd(data, p)
		if !found {
			return dst, false
		}
		out = append(out, seg...)
		if !(ns == 1 && ss > 0 && bytes.IndexByte(ids, h[1]) >= 0) {
			out = append(out, data[p:end]...)
		}
		p = end
	}
}

// scanEnd returns the offset of the marker that ends the entropy-coded
// data starting at p: an 0xFF followed by neither 0x00 (a stuffed byte)
// nor a restart marker (0xD0–0xD7), fill bytes 0xFF included in the
// marker. found is false when the data ends first.
func scanEnd(data []byte, p int) (end int, found bool) {
	for {
		i := bytes.IndexByte(data[p:], 0xFF)
		if i < 0 {
			return 0, false
		}
		q := p + i
		j := q + 1
		for j < len(data) && data[j] == 0xFF {
			j++
		}
		if j >= len(data) {
			return 0, false
		}
		if c := data[j]; c != 0x00 && (c < 0xD0 || c > 0xD7) {
			return q, true
		}
		p = j + 1
	}
}
