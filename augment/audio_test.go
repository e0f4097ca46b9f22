package augment

import (
	"math"
	"slices"
	"testing"
)

// stereoRamp returns frames of interleaved stereo: left i/frames, right
// -i/frames, so every sample names its frame and channel.
func stereoRamp(frames int) []float32 {
	pcm := make([]float32, 2*frames)
	for i := range frames {
		pcm[2*i] = float32(i) / float32(frames)
		pcm[2*i+1] = -float32(i) / float32(frames)
	}
	return pcm
}

func TestGain(t *testing.T) {
	tests := []struct {
		recipe string
		in     []float32
		want   []float32
	}{
		{"gain=0", []float32{0.5, -0.25, 1}, []float32{0.5, -0.25, 1}},
		{"gain=20", []float32{0.05, -0.02, 0.2, -0.5}, []float32{0.5, -0.2, 1, -1}}, // x10, clipped
		{"gain=-20", []float32{0.5, -1}, []float32{0.05, -0.1}},
		{"gain=-6.0206", []float32{0.8}, []float32{0.4}},
	}
	for _, tt := range tests {
		pcm := slices.Clone(tt.in)
		params := mustParse(t, tt.recipe).ApplyAudio(pcm, 1, 16000, newRand(1))
		if len(params) != 0 {
			t.Errorf("%s: fixed gain reported %v", tt.recipe, params)
		}
		for i := range pcm {
			if math.Abs(float64(pcm[i]-tt.want[i])) > 1e-5 {
				t.Errorf("%s: %v, want %v", tt.recipe, pcm, tt.want)
				break
			}
		}
	}
	in := stereoRamp(100)
	for seed := range uint64(20) {
		pcm := slices.Clone(in)
		db := mustParse(t, "gain=-6-3").ApplyAudio(pcm, 2, 8000, newRand(seed))["gain"].(float64)
		if db < -6 || db > 3 {
			t.Fatalf("gain %v dB outside [-6, 3]", db)
		}
		k := math.Pow(10, db/20)
		for i := range pcm {
			if want := max(-1, min(1, float64(in[i])*k)); math.Abs(float64(pcm[i])-want) > 1e-6 {
				t.Fatalf("gain %v dB: sample %d = %v, want %v", db, i, pcm[i], want)
			}
		}
	}
}

func TestShift(t *testing.T) {
	const frames, rate = 1000, 1000 // one second
	in := stereoRamp(frames)
	for _, recipe := range []string{"shift=0.3", "shift=0.3:roll", "shift=2", "shift=2:roll"} {
		r := mustParse(t, recipe)
		roll := r.ops[0].(shift).roll
		seen := map[bool]bool{}
		for seed := range uint64(20) {
			pcm := slices.Clone(in)
			drawn := r.ApplyAudio(pcm, 2, rate, newRand(seed))["shift"].(shiftDrawn)
			n := drawn.Frames
			if drawn.Seconds != float64(n)/rate {
				t.Fatalf("%s: recorded %v: seconds is not frames/rate", recipe, drawn)
			}
			limit := min(frames, int(r.ops[0].(shift).seconds*rate))
			if n < -limit || n > limit {
				t.Fatalf("%s: shift %d frames outside ±%d", recipe, n, limit)
			}
			seen[n > 0] = true
			for f := range frames {
				src := f - n // frame that moved here
				var wl, wr float32
				switch {
				case roll:
					src = ((src % frames) + frames) % frames
					wl, wr = in[2*src], in[2*src+1]
				case src >= 0 && src < frames:
					wl, wr = in[2*src], in[2*src+1]
				}
				if pcm[2*f] != wl || pcm[2*f+1] != wr {
					t.Fatalf("%s shift %d: frame %d = (%v, %v), want (%v, %v)", recipe, n, f, pcm[2*f], pcm[2*f+1], wl, wr)
				}
			}
		}
		if len(seen) != 2 {
			t.Errorf("%s: shifts went only one way in 20 draws", recipe)
		}
	}
	// A trailing partial frame is left alone.
	pcm := []float32{1, 2, 3, 4, 5}
	mustParse(t, "shift=10:roll").ApplyAudio(pcm, 2, 1, newRand(1))
	if pcm[4] != 5 {
		t.Errorf("partial frame changed: %v", pcm)
	}
}

func TestNoise(t *testing.T) {
	const n = 200000
	// A sine at amplitude 0.5: RMS 0.3536.
	in := make([]float32, n)
	for i := range in {
		in[i] = float32(0.5 * math.Sin(float64(i)*0.01))
	}
	tests := []struct {
		recipe string
		lo, hi float64
	}{
		{"noise=20", 20, 20},
		{"noise=0", 0, 0},
		{"noise=5-30", 5, 30},
	}
	for _, tt := range tests {
		pcm := slices.Clone(in)
		params := mustParse(t, tt.recipe).ApplyAudio(pcm, 1, 16000, newRand(4))
		snr := tt.lo
		if tt.lo != tt.hi {
			snr = params["noise"].(float64)
			if snr < tt.lo || snr > tt.hi {
				t.Fatalf("%s: SNR %v outside range", tt.recipe, snr)
			}
		} else if len(params) != 0 {
			t.Errorf("%s: fixed SNR reported %v", tt.recipe, params)
		}
		var sig, nse, mean float64
		clipped := 0
		for i := range pcm {
			d := float64(pcm[i] - in[i])
			sig += float64(in[i]) * float64(in[i])
			nse += d * d
			mean += d
			if pcm[i] == 1 || pcm[i] == -1 {
				clipped++
			}
		}
		got := 10 * math.Log10(sig/nse)
		// At 0 dB some samples clip, which lowers the noise a little.
		if clipped < n/100 && math.Abs(got-snr) > 0.1 || math.Abs(got-snr) > 0.5 {
			t.Errorf("%s: measured SNR %.3f dB, want %.3f (clipped %d)", tt.recipe, got, snr, clipped)
		}
		if math.Abs(mean/n) > 0.01*math.Sqrt(nse/n) {
			t.Errorf("%s: noise mean %v is not zero", tt.recipe, mean/n)
		}
		for _, v := range pcm {
			if v < -1 || v > 1 {
				t.Fatalf("%s: sample %v outside [-1, 1]", tt.recipe, v)
			}
		}
	}
	silence := make([]float32, 100)
	mustParse(t, "noise=10").ApplyAudio(silence, 1, 16000, newRand(1))
	if slices.ContainsFunc(silence, func(v float32) bool { return v != 0 }) {
		t.Error("noise was added to silence")
	}
}

// TestApplyAudioDeterministic runs every audio op twice from the same rng
// state, and checks that image ops are ignored.
func TestApplyAudioDeterministic(t *testing.T) {
	r := mustParse(t, "resize=256,gain=-6-6,shift=0.1:roll,noise=10-30,hflip=1,shift=0.05")
	in := stereoRamp(4000)
	a, b := slices.Clone(in), slices.Clone(in)
	pa := r.ApplyAudio(a, 2, 16000, newRand(5))
	pb := r.ApplyAudio(b, 2, 16000, newRand(5))
	if !slices.Equal(a, b) {
		t.Error("same rng state gave different samples")
	}
	for _, k := range []string{"gain", "shift", "noise", "shift.2"} {
		if pa[k] == nil || pa[k] != pb[k] {
			t.Errorf("params %v and %v: %q missing or different", pa, pb, k)
		}
	}
	if len(pa) != 4 {
		t.Errorf("params %v, want gain, shift, noise, shift.2", pa)
	}
}
