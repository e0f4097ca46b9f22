package pcm

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/prep-dev/prep/internal/testenv"
)

// convert runs in through a new Converter in pieces of the given size
// (0: one Write).
func convert(t testing.TB, in []float32, inRate, inCh, outRate, outCh, piece int) []float32 {
	t.Helper()
	c, err := NewConverter(inRate, inCh, outRate, outCh)
	if err != nil {
		t.Fatal(err)
	}
	var out []float32
	if piece == 0 {
		piece = len(in)
	}
	piece = max(piece/inCh, 1) * inCh
	for len(in) > 0 {
		n := min(piece, len(in))
		if out, err = c.Write(out, in[:n]); err != nil {
			t.Fatal(err)
		}
		in = in[n:]
	}
	return c.Flush(out)
}

func sine(hz float64, rate, frames, channels int) []float32 {
	s := make([]float32, frames*channels)
	for i := range frames {
		for k := range channels {
			s[i*channels+k] = float32(0.5 * math.Sin(2*math.Pi*hz*float64(i)/float64(rate)))
		}
	}
	return s
}

func TestMix(t *testing.T) {
	tests := []struct {
		inCh, outCh int
		in, want    []float32
	}{
		{2, 2, []float32{0.5, 0.25, -1, 1}, []float32{0.5, 0.25, -1, 1}},
		{2, 1, []float32{0.5, 0.25, -1, 1}, []float32{0.375, 0}},
		{3, 1, []float32{0.25, 0.5, 0.75}, []float32{0.5}},
		{1, 2, []float32{0.5, -0.25}, []float32{0.5, 0.5, -0.25, -0.25}},
	}
	for _, tt := range tests {
		got := convert(t, tt.in, 16000, tt.inCh, 16000, tt.outCh, 0)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%d→%d channels: %v, want %v", tt.inCh, tt.outCh, got, tt.want)
		}
	}
	for _, bad := range [][4]int{
		{48000, 6, 16000, 2},         // needs a downmix matrix
		{4_000_000_000, 1, 16000, 1}, // a damaged header's rate
		{16000, 1, 0, 1},
		{768000, 1, 100, 1}, // 7680:1
		{48000, 65535, 16000, 1},
	} {
		if _, err := NewConverter(bad[0], bad[1], bad[2], bad[3]); err == nil {
			t.Errorf("%d Hz × %d → %d Hz × %d: no error", bad[0], bad[1], bad[2], bad[3])
		}
	}
}

func TestResampleSine(t *testing.T) {
	tests := []struct{ in, out, ch int }{
		{44100, 16000, 1}, {48000, 16000, 2}, {8000, 16000, 1}, {22050, 16000, 1},
		{16000, 44100, 1}, {44100, 48000, 2}, {44056, 16000, 1}, // 44056 needs more than maxPhases
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d-%d", tt.in, tt.out), func(t *testing.T) {
			const hz = 440
			frames := tt.in // one second
			got := convert(t, sine(hz, tt.in, frames, tt.ch), tt.in, tt.ch, tt.out, tt.ch, 0)
			if want := int(math.Ceil(float64(frames) * float64(tt.out) / float64(tt.in))); len(got) != want*tt.ch {
				t.Fatalf("%d frames, want %d", len(got)/tt.ch, want)
			}
			// Away from the edges the output is the sine at the output's times.
			var worst float64
			for n := 100; n < len(got)/tt.ch-100; n++ {
				want := 0.5 * math.Sin(2*math.Pi*hz*float64(n)/float64(tt.out))
				for k := range tt.ch {
					worst = max(worst, math.Abs(float64(got[n*tt.ch+k])-want))
				}
			}
			if worst > 2e-4 { // -74 dB of full scale
				t.Errorf("worst error %.2g", worst)
			}
		})
	}
}

func TestResampleStopband(t *testing.T) {
	// A 10 kHz tone is above 16 kHz's Nyquist frequency: filtered out.
	got := convert(t, sine(10000, 44100, 44100, 1), 44100, 1, 16000, 1, 0)
	var peak float64
	for _, v := range got[200 : len(got)-200] {
		peak = max(peak, math.Abs(float64(v)))
	}
	if db := 20 * math.Log10(peak/0.5); db > -60 {
		t.Errorf("10 kHz tone at %.1f dB after resampling to 16 kHz, want below -60", db)
	}
	// A constant stays constant: every phase's taps sum to one.
	dc := convert(t, slices.Repeat([]float32{0.25}, 4410), 44100, 1, 16000, 1, 0)
	for i, v := range dc[100 : len(dc)-100] {
		if math.Abs(float64(v)-0.25) > 1e-6 {
			t.Fatalf("constant 0.25 became %v at %d", v, i+100)
		}
	}
}

func TestStreamedSameBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	in := make([]float32, 2*30011)
	for i := range in {
		in[i] = float32(r.Float64()*2 - 1)
	}
	for _, rates := range [][2]int{{44100, 16000}, {8000, 16000}, {16000, 16000}} {
		whole := convert(t, in, rates[0], 2, rates[1], 2, 0)
		for _, piece := range []int{1, 2, 7, 512, 4097} {
			if got := convert(t, in, rates[0], 2, rates[1], 2, piece); !slices.Equal(got, whole) {
				t.Errorf("%v in pieces of %d: output differs from one Write", rates, piece)
			}
		}
	}
}

// TestConverterBytes pins the bytes every CPU must produce (make cross
// runs it on arm64): a change here changes every audio dataset.
// TestConverterBytes pins the converter's output bits, on each dot path
// this CPU runs.
func TestConverterBytes(t *testing.T) {
	defer func(p dotPath) { useDot = p }(useDot)
	r := rand.New(rand.NewPCG(3, 4))
	in := make([]float32, 2*9001)
	for i := range in {
		in[i] = float32(r.Float64()*2 - 1)
	}
	for _, p := range dotPaths {
		t.Run(p.String(), func(t *testing.T) {
			if p != dotScalar {
				testenv.NeedSIMD(t, p.String(), cpuHasDot(p))
			}
			useDot = p
			h := sha256.New()
			for _, tt := range []struct{ inRate, inCh, outRate, outCh int }{
				{44100, 2, 16000, 1}, {48000, 2, 16000, 2}, {8000, 1, 16000, 1}, {22050, 1, 16000, 2}, {44056, 1, 16000, 1},
			} {
				out := convert(t, in[:9001*tt.inCh], tt.inRate, tt.inCh, tt.outRate, tt.outCh, 1000)
				binary.Write(h, binary.LittleEndian, out)
			}
			const want = "5791b5bb99b34fbb1655ea41ce6b3fd81a1142f8db1e7ef24611cfbae884ea29"
			if got := fmt.Sprintf("%x", h.Sum(nil)); got != want {
				t.Errorf("sha256 %s, want %s", got, want)
			}
		})
	}
}

// dotPaths lists the dot loops, slowest first.
var dotPaths = []dotPath{dotScalar, dotAVX2}

// TestDotSIMD: each vector dot gives the scalar loop's bits, on random
// values and on float32's edges: signed zeros, denormals, products that
// overflow or vanish, infinities and NaN.
func TestDotSIMD(t *testing.T) {
	defer func(p dotPath) { useDot = p }(useDot)
	edges := []float32{
		0, float32(math.Copysign(0, -1)), 1, -1, math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32,
		1e-30, -3e-25, math.MaxFloat32, -math.MaxFloat32, 3e20, float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()),
	}
	for _, p := range dotPaths[1:] {
		t.Run(p.String(), func(t *testing.T) {
			testenv.NeedSIMD(t, p.String(), cpuHasDot(p))
			r := rand.New(rand.NewPCG(5, 6))
			for i := range 5000 {
				n := 8 * (1 + r.IntN(16))
				taps, x := make([]float32, n), make([]float32, n+r.IntN(3))
				for j := range taps {
					taps[j] = float32(r.NormFloat64() * 0.3)
				}
				for j := range x {
					x[j] = float32(r.Float64()*2 - 1)
				}
				if i%4 == 0 { // a few edge values among them
					for range 1 + r.IntN(3) {
						taps[r.IntN(n)] = edges[r.IntN(len(edges))]
						x[r.IntN(n)] = edges[r.IntN(len(edges))]
					}
				}
				useDot = dotScalar
				want := dot(taps, x)
				useDot = p
				if got := dot(taps, x); math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("%d taps: %s dot %v (%#x), scalar %v (%#x)\ntaps %v\nx %v",
						n, p, got, math.Float32bits(got), want, math.Float32bits(want), taps, x[:n])
				}
			}
		})
	}
}

func TestSinPi(t *testing.T) {
	for x := -60.0; x <= 60; x += 0.0173 {
		if d := math.Abs(sinPi(x) - math.Sin(math.Pi*x)); d > 1e-13 {
			t.Fatalf("sinPi(%v) off by %g", x, d)
		}
	}
}

// BenchmarkConverter converts 10 s of 44.1 kHz stereo to 16 kHz mono in
// pieces of 4096 frames, as a decoder delivers them.
func BenchmarkConverter(b *testing.B) {
	in := sine(440, 44100, 44100*10, 2)
	b.SetBytes(int64(4 * len(in)))
	out := make([]float32, 0, 160001)
	for b.Loop() {
		c, _ := NewConverter(44100, 2, 16000, 1)
		out = out[:0]
		for p := in; len(p) > 0; {
			n := min(len(p), 2*4096)
			out, _ = c.Write(out, p[:n])
			p = p[n:]
		}
		out = c.Flush(out)
	}
}
