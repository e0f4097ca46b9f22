package imgdec

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestInfoOpaque checks Info.Opaque against the decoded alpha: it may be
// false for an opaque image, never true for one with other alpha.
func TestInfoOpaque(t *testing.T) {
	enc := func(m image.Image) []byte {
		var b bytes.Buffer
		if err := png.Encode(&b, m); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	r := image.Rect(0, 0, 5, 3)
	rgba := image.NewNRGBA(r)
	for i := range rgba.Pix {
		rgba.Pix[i] = 255
	}
	half := image.NewNRGBA(r)
	copy(half.Pix, rgba.Pix)
	half.Pix[3] = 128
	pal := image.NewPaletted(r, color.Palette{color.NRGBA{1, 2, 3, 255}, color.NRGBA{4, 5, 6, 0}})
	pal.Pix[1] = 1
	cases := map[string]struct {
		data []byte
		want bool
	}{
		"gray":               {enc(image.NewGray(r)), true},
		"gray16":             {enc(image.NewGray16(r)), true},
		"rgb (opaque NRGBA)": {enc(rgba), true},
		"rgba":               {enc(half), false},
		"palette":            {enc(image.NewPaletted(r, color.Palette{color.NRGBA{1, 2, 3, 255}})), true},
		"palette with tRNS":  {enc(pal), false},
		"truncated header":   {enc(rgba)[:20], false},
		"rgba64 transparent": {enc(image.NewNRGBA64(r)), false},
	}
	files, _ := filepath.Glob("../../testdata/images/*/*")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cases[f] = struct {
			data []byte
			want bool
		}{data, true}
	}
	for name, c := range cases {
		if got := pngOpaque(c.data) || bytes.HasPrefix(c.data, []byte{0xFF, 0xD8}); got != c.want {
			t.Errorf("%s: opaque %v, want %v", name, got, c.want)
		}
		if len(c.data) < 40 {
			continue
		}
		for _, dec := range decoders() {
			img, info, err := Decode(c.data, Options{Decoder: dec})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if info.Opaque != c.want {
				t.Errorf("%s (%s): Info.Opaque %v, want %v", name, dec, info.Opaque, c.want)
			}
			if info.Opaque && !img.Opaque() {
				t.Errorf("%s (%s): Info.Opaque for an image with transparency", name, dec)
			}
		}
	}
}

// TestCMYKToRGBA checks the table conversion of libjpeg's CMYK output
// against color.CMYKToRGB for every ink and black value of each channel
// (each output channel depends on its ink and the black alone), plain and
// inverted as in Adobe's files, and that alpha comes out opaque.
func TestCMYKToRGBA(t *testing.T) {
	for _, inverted := range []bool{false, true} {
		img := image.NewNRGBA(image.Rect(0, 0, 256, 256))
		for i := 0; i < len(img.Pix); i += 4 {
			v, k := uint8(i/4>>8), uint8(i/4)
			img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = v, 255-v, v^0x5A, k
		}
		orig := slices.Clone(img.Pix)
		cmykToRGBA(img, inverted)
		var inv uint8
		if inverted {
			inv = 0xFF
		}
		for i := 0; i < len(orig); i += 4 {
			r, g, b := color.CMYKToRGB(orig[i]^inv, orig[i+1]^inv, orig[i+2]^inv, orig[i+3]^inv)
			if got := img.Pix[i : i+4]; got[0] != r || got[1] != g || got[2] != b || got[3] != 0xFF {
				t.Fatalf("inverted=%v: CMYK %v gave RGBA %v, want %v %v %v 255", inverted, orig[i:i+4], got, r, g, b)
			}
		}
	}
}
