// Package wav encodes and decodes RIFF/WAVE files: 16-bit PCM from int16
// tensors and IEEE float from float32 tensors, shaped (frames, channels).
package wav

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/prep-dev/prep/formats"
)

// Format tags from the WAVE specification (mmreg.h).
const (
	formatPCM        = 1
	formatIEEEFloat  = 3
	formatExtensible = 0xFFFE
)

// Header sizes: RIFF header, fmt chunk, fact chunk, data chunk header.
const (
	riffHeader = 12
	pcmFmt     = 8 + 16 // WAVEFORMAT plus wBitsPerSample
	floatFmt   = 8 + 18 // WAVEFORMATEX with cbSize = 0
	factChunk  = 8 + 4  // dwSampleLength
	dataHeader = 8
	maxRIFF    = math.MaxUint32 // the RIFF size field is 32 bits
)

// layout checks t and returns its frame and channel counts and format tag.
func layout(t formats.Tensor) (frames, channels int, tag uint16, err error) {
	switch t.DType {
	case formats.Int16:
		tag = formatPCM
	case formats.Float32:
		tag = formatIEEEFloat
	default:
		return 0, 0, 0, fmt.Errorf("wav holds int16 or float32 samples, not %s", t.DType)
	}
	switch len(t.Shape) {
	case 1:
		frames, channels = t.Shape[0], 1
	case 2:
		frames, channels = t.Shape[0], t.Shape[1]
	default:
		return 0, 0, 0, fmt.Errorf("wav needs a (frames, channels) or (frames,) tensor, not shape %v", t.Shape)
	}
	if channels < 1 || channels > math.MaxUint16 || frames < 0 {
		return 0, 0, 0, fmt.Errorf("wav cannot hold shape %v", t.Shape)
	}
	if err := t.Validate(); err != nil {
		return 0, 0, 0, err
	}
	return frames, channels, tag, nil
}

func headerSize(tag uint16) int64 {
	if tag == formatPCM {
		return riffHeader + pcmFmt + dataHeader
	}
	return riffHeader + floatFmt + factChunk + dataHeader
}

// Size returns the exact number of bytes Encode writes for t, or -1 when t
// cannot be encoded.
func Size(t formats.Tensor) int64 {
	_, _, tag, err := layout(t)
	if err != nil {
		return -1
	}
	// int16 and float32 data is always of even length: no pad byte.
	return headerSize(tag) + int64(len(t.Data))
}

// Check reports whether Encode can write t at rate, without writing.
func Check(t formats.Tensor, rate int) error {
	if _, _, _, err := layout(t); err != nil {
		return err
	}
	if rate <= 0 || rate > math.MaxUint32 {
		return fmt.Errorf("wav sample rate %d out of range", rate)
	}
	if size := Size(t); size-8 > maxRIFF {
		return fmt.Errorf("wav of %d bytes exceeds the 4 GiB RIFF limit; split the clip", size)
	}
	return nil
}

// Encode writes t, shaped (frames, channels) or (frames,) for mono, as a
// WAVE file at rate Hz. int16 becomes 16-bit PCM; float32 becomes
// WAVE_FORMAT_IEEE_FLOAT with the fact chunk the specification requires
// for formats other than PCM. More than two channels are written with the
// plain format tags rather than WAVE_FORMAT_EXTENSIBLE; sox, ffmpeg and
// Python's wave and soundfile modules read them.
func Encode(w io.Writer, t formats.Tensor, rate int) error {
	if err := Check(t, rate); err != nil {
		return err
	}
	frames, channels, tag, _ := layout(t)
	size := Size(t)
	bits := t.DType.Size() * 8
	blockAlign := channels * t.DType.Size()

	var h [riffHeader + floatFmt + factChunk + dataHeader]byte
	le := binary.LittleEndian
	b := h[:0]
	b = append(b, "RIFF"...)
	b = le.AppendUint32(b, uint32(size-8))
	b = append(b, "WAVE"...)
	b = append(b, "fmt "...)
	if tag == formatPCM {
		b = le.AppendUint32(b, 16)
	} else {
		b = le.AppendUint32(b, 18)
	}
	b = le.AppendUint16(b, tag)
	b = le.AppendUint16(b, uint16(channels))
	b = le.AppendUint32(b, uint32(rate))
	b = le.AppendUint32(b, uint32(rate*blockAlign))
	b = le.AppendUint16(b, uint16(blockAlign))
	b = le.AppendUint16(b, uint16(bits))
	if tag != formatPCM {
		b = le.AppendUint16(b, 0) // cbSize: no extra format bytes
		b = append(b, "fact"...)
		b = le.AppendUint32(b, 4)
		b = le.AppendUint32(b, uint32(frames))
	}
	b = append(b, "data"...)
	b = le.AppendUint32(b, uint32(len(t.Data)))
	if _, err := w.Write(b); err != nil {
		return err
	}
	// Tensor data is little-endian already, as WAVE requires.
	_, err := w.Write(t.Data)
	return err
}

