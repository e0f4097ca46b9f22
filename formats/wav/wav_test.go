package wav

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/internal/testenv"
)

// sine returns frames×channels of a sine sweep, each channel a different
// frequency, as int16 or float32.
func sine(dtype formats.DType, frames, channels int, shape []int) formats.Tensor {
	t := formats.Tensor{DType: dtype, Shape: shape}
	for i := range frames {
		for c := range channels {
			v := 0.8 * math.Sin(2*math.Pi*float64(i*(c+1))/97)
			switch dtype {
			case formats.Int16:
				t.Data = binary.LittleEndian.AppendUint16(t.Data, uint16(int16(v*32767)))
			case formats.Float32:
				t.Data = binary.LittleEndian.AppendUint32(t.Data, math.Float32bits(float32(v)))
			}
		}
	}
	return t
}

type testCase struct {
	name     string
	dtype    formats.DType
	frames   int
	channels int
	mono1D   bool
	rate     int
	encoding string // soxi -e
}

var cases = []testCase{
	{"pcm16-stereo", formats.Int16, 4410, 2, false, 44100, "Signed Integer PCM"},
	{"pcm16-mono1d", formats.Int16, 1600, 1, true, 16000, "Signed Integer PCM"},
	{"float-stereo", formats.Float32, 4800, 2, false, 48000, "Floating Point PCM"},
	{"float-6ch", formats.Float32, 800, 6, false, 8000, "Floating Point PCM"},
	{"pcm16-empty", formats.Int16, 0, 1, false, 22050, "Signed Integer PCM"},
}

func (c testCase) tensor() formats.Tensor {
	shape := []int{c.frames, c.channels}
	if c.mono1D {
		shape = []int{c.frames}
	}
	return sine(c.dtype, c.frames, c.channels, shape)
}

func encode(t *testing.T, c testCase) []byte {
	t.Helper()
	var buf bytes.Buffer
	tn := c.tensor()
	if err := Encode(&buf, tn, c.rate); err != nil {
		t.Fatal(err)
	}
	if got, want := int64(buf.Len()), Size(tn); got != want {
		t.Fatalf("Encode wrote %d bytes, Size says %d", got, want)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := encode(t, c)
			got, rate, err := DecodeBytes(b)
			if err != nil {
				t.Fatal(err)
			}
			want := c.tensor()
			if rate != c.rate || got.DType != c.dtype || len(got.Shape) != 2 ||
				got.Shape[0] != c.frames || got.Shape[1] != c.channels {
				t.Fatalf("decoded %s%v at %d Hz, want %s(%d, %d) at %d Hz",
					got.DType, got.Shape, rate, c.dtype, c.frames, c.channels, c.rate)
			}
			if !bytes.Equal(got.Data, want.Data) {
				t.Fatal("decoded samples differ from the encoded ones")
			}
		})
	}
}

// TestFloatHeader checks the fields the specification asks of a non-PCM
// file: an 18-byte fmt chunk with cbSize 0 and a fact chunk holding the
// frame count, ahead of data.
func TestFloatHeader(t *testing.T) {
	c := cases[2]
	b := encode(t, c)
	le := binary.LittleEndian
	if got := le.Uint32(b[16:]); got != 18 {
		t.Errorf("fmt chunk size %d, want 18", got)
	}
	if got := le.Uint16(b[20:]); got != formatIEEEFloat {
		t.Errorf("format tag %d, want 3", got)
	}
	if got := le.Uint16(b[36:]); got != 0 {
		t.Errorf("cbSize %d, want 0", got)
	}
	if got := string(b[38:42]); got != "fact" {
		t.Fatalf("chunk after fmt is %q, want fact", got)
	}
	if got := le.Uint32(b[46:]); got != uint32(c.frames) {
		t.Errorf("fact dwSampleLength %d, want %d frames", got, c.frames)
	}
	if got := le.Uint32(b[4:]); int(got) != len(b)-8 {
		t.Errorf("RIFF size %d, want %d", got, len(b)-8)
	}
}

func writeFile(t *testing.T, c testCase) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), c.name+".wav")
	if err := os.WriteFile(p, encode(t, c), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPythonWave reads the PCM files with Python's wave module, which
// accepts PCM only.
func TestPythonWave(t *testing.T) {
	py := testenv.NeedPython(t)
	for _, c := range cases {
		if c.dtype != formats.Int16 {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			p := writeFile(t, c)
			out, err := exec.Command(py, "-c", `
import sys, wave
with wave.open(sys.argv[1]) as w:
    frames = w.readframes(w.getnframes())
    print(w.getframerate(), w.getnchannels(), w.getsampwidth(), w.getnframes(), len(frames))
`, p).CombinedOutput()
			if err != nil {
				t.Fatalf("python wave: %v\n%s", err, out)
			}
			tn := c.tensor()
			want := strings.Join([]string{itoa(c.rate), itoa(c.channels), "2", itoa(c.frames), itoa(len(tn.Data))}, " ")
			if got := strings.TrimSpace(string(out)); got != want {
				t.Errorf("python wave reports %q, want %q (rate channels width frames bytes)", got, want)
			}
		})
	}
}

// TestSoxi reads every file with sox's soxi.
func TestSoxi(t *testing.T) {
	testenv.NeedCommand(t, "soxi", "sox")
	for _, c := range cases {
		if c.frames == 0 {
			continue // soxi warns on an empty file
		}
		t.Run(c.name, func(t *testing.T) {
			p := writeFile(t, c)
			for _, q := range []struct{ flag, want string }{
				{"-r", itoa(c.rate)},
				{"-c", itoa(c.channels)},
				{"-s", itoa(c.frames)},
				{"-b", itoa(c.dtype.Size() * 8)},
				{"-e", c.encoding},
			} {
				out, err := exec.Command("soxi", q.flag, p).CombinedOutput()
				if err != nil {
					t.Fatalf("soxi %s: %v\n%s", q.flag, err, out)
				}
				if got := strings.TrimSpace(string(out)); got != q.want {
					t.Errorf("soxi %s = %q, want %q", q.flag, got, q.want)
				}
			}
		})
	}
}

func TestEncodeRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    formats.Tensor
		rate int
	}{
		{"uint8", formats.Tensor{DType: formats.Uint8, Shape: []int{4}, Data: make([]byte, 4)}, 8000},
		{"3d", formats.Tensor{DType: formats.Int16, Shape: []int{2, 2, 1}, Data: make([]byte, 8)}, 8000},
		{"short data", formats.Tensor{DType: formats.Int16, Shape: []int{4, 2}, Data: make([]byte, 8)}, 8000},
		{"zero rate", formats.Tensor{DType: formats.Int16, Shape: []int{4}, Data: make([]byte, 8)}, 0},
	} {
		if err := Encode(&bytes.Buffer{}, tc.t, tc.rate); err == nil {
			t.Errorf("%s: Encode accepted it", tc.name)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	good := encode(t, cases[0])
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"not riff", []byte("RIFX\x00\x00\x00\x00WAVE")},
		{"truncated data", good[:len(good)-3]},
		{"no data chunk", good[:36]},
	} {
		if _, _, err := DecodeBytes(tc.b); err == nil {
			t.Errorf("%s: Decode accepted it", tc.name)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
