package imgdec

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"math/rand/v2"
	"testing"
)

// pngSpec describes a PNG for TestPNGDecodersAgree to write: every color
// type and bit depth, interlaced or not, with a tRNS chunk or not.
type pngSpec struct {
	w, h, ctype, depth int
	interlace, trns    bool
}

// channels per color type: grey, -, RGB, palette, grey+alpha, -, RGBA.
var pngChannels = map[int]int{0: 1, 2: 3, 3: 1, 4: 2, 6: 4}

// encode writes the PNG, its rows random (filter bytes included, so every
// filter runs) over a few sample values, so that tRNS's value occurs.
func (s pngSpec) encode(seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 2))
	sample := []byte{0x00, 0x07, 0xc8, 0xff}
	bpp := pngChannels[s.ctype] * s.depth // bits
	// tRNS's value, in 16 bits whatever the depth, as the format has it:
	// 7, or all ones below 3 bits.
	v := byte(min(7, 1<<s.depth-1))
	hi := byte(0)
	if s.depth == 16 {
		hi = v
	}
	var raw []byte
	rows := 0
	row := func(n int) {
		// Every other row unfiltered, so that its samples (tRNS's value
		// among them) are the decoded ones; the rest through filters.
		f := byte(0)
		if rows++; rows%2 == 0 {
			f = byte(1 + r.IntN(4))
		}
		raw = append(raw, f)
		if f == 0 && s.trns && s.depth >= 8 {
			for range n {
				for range pngChannels[s.ctype] {
					if s.depth == 16 {
						raw = append(raw, hi)
					}
					raw = append(raw, v)
				}
				if r.IntN(3) > 0 { // most pixels not transparent
					for k := range bpp / 8 {
						raw[len(raw)-1-k] = sample[r.IntN(4)]
					}
				}
			}
			return
		}
		for range (n*bpp + 7) / 8 {
			raw = append(raw, sample[r.IntN(4)]^byte(r.IntN(2)))
		}
	}
	if s.interlace {
		for _, p := range [7][4]int{{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4}, {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}} {
			pw, ph := (s.w-p[0]+p[2]-1)/p[2], (s.h-p[1]+p[3]-1)/p[3]
			if pw <= 0 || ph <= 0 {
				continue
			}
			for range ph {
				row(pw)
			}
		}
	} else {
		for range s.h {
			row(s.w)
		}
	}
	var out bytes.Buffer
	out.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		binary.Write(&out, binary.BigEndian, uint32(len(data)))
		c := crc32.NewIEEE()
		c.Write([]byte(typ))
		c.Write(data)
		out.WriteString(typ)
		out.Write(data)
		binary.Write(&out, binary.BigEndian, c.Sum32())
	}
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(s.w))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(s.h))
	il := byte(0)
	if s.interlace {
		il = 1
	}
	chunk("IHDR", append(ihdr, byte(s.depth), byte(s.ctype), 0, 0, il))
	if s.ctype == 3 {
		plte := make([]byte, 3<<s.depth)
		for i := range plte {
			plte[i] = byte(r.IntN(256))
		}
		chunk("PLTE", plte)
	}
	if s.trns {
		switch s.ctype {
		case 0:
			chunk("tRNS", []byte{hi, v})
		case 2:
			chunk("tRNS", []byte{hi, v, hi, v, hi, v})
		case 3:
			chunk("tRNS", []byte{0, 128, 255, 3}[:min(4, 1<<s.depth)]) // the first entries' alphas
		}
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(raw)
	zw.Close()
	chunk("IDAT", z.Bytes())
	chunk("IEND", nil)
	return out.Bytes()
}

// TestPNGDecodersAgree decodes PNGs of every color type, bit depth,
// interlacing and transparency with image/png and with libpng: the
// pixels must be the same bytes (image/png is checked against Pillow in
// TestPixelsMatchPillow).
func TestPNGDecodersAgree(t *testing.T) {
	if !TurboAvailable() {
		t.Skip("libpng is not built in (cgo off)")
	}
	depths := map[int][]int{0: {1, 2, 4, 8, 16}, 2: {8, 16}, 3: {1, 2, 4, 8}, 4: {8, 16}, 6: {8, 16}}
	var specs []pngSpec
	for ctype, ds := range depths {
		for _, d := range ds {
			for _, il := range []bool{false, true} {
				for _, trns := range []bool{false, true} {
					if trns && ctype >= 4 {
						continue // alpha types have no tRNS
					}
					specs = append(specs, pngSpec{13, 11, ctype, d, il, trns})
				}
			}
		}
	}
	specs = append(specs, pngSpec{1, 1, 2, 8, true, false}, pngSpec{3, 2, 6, 16, true, false}, pngSpec{9, 1, 3, 1, true, true})
	for i, s := range specs {
		name := fmt.Sprintf("%dx%d/ctype=%d/depth=%d/interlace=%v/trns=%v", s.w, s.h, s.ctype, s.depth, s.interlace, s.trns)
		t.Run(name, func(t *testing.T) {
			data := s.encode(uint64(i))
			want, winfo, err := Decode(data, Options{Decoder: DecoderGo})
			if err != nil {
				t.Fatalf("image/png: %v", err)
			}
			got, ginfo, err := Decode(data, Options{Decoder: DecoderTurbo})
			if err != nil {
				t.Fatalf("libpng: %v", err)
			}
			if s.trns && !hasAlpha(want) {
				t.Errorf("no pixel is transparent: the tRNS value never occurs")
			}
			if got.Rect != want.Rect || !bytes.Equal(got.Pix, want.Pix) || ginfo != winfo {
				t.Errorf("libpng gives %v %+v\n% x\nimage/png %v %+v\n% x", got.Rect, ginfo, got.Pix, want.Rect, winfo, want.Pix)
			}
		})
	}
}

func hasAlpha(img *image.NRGBA) bool {
	for i := 3; i < len(img.Pix); i += 4 {
		if img.Pix[i] != 0xff {
			return true
		}
	}
	return false
}

// TestPNGBeyondLibpng decodes a PNG past libpng's width limit (a million
// pixels, its default), which image/png reads: the turbo decoder falls
// back to it rather than lose the image.
func TestPNGBeyondLibpng(t *testing.T) {
	if !TurboAvailable() {
		t.Skip("libpng is not built in (cgo off)")
	}
	data := pngSpec{w: 1_000_001, h: 1, ctype: 0, depth: 8}.encode(9)
	if _, err := decodePNG(data, image.Config{Width: 1_000_001, Height: 1}); err == nil {
		t.Skip("this libpng takes images over a million pixels wide")
	}
	want, _, err := Decode(data, Options{Decoder: DecoderGo})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := Decode(data, Options{Decoder: DecoderTurbo})
	if err != nil || !bytes.Equal(got.Pix, want.Pix) {
		t.Fatalf("turbo: err %v, same pixels as image/png: %v", err, err == nil && bytes.Equal(got.Pix, want.Pix))
	}
}