// Decode reads a WAVE file of 16-bit PCM or 32-bit IEEE float (plain or
// WAVE_FORMAT_EXTENSIBLE) and returns its samples shaped (frames,
// channels), mono included, with the sample rate.
func Decode(r io.Reader) (formats.Tensor, int, error) {
	var t formats.Tensor
	f, n, err := readHeader(r)
	if err != nil {
		return t, 0, err
	}
	var dtype formats.DType
	switch {
	case f.tag == formatPCM && f.bits == 16:
		dtype = formats.Int16
	case f.tag == formatIEEEFloat && f.bits == 32:
		dtype = formats.Float32
	default:
		return t, 0, fmt.Errorf("wav format %d with %d bits per sample is not supported; convert it to 16-bit PCM or 32-bit float", f.tag, f.bits)
	}
	frame := int64(f.channels * dtype.Size())
	if n%frame != 0 {
		return t, 0, fmt.Errorf("wav data of %d bytes is not whole frames of %d bytes", n, frame)
	}
	data, err := readN(r, n)
	if err != nil {
		return t, 0, fmt.Errorf("wav data: %w", err)
	}
	return formats.Tensor{DType: dtype, Shape: []int{int(n / frame), f.channels}, Data: data}, f.rate, nil
}

// DecodeBytes is Decode for a file held in memory.
func DecodeBytes(b []byte) (formats.Tensor, int, error) {
	return Decode(bytes.NewReader(b))
}

// format is what a fmt chunk says.
type format struct {
	tag            uint16 // formatPCM or formatIEEEFloat; an EXTENSIBLE file's sub-format
	bits           int    // per sample
	channels, rate int
}

// readHeader reads r up to the first sample: the RIFF header, the fmt
// chunk, the data chunk's header, skipping the chunks between (fact,
// LIST, ...). It returns the format and the data chunk's size.
func readHeader(r io.Reader) (format, int64, error) {
	var hdr [riffHeader]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return format{}, 0, fmt.Errorf("wav header: %w", unexpected(err))
	}
	if string(hdr[:4]) != "RIFF" || string(hdr[8:12]) != "WAVE" {
		return format{}, 0, errors.New("not a RIFF/WAVE file")
	}
	var f format
	haveFmt := false
	for {
		var ch [8]byte
		if _, err := io.ReadFull(r, ch[:]); err != nil {
			return f, 0, errNoData
		}
		id, n := string(ch[:4]), int64(binary.LittleEndian.Uint32(ch[4:]))
		switch id {
		case "fmt ":
			if n < 16 || n > 64 {
				return f, 0, fmt.Errorf("wav fmt chunk of %d bytes", n)
			}
			b := make([]byte, n+n&1)
			if _, err := io.ReadFull(r, b); err != nil {
				return f, 0, fmt.Errorf("wav fmt chunk: %w", unexpected(err))
			}
			var err error
			if f, err = parseFmt(b[:n]); err != nil {
				return f, 0, err
			}
			haveFmt = true
		case "data":
			if !haveFmt {
				return f, 0, errors.New("wav data chunk before fmt chunk")
			}
			return f, n, nil
		default:
			// Including the pad byte.
			if _, err := io.CopyN(io.Discard, r, n+n&1); err != nil {
				return f, 0, errNoData
			}
		}
	}
}

// errNoData is a header that ends before the samples: prep's words for
// what ffmpeg calls "no 'data' tag found".
var errNoData = errors.New("damaged WAV: its header ends before the audio data; re-encode or remove the file")

// extensibleTail is the tail shared by the KSDATAFORMAT_SUBTYPE GUIDs;
// their first two bytes hold the plain format tag.
var extensibleTail = []byte{0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71}

// parseFmt reads a fmt chunk of at least 16 bytes. Which encodings a
// decoder takes is its own choice.
func parseFmt(b []byte) (format, error) {
	le := binary.LittleEndian
	f := format{tag: le.Uint16(b[0:]), channels: int(le.Uint16(b[2:])), rate: int(le.Uint32(b[4:])), bits: int(le.Uint16(b[14:]))}
	if f.tag == formatExtensible {
		if len(b) < 40 || !bytes.Equal(b[26:40], extensibleTail) {
			return f, errors.New("wav WAVE_FORMAT_EXTENSIBLE with an unknown sub-format")
		}
		f.tag = le.Uint16(b[24:])
	}
	switch {
	case f.channels == 0:
		return f, errors.New("wav with zero channels")
	case f.rate == 0:
		// Encode refuses a rate of 0, so a file with one could be read
		// from a shard but not written back.
		return f, errors.New("wav with a sample rate of 0 Hz: the fmt chunk is damaged")
	}
	return f, nil
}

// readN reads exactly n bytes. Sizes beyond 64 MiB are read in growing
// steps, so a corrupt size field cannot ask for gigabytes up front.
func readN(r io.Reader, n int64) ([]byte, error) {
	if n <= 64<<20 {
		b := make([]byte, n)
		_, err := io.ReadFull(r, b)
		return b, unexpected(err)
	}
	b, err := io.ReadAll(io.LimitReader(r, n))
	if err == nil && int64(len(b)) != n {
		err = fmt.Errorf("%d of %d bytes: %w", len(b), n, io.ErrUnexpectedEOF)
	}
	return b, err
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
