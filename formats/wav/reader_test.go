package wav

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"slices"
	"testing"

	"github.com/prep-dev/prep/formats"
)

// readAll reads r to its end, n samples at a time.
func readAll(r *Reader, n int) ([]float32, error) {
	var out []float32
	buf := make([]float32, n)
	for {
		k, err := r.Read(buf)
		out = append(out, buf[:k]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// oneByteReader returns one byte per Read: frames arrive in pieces.
type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) { return o.r.Read(p[:min(1, len(p))]) }

func TestReader(t *testing.T) {
	for _, tt := range []struct {
		dtype    formats.DType
		channels int
	}{{formats.Int16, 1}, {formats.Int16, 2}, {formats.Float32, 3}} {
		src := sine(tt.dtype, 1000, tt.channels, []int{1000, tt.channels})
		var file bytes.Buffer
		if err := Encode(&file, src, 8000); err != nil {
			t.Fatal(err)
		}
		want := make([]float32, 1000*tt.channels)
		for i := range want {
			if tt.dtype == formats.Int16 {
				want[i] = float32(int16(binary.LittleEndian.Uint16(src.Data[2*i:]))) / 32768
			} else {
				want[i] = math.Float32frombits(binary.LittleEndian.Uint32(src.Data[4*i:]))
			}
		}
		for _, piece := range []int{tt.channels, 7 * tt.channels, 4096} {
			for _, slow := range []bool{false, true} {
				var in io.Reader = bytes.NewReader(file.Bytes())
				if slow {
					in = oneByteReader{in}
				}
				r, err := NewReader(in)
				if err != nil {
					t.Fatal(err)
				}
				got, err := readAll(r, piece)
				if err != nil || r.Rate != 8000 || r.Channels != tt.channels || r.Frames != 1000 || !slices.Equal(got, want) {
					t.Errorf("%s ×%d, pieces of %d, slow %v: %d samples, %v, %d Hz × %d, %d frames",
						tt.dtype, tt.channels, piece, slow, len(got), err, r.Rate, r.Channels, r.Frames)
				}
			}
		}
	}
}

// TestReaderStream reads a data chunk of size 0xFFFFFFFF, as ffmpeg writes
// to a pipe, to the end of the stream, and one cut short as truncated.
func TestReaderStream(t *testing.T) {
	var file bytes.Buffer
	if err := Encode(&file, sine(formats.Int16, 500, 2, []int{500, 2}), 16000); err != nil {
		t.Fatal(err)
	}
	b := bytes.Clone(file.Bytes())
	i := bytes.Index(b, []byte("data"))
	binary.LittleEndian.PutUint32(b[i+4:], math.MaxUint32)
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(r, 256)
	if err != nil || r.Frames != -1 || len(got) != 1000 {
		t.Errorf("streamed: %d samples, %v, frames %d; want 1000, nil, -1", len(got), err, r.Frames)
	}
	for _, cut := range []int{len(file.Bytes()) - 4, len(file.Bytes()) - 1, i + 8 + 3} {
		r, err := NewReader(bytes.NewReader(file.Bytes()[:cut]))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := readAll(r, 256); !errors.Is(err, ErrTruncated) {
			t.Errorf("cut at %d of %d: %v, want ErrTruncated", cut, len(file.Bytes()), err)
		}
	}
}

func TestReaderRejects(t *testing.T) {
	var file bytes.Buffer
	if err := Encode(&file, sine(formats.Int16, 10, 1, []int{10, 1}), 16000); err != nil {
		t.Fatal(err)
	}
	fmtAt := bytes.Index(file.Bytes(), []byte("fmt ")) + 8
	mulaw := bytes.Clone(file.Bytes())
	binary.LittleEndian.PutUint16(mulaw[fmtAt:], 7) // WAVE_FORMAT_MULAW
	binary.LittleEndian.PutUint16(mulaw[fmtAt+14:], 8)
	tests := []struct {
		name string
		b    []byte
		is   error
		want string
	}{
		{"mu-law", mulaw, ErrUnsupported, "format 7 with 8 bits"},
		{"header only", file.Bytes()[:fmtAt+16], nil, "damaged WAV: its header ends before the audio data"},
		{"not wav", []byte("RIFF\x00\x00\x00\x00AVI LIST"), nil, "not a RIFF/WAVE file"},
	}
	for _, tt := range tests {
		_, err := NewReader(bytes.NewReader(tt.b))
		if err == nil || tt.is != nil && !errors.Is(err, tt.is) || !bytes.Contains([]byte(err.Error()), []byte(tt.want)) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}
