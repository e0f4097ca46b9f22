package tarshard

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/png"
	"sync"

	"github.com/prep-dev/prep/formats"
)

// encoder stores pixels without compression: a level-0 PNG is a valid
// image any decoder opens, yet costs little more than a copy to read.
// Go skips row filters at this level, so every row carries filter 0.
var encoder = png.Encoder{CompressionLevel: png.NoCompression, BufferPool: &encoderPool{}}

type encoderPool struct{ p sync.Pool }

func (p *encoderPool) Get() *png.EncoderBuffer {
	b, _ := p.p.Get().(*png.EncoderBuffer)
	return b
}

func (p *encoderPool) Put(b *png.EncoderBuffer) { p.p.Put(b) }

// imageLayout checks that t is a uint8 image or clip and returns its frame
// count, height, width and channels. Shapes: (H,W) and (H,W,1) grey,
// (H,W,3) RGB, (T,H,W,1) and (T,H,W,3) clips; frames is 0 for an image.
func imageLayout(t formats.Tensor) (frames, h, w, c int, err error) {
	if t.DType != formats.Uint8 {
		return 0, 0, 0, 0, fmt.Errorf("png shards hold uint8 pixels, not %s; use --format hdf5", t.DType)
	}
	s := t.Shape
	switch len(s) {
	case 2:
		h, w, c = s[0], s[1], 1
	case 3:
		h, w, c = s[0], s[1], s[2]
	case 4:
		frames, h, w, c = s[0], s[1], s[2], s[3]
		if frames < 1 {
			return 0, 0, 0, 0, fmt.Errorf("png clip of shape %v has no frames", s)
		}
	default:
		return 0, 0, 0, 0, fmt.Errorf("png shards hold (H,W[,C]) images or (T,H,W,C) clips, not shape %v", s)
	}
	if c != 1 && c != 3 {
		return 0, 0, 0, 0, fmt.Errorf("png shards hold grey or RGB pixels, not %d channels (shape %v); use --format hdf5", c, s)
	}
	if h < 1 || w < 1 || h >= 1<<31 || w >= 1<<31 {
		return 0, 0, 0, 0, fmt.Errorf("png cannot hold an image of %d×%d", w, h)
	}
	return frames, h, w, c, t.Validate()
}

// pngEncoder turns frames into PNG bytes, reusing its buffers.
type pngEncoder struct {
	out  bytes.Buffer
	rgba image.RGBA
}

// encode writes one h×w frame of c channels into e.out, replacing what it
// held, and returns the bytes, valid until the next call.
func (e *pngEncoder) encode(pix []byte, h, w, c int) ([]byte, error) {
	e.out.Reset()
	var m image.Image
	if c == 1 {
		// image.Gray has the pixel layout of the tensor: no copy.
		m = &image.Gray{Pix: pix, Stride: w, Rect: image.Rect(0, 0, w, h)}
	} else {
		// Go has no RGB image type; the encoder writes an opaque *image.RGBA
		// as an RGB PNG (colour type 2) through its fast path.
		n := h * w * 4
		if cap(e.rgba.Pix) < n {
			e.rgba.Pix = make([]byte, n)
		}
		dst := e.rgba.Pix[:n]
		for i, j := 0, 0; j < n; i, j = i+3, j+4 {
			dst[j], dst[j+1], dst[j+2], dst[j+3] = pix[i], pix[i+1], pix[i+2], 0xff
		}
		e.rgba = image.RGBA{Pix: dst, Stride: 4 * w, Rect: image.Rect(0, 0, w, h)}
		m = &e.rgba
	}
	if err := encoder.Encode(&e.out, m); err != nil {
		return nil, err
	}
	return e.out.Bytes(), nil
}

// decodePNG returns the pixels of a grey or RGB PNG as (H,W,1) or (H,W,3).
func decodePNG(b []byte) (formats.Tensor, error) {
	if err := checkPNGSize(b); err != nil {
		return formats.Tensor{}, err
	}
	m, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		return formats.Tensor{}, err
	}
	r := m.Bounds()
	h, w := r.Dy(), r.Dx()
	switch m := m.(type) {
	case *image.Gray:
		data := make([]byte, 0, h*w)
		for y := range h {
			data = append(data, m.Pix[y*m.Stride:y*m.Stride+w]...)
		}
		return formats.Tensor{DType: formats.Uint8, Shape: []int{h, w, 1}, Data: data}, nil
	case *image.RGBA:
		// Go decodes RGB PNGs as opaque RGBA.
		data := make([]byte, 0, h*w*3)
		for y := range h {
			row := m.Pix[y*m.Stride : y*m.Stride+4*w]
			for x := 0; x < len(row); x += 4 {
				data = append(data, row[x], row[x+1], row[x+2])
			}
		}
		return formats.Tensor{DType: formats.Uint8, Shape: []int{h, w, 3}, Data: data}, nil
	}
	return formats.Tensor{}, fmt.Errorf("png colour model %T is not grey or RGB", m)
}

// checkPNGSize refuses a PNG whose header declares more pixel bytes than
// its data could inflate to, before image/png allocates the image: a
// 72-byte member declaring 100000×100000 RGB at 16 bits asks for 80 GB,
// and the runtime's out-of-memory error cannot be recovered from.
func checkPNGSize(b []byte) error {
	// Only the IHDR chunk, which must come first, is read here: a header
	// prep cannot size is left for png.Decode to refuse, and a decoder is
	// not built twice for every member.
	if len(b) < 29 || string(b[:8]) != "\x89PNG\r\n\x1a\n" || string(b[12:16]) != "IHDR" {
		return nil
	}
	ihdr := b[16:29]
	w, h := uint64(binary.BigEndian.Uint32(ihdr)), uint64(binary.BigEndian.Uint32(ihdr[4:]))
	depth, channels := uint64(ihdr[8]), uint64(1) // grey, palette
	switch ihdr[9] {
	case 2: // RGB
		channels = 3
	case 4: // grey and alpha
		channels = 2
	case 6: // RGBA
		channels = 4
	}
	// At least h rows of w pixels (interlacing only adds filter bytes):
	// h × row > limit, in a form that cannot overflow.
	row, limit := (w*channels*depth+7)/8, formats.MaxDeflateRatio*uint64(len(b))
	if row > 0 && h > limit/row {
		return fmt.Errorf("png declares %d×%d pixels, more than its %d bytes can hold: the member is damaged", w, h, len(b))
	}
	return nil
}
