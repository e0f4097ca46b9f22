package imgdec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"

	"golang.org/x/image/tiff"
)

// tiffTags reads the first inline SHORT or LONG value of each tag of the
// first IFD, the image Pillow opens on.
func tiffTags(data []byte) (map[uint16]int, error) {
	if len(data) < 8 {
		return nil, errTruncated
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if data[0] == 'M' {
		bo = binary.BigEndian
	}
	off := int64(bo.Uint32(data[4:]))
	if off < 8 || off+2 > int64(len(data)) {
		return nil, fmt.Errorf("%w: the first IFD at %d is past the end", errTruncated, off)
	}
	n := int64(bo.Uint16(data[off:]))
	tags := map[uint16]int{}
	for e := off + 2; e+12 <= int64(len(data)) && n > 0; e, n = e+12, n-1 {
		tag, typ := bo.Uint16(data[e:]), bo.Uint16(data[e+2:])
		switch typ {
		case 3: // SHORT
			tags[tag] = int(bo.Uint16(data[e+8:]))
		case 4: // LONG
			tags[tag] = int(bo.Uint32(data[e+8:]))
		}
	}
	return tags, nil
}

func tiffSize(data []byte) (int, int, error) {
	tags, err := tiffTags(data)
	if err != nil {
		return 0, 0, err
	}
	w, okw := tags[256]
	h, okh := tags[257]
	if !okw || !okh {
		return 0, 0, errors.New("the first IFD has no ImageWidth or ImageLength")
	}
	return w, h, nil
}

// tiffFileOrientation is the Orientation tag of the first IFD. Pillow 9.4
// applies it as it loads a TIFF, so Image.open(f).convert("RGB") is
// upright already (and ImageOps.exif_transpose turns it a second time).
func tiffFileOrientation(data []byte) int { return tiffOrientation(data) }

// tiffLayouts says what prep reads, for messages.
const tiffLayouts = "prep reads uncompressed, LZW, Deflate, PackBits and CCITT TIFFs of grey, palette, RGB and RGBA"

func decodeTIFF(data []byte, w, h int) (*image.NRGBA, bool, error) {
	tags, err := tiffTags(data)
	if err != nil {
		return nil, false, err
	}
	// golang.org/x/image/tiff reads grey with extra samples (grey+alpha)
	// as if there were none, giving wrong pixels.
	if spp, ok := tags[277]; ok && spp > 1 && tags[262] <= 1 {
		return nil, false, unsupported(fmt.Sprintf("unsupported TIFF layout (grey with %d samples a pixel, as grey+alpha; %s): convert it to PNG first", spp, tiffLayouts))
	}
	m, err := tiff.Decode(bytes.NewReader(data)) // the first IFD only
	var unsup tiff.UnsupportedError
	if errors.As(err, &unsup) {
		return nil, false, unsupported(fmt.Sprintf("unsupported TIFF layout (%s; %s): convert it to PNG first", string(unsup), tiffLayouts))
	}
	if err != nil {
		return nil, false, err
	}
	if b := m.Bounds(); b.Dx() != w || b.Dy() != h {
		return nil, false, fmt.Errorf("the header declares %d×%d but the image is %d×%d", w, h, b.Dx(), b.Dy())
	}
	// golang.org/x/image/tiff reads a CCITT-compressed (fax) image
	// stored BlackIsZero inverted; libtiff, and so Pillow, gives the same
	// pixels whatever the photometric tag says of such a file.
	if tags[259] >= 2 && tags[259] <= 4 && tags[262] == 1 {
		if g, ok := m.(*image.Gray); ok {
			for i, v := range g.Pix {
				g.Pix[i] = ^v
			}
		}
	}
	opaque := false
	switch m.(type) {
	case *image.Gray, *image.Gray16:
		opaque = true
	} // RGB without alpha comes as RGBA or RGBA64 too: the resize's scan decides.
	return toNRGBA(m), opaque, nil
}
