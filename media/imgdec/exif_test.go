package imgdec

import (
	"bytes"
	"encoding/binary"
	"image/jpeg"
	"os"
	"path/filepath"
	"testing"
)

// tiffBlock builds IFD0 with the given (tag, type, value) entries.
func tiffBlock(bo interface {
	binary.ByteOrder
	binary.AppendByteOrder
}, entries [][3]uint32) []byte {
	b := make([]byte, 8, 64)
	if bo.String() == "LittleEndian" {
		copy(b, "II")
	} else {
		copy(b, "MM")
	}
	bo.PutUint16(b[2:], 42)
	bo.PutUint32(b[4:], 8)
	b = bo.AppendUint16(b, uint16(len(entries)))
	for _, e := range entries {
		b = bo.AppendUint16(b, uint16(e[0]))
		b = bo.AppendUint16(b, uint16(e[1]))
		b = bo.AppendUint32(b, 1)
		if e[1] == 3 {
			b = bo.AppendUint16(b, uint16(e[2]))
			b = bo.AppendUint16(b, 0)
		} else {
			b = bo.AppendUint32(b, e[2])
		}
	}
	return bo.AppendUint32(b, 0)
}

func TestTIFFOrientation(t *testing.T) {
	le, be := binary.LittleEndian, binary.BigEndian
	tests := []struct {
		name string
		tiff []byte
		want int
	}{
		{"little endian", tiffBlock(le, [][3]uint32{{0x010F, 2, 0}, {0x0112, 3, 6}}), 6},
		{"big endian", tiffBlock(be, [][3]uint32{{0x0112, 3, 8}}), 8},
		{"long type", tiffBlock(be, [][3]uint32{{0x0112, 4, 3}}), 3},
		{"absent", tiffBlock(le, [][3]uint32{{0x010F, 2, 0}}), 0},
		{"wrong type", tiffBlock(le, [][3]uint32{{0x0112, 2, 6}}), 0},
		{"truncated", tiffBlock(le, [][3]uint32{{0x0112, 3, 6}})[:15], 0},
		{"bad magic", []byte("XX*\x00\x08\x00\x00\x00"), 0},
		{"offset past end", []byte("II*\x00\xff\xff\x00\x00"), 0},
		{"empty", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tiffOrientation(tt.tiff); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

func TestJPEGExifSegment(t *testing.T) {
	tiff := tiffBlock(binary.BigEndian, [][3]uint32{{0x0112, 3, 7}})
	seg := func(marker byte, body []byte) []byte {
		return append([]byte{0xFF, marker, byte((len(body) + 2) >> 8), byte(len(body) + 2)}, body...)
	}
	soi := []byte{0xFF, 0xD8}
	var file []byte
	file = append(file, soi...)
	file = append(file, seg(0xE0, []byte("JFIF\x00\x01\x01"))...)
	file = append(file, 0xFF) // a fill byte before the next marker
	file = append(file, seg(0xE1, []byte("http://ns.adobe.com/xap/1.0/\x00<x/>"))...)
	file = append(file, seg(0xE1, append([]byte("Exif\x00\x00"), tiff...))...)
	file = append(file, 0xFF, 0xDA)
	if got := orientation("jpeg", file); got != 7 {
		t.Errorf("orientation %d, want 7", got)
	}
	// An Exif segment after the start of scan is image data, not metadata.
	late := append(append(append([]byte{}, soi...), 0xFF, 0xDA, 0, 2), seg(0xE1, append([]byte("Exif\x00\x00"), tiff...))...)
	if got := orientation("jpeg", late); got != 1 {
		t.Errorf("orientation after SOS %d, want 1", got)
	}
}

// FuzzOrientation feeds the EXIF walkers arbitrary bytes: they must never
// panic and always answer 1..8.
func FuzzOrientation(f *testing.F) {
	f.Add(tiffBlock(binary.LittleEndian, [][3]uint32{{0x0112, 3, 6}}))
	f.Add(tiffBlock(binary.BigEndian, [][3]uint32{{0x0112, 4, 8}}))
	for _, name := range []string{"exif_6.jpg", "exif_8.jpg", "exif_6.png", "cmyk.jpg"} {
		if b, err := os.ReadFile(filepath.Join(edgeDir, name)); err == nil {
			f.Add(b[:min(len(b), 400)])
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tiffOrientation(b)
		if w, h, ok := jpegSize(b); ok {
			if cfg, err := jpeg.DecodeConfig(bytes.NewReader(b)); err == nil && (cfg.Width != w || cfg.Height != h) {
				t.Fatalf("jpegSize %dx%d, image/jpeg %dx%d", w, h, cfg.Width, cfg.Height)
			}
		}
		for _, format := range []string{"jpeg", "png"} {
			if o := orientation(format, b); o < 1 || o > 8 {
				t.Fatalf("orientation %d", o)
			}
		}
	})
}

// FuzzDecode checks that no input makes Decode panic or return an image
// without an error being nil.
func FuzzDecode(f *testing.F) {
	for _, name := range []string{"exif_6.jpg", "exif_6.png", "palette_trns.png", "cmyk.jpg", "grey16.png"} {
		if b, err := os.ReadFile(filepath.Join(edgeDir, name)); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, dec := range decoders() {
			img, _, err := Decode(b, Options{MaxPixels: 1 << 16, Decoder: dec, MinSide: 8})
			if (img == nil) == (err == nil) {
				t.Fatalf("%s: image %v with error %v", dec, img != nil, err)
			}
		}
	})
}
