package wav

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/prep-dev/prep/formats"
)

// FuzzDecode: Decode never panics, reads the same from a reader that
// returns one byte at a time, and what it accepts is a valid (frames,
// channels) tensor of a type Encode writes, which survives Encode and
// Decode again unchanged.
func FuzzDecode(f *testing.F) {
	for _, c := range cases {
		var buf bytes.Buffer
		if err := Encode(&buf, c.tensor(), c.rate); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	for _, name := range []string{"sine.wav", "truncated.wav"} {
		b, err := os.ReadFile("../../testdata/audio/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[:min(len(b), 4096)])
	}
	f.Add(extensibleWAV(formatIEEEFloat, 32, []byte("LIST\x03\x00\x00\x00abc\x00")))
	f.Add(extensibleWAV(formatPCM, 16, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		tn, rate, err := DecodeBytes(b)
		tn1, rate1, err1 := Decode(iotest.OneByteReader(bytes.NewReader(b)))
		if (err == nil) != (err1 == nil) || rate != rate1 || !sameTensor(tn, tn1) {
			t.Fatalf("whole: %v %d %v; byte by byte: %v %d %v", err, rate, tn.Shape, err1, rate1, tn1.Shape)
		}
		if err != nil {
			return
		}
		if tn.DType != formats.Int16 && tn.DType != formats.Float32 || len(tn.Shape) != 2 || tn.Shape[1] < 1 {
			t.Fatalf("accepted %s%v", tn.DType, tn.Shape)
		}
		if err := tn.Validate(); err != nil {
			t.Fatalf("accepted an invalid tensor: %v", err)
		}
		var again bytes.Buffer
		if err := Encode(&again, tn, rate); err != nil {
			t.Fatalf("accepted %s%v at %d Hz, which Encode refuses: %v", tn.DType, tn.Shape, rate, err)
		}
		tn2, rate2, err := DecodeBytes(again.Bytes())
		if err != nil || rate2 != rate || !sameTensor(tn, tn2) {
			t.Fatalf("re-encoded: %v, %d Hz, %s%v; want %d Hz, %s%v", err, rate2, tn2.DType, tn2.Shape, rate, tn.DType, tn.Shape)
		}
	})
}

func sameTensor(a, b formats.Tensor) bool {
	return formats.SameShape(a, b) && bytes.Equal(a.Data, b.Data)
}

// extensibleWAV is a stereo WAVE_FORMAT_EXTENSIBLE file of two frames of
// sub-format tag at bits per sample, with extra chunks before the data.
func extensibleWAV(tag, bits uint16, extra []byte) []byte {
	le := binary.LittleEndian
	fmtBody := le.AppendUint16(nil, formatExtensible)
	fmtBody = le.AppendUint16(fmtBody, 2)
	fmtBody = le.AppendUint32(fmtBody, 8000)
	fmtBody = le.AppendUint32(fmtBody, 8000*2*uint32(bits)/8)
	fmtBody = le.AppendUint16(fmtBody, 2*bits/8)
	fmtBody = le.AppendUint16(fmtBody, bits)
	fmtBody = le.AppendUint16(fmtBody, 22) // cbSize
	fmtBody = le.AppendUint16(fmtBody, bits)
	fmtBody = le.AppendUint32(fmtBody, 3) // channel mask
	fmtBody = le.AppendUint16(fmtBody, tag)
	fmtBody = append(fmtBody, extensibleTail...)
	data := make([]byte, 2*2*int(bits)/8)
	b := []byte("RIFF\x00\x00\x00\x00WAVEfmt ")
	b = le.AppendUint32(b, uint32(len(fmtBody)))
	b = append(append(b, fmtBody...), extra...)
	b = append(b, "data"...)
	b = le.AppendUint32(b, uint32(len(data)))
	b = append(b, data...)
	le.PutUint32(b[4:], uint32(len(b)-8))
	return b
}

// TestExtensible checks the fuzz seeds' WAVE_FORMAT_EXTENSIBLE writer
// against Decode, so that they reach past the fmt chunk.
func TestExtensible(t *testing.T) {
	for _, tc := range []struct {
		tag, bits uint16
		want      formats.DType
	}{{formatPCM, 16, formats.Int16}, {formatIEEEFloat, 32, formats.Float32}} {
		tn, rate, err := DecodeBytes(extensibleWAV(tc.tag, tc.bits, []byte("LIST\x03\x00\x00\x00abc\x00")))
		if err != nil || rate != 8000 || tn.DType != tc.want || !slices.Equal(tn.Shape, []int{2, 2}) {
			t.Errorf("tag %d: %v, %d Hz, %s%v", tc.tag, err, rate, tn.DType, tn.Shape)
		}
	}
}

// FuzzReader: the streaming Reader never panics, delivers whole frames,
// agrees with itself when bytes come one at a time, and on what Decode
// accepts gives Decode's samples.
func FuzzReader(f *testing.F) {
	for _, c := range cases {
		var buf bytes.Buffer
		if err := Encode(&buf, c.tensor(), c.rate); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	f.Add(extensibleWAV(formatPCM, 24, nil))
	f.Add(extensibleWAV(formatIEEEFloat, 64, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		read := func(r io.Reader) ([]float32, int, error) {
			w, err := NewReader(r)
			if err != nil {
				return nil, 0, err
			}
			var out []float32
			buf := make([]float32, 3*w.Channels)
			for {
				n, err := w.Read(buf)
				if n%w.Channels != 0 {
					t.Fatalf("Read gave %d samples of %d channels", n, w.Channels)
				}
				out = append(out, buf[:n]...)
				if err == io.EOF {
					return out, w.Channels, nil
				}
				if err != nil {
					return out, w.Channels, err
				}
			}
		}
		got, ch, err := read(bytes.NewReader(b))
		got1, _, err1 := read(iotest.OneByteReader(bytes.NewReader(b)))
		if (err == nil) != (err1 == nil) || !slices.Equal(got, got1) && !hasNaN(got) {
			t.Fatalf("whole: %d samples, %v; byte by byte: %d, %v", len(got), err, len(got1), err1)
		}
		tn, _, derr := DecodeBytes(b)
		if derr != nil || err != nil || tn.DType != formats.Int16 {
			return
		}
		if len(got) != len(tn.Data)/2 || tn.Shape[1] != ch {
			t.Fatalf("Reader: %d samples × %d; Decode: %v", len(got), ch, tn.Shape)
		}
		for i, v := range got {
			if want := float32(int16(binary.LittleEndian.Uint16(tn.Data[2*i:]))) / 32768; v != want {
				t.Fatalf("sample %d: %v, Decode's is %v", i, v, want)
			}
		}
	})
}

func hasNaN(s []float32) bool {
	return slices.ContainsFunc(s, func(v float32) bool { return v != v })
}
