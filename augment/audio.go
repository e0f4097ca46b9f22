package augment

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

// gain scales the signal by a gain in dB, fixed or uniform in [lo, hi].
type gain struct {
	lo, hi float64
}

func parseGain(val string) (op, error) {
	lo, hi, err := parseRange(val)
	if err != nil {
		return nil, badValue("gain", val, "want dB or a range LO-HI (e.g. -6-6)")
	}
	return gain{lo, hi}, nil
}

func (o gain) String() string { return "gain=" + fmtRange(o.lo, o.hi) }

// applyAudio draws the gain only when it is a range, and reports it then.
func (o gain) applyAudio(pcm []float32, _, _ int, rng *rand.Rand) any {
	db, p := o.lo, any(nil)
	if o.lo != o.hi {
		db = uniform(rng, o.lo, o.hi)
		p = db
	}
	k := float32(math.Pow(10, db/20))
	for i, v := range pcm {
		pcm[i] = clip1(v * k)
	}
	return p
}

// shift moves the signal in time by a whole number of frames, uniform in
// [-seconds, seconds] (positive: later). The frames that come free are
// silent; with roll the signal wraps around instead (circular shift).
// It reports the shift with its units, {"frames": n, "seconds": n/rate}
// in JSON: a bare number would not say whether it counts frames or samples.
type shift struct {
	seconds float64
	roll    bool
}

func parseShift(val string) (op, error) {
	s, mode, hasMode := strings.Cut(val, ":")
	sec, err := parseNum(s)
	if err != nil || sec < 0 {
		return nil, badValue("shift", val, "seconds must be a number >= 0")
	}
	if hasMode && mode != "roll" {
		return nil, badValue("shift", val, "unknown mode "+mode+" (want roll)")
	}
	return shift{sec, hasMode}, nil
}

func (o shift) String() string {
	s := "shift=" + fmtNum(o.seconds)
	if o.roll {
		s += ":roll"
	}
	return s
}

func (o shift) applyAudio(pcm []float32, channels, rate int, rng *rand.Rand) any {
	frames := len(pcm) / channels
	n := int(math.Round(uniform(rng, -o.seconds, o.seconds) * float64(rate)))
	n = max(-frames, min(frames, n))
	o.move(pcm[:frames*channels], channels, n)
	return shiftDrawn{n, float64(n) / float64(rate)}
}

// shiftDrawn is the shift a sample got, in both units; a comparable value,
// as every op's record is.
type shiftDrawn struct {
	Frames  int     `json:"frames"`
	Seconds float64 `json:"seconds"`
}

// move shifts pcm, whole frames of channels samples, by n frames.
func (o shift) move(pcm []float32, channels, n int) {
	if n == 0 || len(pcm) == 0 {
		return
	}
	k := n * channels
	if o.roll {
		// Rotate right by k samples; k is whole frames, so channels stay
		// in order within each frame.
		k = (k%len(pcm) + len(pcm)) % len(pcm)
		slices.Reverse(pcm)
		slices.Reverse(pcm[:k])
		slices.Reverse(pcm[k:])
		return
	}
	if k > 0 {
		copy(pcm[k:], pcm[:len(pcm)-k])
		clear(pcm[:k])
	} else {
		copy(pcm, pcm[-k:])
		clear(pcm[len(pcm)+k:])
	}
}

// noise adds white gaussian noise at a signal-to-noise ratio in dB, fixed
// or uniform in [lo, hi], relative to the RMS of the whole signal (all
// channels). Silence gets no noise: its SNR is undefined.
type noise struct {
	lo, hi float64
}

func parseNoise(val string) (op, error) {
	lo, hi, err := parseRange(val)
	if err != nil {
		return nil, badValue("noise", val, "want an SNR in dB or a range LO-HI")
	}
	return noise{lo, hi}, nil
}

func (o noise) String() string { return "noise=" + fmtRange(o.lo, o.hi) }

// applyAudio draws the SNR (when a range, and reports it), then one normal
// value per sample in order.
func (o noise) applyAudio(pcm []float32, _, _ int, rng *rand.Rand) any {
	snr, p := o.lo, any(nil)
	if o.lo != o.hi {
		snr = uniform(rng, o.lo, o.hi)
		p = snr
	}
	var sum float64
	for _, v := range pcm {
		sum += float64(v) * float64(v)
	}
	if sum == 0 {
		return p
	}
	std := math.Sqrt(sum/float64(len(pcm))) * math.Pow(10, -snr/20)
	for i, v := range pcm {
		pcm[i] = clip1(v + float32(std*rng.NormFloat64()))
	}
	return p
}

func clip1(v float32) float32 {
	return max(-1, min(1, v))
}
