package imgdec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"math"
	"strconv"
)

// PNM (PBM, PGM, PPM; plain P1–P3 and raw P4–P6), read as Pillow's
// PpmImagePlugin reads it: a maxval other than 255 is scaled with
// round(v / maxval × 255), half to even, as Python rounds; grey with a
// maxval above 255 is scaled to 16 bits that way and keeps its high byte,
// as 16-bit PNG does.

func isPNMSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

type pnmHeader struct {
	magic  byte // '1'..'6'
	w, h   int
	maxval int
	offset int // of the pixels
}

// readPNMHeader reads the tokens after the magic number as Pillow does:
// whitespace separates them, '#' starts a comment to the end of the line,
// and the one whitespace byte after the last token ends the header.
func readPNMHeader(data []byte) (pnmHeader, error) {
	hd := pnmHeader{magic: data[1], maxval: 1}
	i := 2
	token := func() (int, error) {
		var tok []byte
		for len(tok) <= 10 {
			if i >= len(data) {
				break
			}
			c := data[i]
			i++
			if isPNMSpace(c) {
				if len(tok) == 0 {
					continue
				}
				break
			}
			if c == '#' {
				for i < len(data) && data[i] != '\r' && data[i] != '\n' {
					i++
				}
				continue
			}
			tok = append(tok, c)
		}
		if len(tok) == 0 {
			return 0, fmt.Errorf("%w: the header ends early", errTruncated)
		}
		v, err := strconv.Atoi(string(tok))
		if err != nil || v < 0 {
			return 0, fmt.Errorf("bad header value %q", tok)
		}
		return v, nil
	}
	var err error
	if hd.w, err = token(); err != nil {
		return hd, err
	}
	if hd.h, err = token(); err != nil {
		return hd, err
	}
	if hd.magic != '1' && hd.magic != '4' {
		if hd.maxval, err = token(); err != nil {
			return hd, err
		}
		if hd.maxval <= 0 || hd.maxval >= 65536 {
			return hd, fmt.Errorf("maxval %d: it must be 1..65535", hd.maxval)
		}
	}
	hd.offset = i
	return hd, nil
}

func pnmSize(data []byte) (int, int, error) {
	hd, err := readPNMHeader(data)
	return hd.w, hd.h, err
}

func decodePNM(data []byte, w, h int) (*image.NRGBA, bool, error) {
	hd, err := readPNMHeader(data)
	if err != nil {
		return nil, false, err
	}
	bands := 1
	if hd.magic == '3' || hd.magic == '6' {
		bands = 3
	}
	n := w * h * bands
	// Grey with a maxval above 255 is Pillow's mode I: 16-bit values.
	outMax := 255
	if bands == 1 && hd.maxval > 255 {
		outMax = 65535
	}
	scale := func(v int) int {
		if hd.maxval == outMax {
			return v
		}
		return min(outMax, int(math.RoundToEven(float64(v)/float64(hd.maxval)*float64(outMax))))
	}
	vals := make([]uint16, 0, n)
	px := data[hd.offset:]
	switch hd.magic {
	case '4': // one bit a pixel, rows padded to a byte, 1 is black
		stride := (w + 7) / 8
		if len(px) < stride*h {
			return nil, false, errTruncated
		}
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				v := uint16(0xFF)
				if px[y*stride+x/8]>>(7-x%8)&1 != 0 {
					v = 0
				}
				vals = append(vals, v)
			}
		}
	case '5', '6':
		size := 1
		if hd.maxval > 255 {
			size = 2
		}
		if len(px) < n*size {
			return nil, false, errTruncated
		}
		for k := 0; k < n; k++ {
			v := int(px[k])
			if size == 2 {
				v = int(binary.BigEndian.Uint16(px[2*k:]))
			}
			vals = append(vals, uint16(scale(v)))
		}
	case '1': // plain: one character a pixel, whitespace optional
		for _, c := range stripPNMComments(px) {
			if len(vals) == n {
				break
			}
			switch c {
			case '0':
				vals = append(vals, 0xFF)
			case '1':
				vals = append(vals, 0)
			default:
				if !isPNMSpace(c) {
					return nil, false, fmt.Errorf("invalid character %q in a plain PBM", c)
				}
			}
		}
	default: // '2', '3': plain decimal values
		for _, tok := range bytes.FieldsFunc(stripPNMComments(px), func(r rune) bool { return r < 0x80 && isPNMSpace(byte(r)) }) {
			if len(vals) == n {
				break
			}
			v, err := strconv.Atoi(string(tok))
			if err != nil || v < 0 || len(tok) > 10 {
				return nil, false, fmt.Errorf("bad value %q", tok)
			}
			if v > hd.maxval {
				return nil, false, fmt.Errorf("value %d is over the maxval %d", v, hd.maxval)
			}
			vals = append(vals, uint16(scale(v)))
		}
	}
	if len(vals) < n {
		return nil, false, fmt.Errorf("%w: %d of %d samples", errTruncated, len(vals), n)
	}
	shift := 0
	if outMax == 65535 {
		shift = 8 // 16-bit grey keeps its high byte
	}
	img := newNRGBA(w, h)
	for k := 0; k < w*h; k++ {
		d := img.Pix[4*k : 4*k+4]
		if bands == 3 {
			d[0], d[1], d[2] = uint8(vals[3*k]), uint8(vals[3*k+1]), uint8(vals[3*k+2])
		} else {
			v := uint8(vals[k] >> shift)
			d[0], d[1], d[2] = v, v, v
		}
		d[3] = 0xFF
	}
	return img, true, nil
}

// stripPNMComments drops '#' comments, to the end of their line, from plain
// PNM data.
func stripPNMComments(b []byte) []byte {
	if bytes.IndexByte(b, '#') < 0 {
		return b
	}
	out := make([]byte, 0, len(b))
	for len(b) > 0 {
		k := bytes.IndexByte(b, '#')
		if k < 0 {
			return append(out, b...)
		}
		out = append(out, b[:k]...)
		b = b[k:]
		e := bytes.IndexAny(b, "\r\n")
		if e < 0 {
			break
		}
		b = b[e+1:]
	}
	return out
}
