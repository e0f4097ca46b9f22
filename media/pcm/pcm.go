// Package pcm converts interleaved float32 audio between channel counts
// and sample rates, in a stream, with the same bytes on every CPU.
//
// Channels are mixed before resampling (both are linear, so the order
// does not change the result, and mixing first filters fewer channels).
// Resampling is band-limited interpolation with a Kaiser-windowed sinc
// (ffmpeg's libswresample defaults: 32 taps at unity, cutoff 0.97 of the
// lower Nyquist frequency, β 9), one filter per output phase, each
// normalised to unit gain so a constant stays constant. Arithmetic is
// float64 with every product rounded before it is added: the compiler may
// not fuse it into an FMA on one architecture and not another.
package pcm

import (
	"errors"
	"fmt"
	"math"
	"sync"
)

// Filter parameters, as libswresample's defaults.
const (
	halfTaps  = 16      // taps each side of the centre at a ratio of 1
	cutoff    = 0.97    // of the lower of the two Nyquist frequencies
	beta      = 9.0     // Kaiser window shape
	maxPhases = 1024    // phases when the rates' reduced ratio needs more
	maxCoefs  = 1 << 20 // coefficients of a bank, 4 MiB
)

// Bounds on what a Converter takes: a file's header can claim anything,
// and a filter's size grows with the ratio of the rates (a 4 GHz header
// asked for gigabytes of coefficients).
const (
	MaxChannels = 64
	MaxRate     = 1 << 20 // Hz; FLAC's header field tops out just below
	MaxRatio    = 4096    // downsampling by more: 64K taps a side
)

// Mixable reports whether a Converter can mix in channels to out: kept
// as they are, averaged to mono, or mono copied to every channel. Other
// layouts (5.1 to stereo) need a downmix matrix: let the decoder mix.
func Mixable(in, out int) bool {
	return in == out || out == 1 || in == 1
}

// Converter converts a stream of interleaved frames of InChannels at
// InRate to OutChannels at OutRate. Write takes input in pieces of any
// size; Flush ends the stream. The output of frame count N is
// ceil(N×OutRate/InRate) frames: output frame n is the signal at input
// time n×InRate/OutRate.
type Converter struct {
	inRate, outRate int
	inCh, outCh     int

	f *filter // nil when the rates are equal

	// planes hold the mixed input not yet consumed, one slice per output
	// channel, from input frame base on; the frames before the first are
	// silence, as are those Flush adds after the last.
	planes [][]float32
	base   int64
	in     int64 // input frames written
	n      int64 // output frames made
	done   bool
}

// NewConverter returns a Converter, or an error naming a rate or channel
// count it cannot take.
func NewConverter(inRate, inChannels, outRate, outChannels int) (*Converter, error) {
	switch {
	case inRate <= 0 || outRate <= 0:
		return nil, fmt.Errorf("pcm: sample rates must be positive, have %d and %d Hz", inRate, outRate)
	case inChannels <= 0 || outChannels <= 0 || inChannels > MaxChannels || outChannels > MaxChannels:
		return nil, fmt.Errorf("pcm: channel counts must be 1 to %d, have %d and %d", MaxChannels, inChannels, outChannels)
	case inRate > MaxRate || outRate > MaxRate:
		return nil, fmt.Errorf("pcm: sample rates up to %d Hz are supported, have %d and %d", MaxRate, inRate, outRate)
	case inRate/outRate >= MaxRatio:
		return nil, fmt.Errorf("pcm: cannot resample %d Hz to %d Hz: more than %d:1", inRate, outRate, MaxRatio)
	case !Mixable(inChannels, outChannels):
		return nil, fmt.Errorf("pcm: cannot mix %d channels to %d", inChannels, outChannels)
	}
	c := &Converter{inRate: inRate, outRate: outRate, inCh: inChannels, outCh: outChannels}
	if inRate != outRate {
		c.f = filterFor(inRate, outRate)
		c.planes = make([][]float32, outChannels)
		for k := range c.planes {
			c.planes[k] = make([]float32, c.f.width, 4096)
		}
		c.base = -int64(c.f.width)
	}
	return c, nil
}

// OutFrames is the number of output frames for n input frames.
func (c *Converter) OutFrames(n int64) int64 {
	if c.f == nil {
		return n
	}
	return ceilDiv(n*int64(c.outRate), int64(c.inRate))
}

// Write converts the whole frames of in, appending what output it can
// make so far to out, and returns out.
func (c *Converter) Write(out, in []float32) ([]float32, error) {
	if c.done {
		return out, errors.New("pcm: Write after Flush")
	}
	if len(in)%c.inCh != 0 {
		return out, fmt.Errorf("pcm: %d samples are not whole frames of %d channels", len(in), c.inCh)
	}
	frames := len(in) / c.inCh
	c.in += int64(frames)
	if c.f == nil {
		return c.mix(out, in, frames), nil
	}
	c.split(in, frames)
	return c.resample(out, c.OutFrames(c.in)), nil
}

// Flush ends the stream: the input is silence beyond its last frame.
// It appends the output still due to out and returns out.
func (c *Converter) Flush(out []float32) []float32 {
	if c.done || c.f == nil {
		c.done = true
		return out
	}
	c.done = true
	for k := range c.planes {
		c.planes[k] = append(c.planes[k], make([]float32, c.f.width)...)
	}
	return c.resample(out, c.OutFrames(c.in))
}

// mix appends frames of in, mixed to the output channels, to out (the
// rates are equal: nothing to filter).
func (c *Converter) mix(out, in []float32, frames int) []float32 {
	switch {
	case c.inCh == c.outCh:
		return append(out, in...)
	case c.outCh == 1:
		for i := range frames {
			out = append(out, mean(in[i*c.inCh:(i+1)*c.inCh]))
		}
	default: // mono to every channel
		for _, v := range in {
			for range c.outCh {
				out = append(out, v)
			}
		}
	}
	return out
}

// split appends frames of in, mixed to the output channels, to planes.
func (c *Converter) split(in []float32, frames int) {
	switch {
	case c.outCh == 1:
		p := c.planes[0]
		if c.inCh == 1 {
			p = append(p, in...)
		} else {
			for i := range frames {
				p = append(p, mean(in[i*c.inCh:(i+1)*c.inCh]))
			}
		}
		c.planes[0] = p
	case c.inCh == 1:
		for k := range c.planes {
			c.planes[k] = append(c.planes[k], in...)
		}
	default:
		for k := range c.planes {
			p := c.planes[k]
			for i := range frames {
				p = append(p, in[i*c.inCh+k])
			}
			c.planes[k] = p
		}
	}
}

// mean is the average of one frame's samples, summed in order in float64.
func mean(frame []float32) float32 {
	var s float64
	for _, v := range frame {
		s += float64(v)
	}
	return float32(s / float64(len(frame)))
}

// resample appends output frames up to total, as far as the planes reach,
// and drops the input no later output needs.
func (c *Converter) resample(out []float32, total int64) []float32 {
	f := c.f
	have := c.base + int64(len(c.planes[0]))
	for ; c.n < total; c.n++ {
		// Output n sits at input time n×in/out = i + phase/phases.
		num := c.n * int64(c.inRate)
		i := num / int64(c.outRate)
		phase := int((num % int64(c.outRate)) * int64(f.phases) / int64(c.outRate))
		first := i - int64(f.half) + 1 // the input index of tap 0
		if first+int64(f.width) > have {
			break
		}
		taps := f.coef[phase*f.width : (phase+1)*f.width]
		off := int(first - c.base)
		for _, p := range c.planes {
			out = append(out, dot(taps, p[off:off+len(taps)]))
		}
	}
	// Frames before the next output's first tap are done with; move the
	// rest down once they are at least half the planes.
	next := (c.n*int64(c.inRate))/int64(c.outRate) - int64(f.half) + 1
	if drop := next - c.base; drop > 0 && 2*drop >= int64(len(c.planes[0])) {
		drop = min(drop, int64(len(c.planes[0])))
		for k, p := range c.planes {
			c.planes[k] = p[:copy(p, p[drop:])]
		}
		c.base += drop
	}
	return out
}

// dotPath names the loop that computes the resampler's dot products: the
// scalar one, or AVX2's (dot_simd.go).
type dotPath uint8

const (
	dotScalar dotPath = iota
	dotAVX2
)

func (p dotPath) String() string {
	if p == dotAVX2 {
		return "AVX2"
	}
	return "scalar"
}

// useDot selects the loop that runs: cpuDot, the fastest this CPU has
// (the tests try each).
var useDot = cpuDot

// dotScalar8 is Σ taps[j]×x[j] in float32, summed in lanes j mod 8 and
// then pairwise, each product rounded: a fixed order, so a vector version
// gives the same bits. len(taps) is a multiple of 8.
func dotScalar8(taps, x []float32) float32 {
	var a0, a1, a2, a3, a4, a5, a6, a7 float32
	x = x[:len(taps)]
	for j := 0; j+8 <= len(taps); j += 8 {
		t, v := taps[j:j+8:j+8], x[j:j+8:j+8]
		a0 += float32(t[0] * v[0])
		a1 += float32(t[1] * v[1])
		a2 += float32(t[2] * v[2])
		a3 += float32(t[3] * v[3])
		a4 += float32(t[4] * v[4])
		a5 += float32(t[5] * v[5])
		a6 += float32(t[6] * v[6])
		a7 += float32(t[7] * v[7])
	}
	return canonNaN(((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)))
}

// canonNaN returns v, or one NaN for every NaN: which NaN an operation on
// NaNs and infinities returns depends on its operands' order, which Go
// does not fix between a scalar and a vector loop.
func canonNaN(v float32) float32 {
	if v != v {
		return float32(math.NaN())
	}
	return v
}

// filter is a polyphase bank: phases filters of width taps each, filter p
// for an output that falls p/phases of the way from one input frame to
// the next.
type filter struct {
	phases, width, half int
	coef                []float32 // phases × width, zero beyond each filter's 2×half taps
}

// filters caches banks by rate pair: a bank is thousands of sin and
// Bessel evaluations, and a dataset uses one or two pairs. The first
// maxCached pairs stay (they are pure functions of their key); files at
// other rates get a bank of their own, so a dataset of odd rates cannot
// fill memory with them.
var filters struct {
	sync.Mutex
	m map[[2]int]*filter
}

const maxCached = 16

func filterFor(inRate, outRate int) *filter {
	key := [2]int{inRate, outRate}
	filters.Lock()
	f, ok := filters.m[key]
	filters.Unlock()
	if ok {
		return f
	}
	f = newFilter(inRate, outRate)
	filters.Lock()
	defer filters.Unlock()
	if filters.m == nil {
		filters.m = map[[2]int]*filter{}
	}
	if len(filters.m) < maxCached {
		filters.m[key] = f
	}
	return f
}

func newFilter(inRate, outRate int) *filter {
	// Downsampling stretches the filter: its cutoff falls with the ratio.
	scale := 1.0
	if outRate < inRate {
		scale = float64(outRate) / float64(inRate)
	}
	fc := float64(cutoff * scale)
	half := int(math.Ceil(halfTaps / scale))
	width := (2*half + 7) / 8 * 8
	// One filter per phase of the reduced ratio, at most maxPhases, and
	// fewer for the wide filters of odd steep ratios (1,048,573 Hz to 8
	// kHz asked for 4 million coefficients): a phase is then the nearest
	// below, off by under 1/phases of an input sample.
	phases := min(outRate/gcd(inRate, outRate), maxPhases, max(1, maxCoefs/width))
	f := &filter{phases: phases, width: width, half: half, coef: make([]float32, phases*width)}
	i0beta := besselI0(beta)
	taps := make([]float64, 2*half)
	for p := range phases {
		d := float64(p) / float64(phases)
		var sum float64
		for j := range taps {
			x := float64(j-half+1) - d // distance from the output's time
			r := x / float64(half)
			taps[j] = 0
			if r <= -1 || r >= 1 {
				continue
			}
			w := besselI0(float64(beta*math.Sqrt(1-float64(r*r)))) / i0beta
			taps[j] = float64(float64(fc*sinc(float64(fc*x))) * w)
			sum += taps[j]
		}
		for j, v := range taps {
			f.coef[p*width+j] = float32(v / sum)
		}
	}
	return f
}

// sinc is sin(πx)/(πx).
func sinc(x float64) float64 {
	if x == 0 {
		return 1
	}
	return sinPi(x) / float64(math.Pi*x)
}

// sinPi is sin(πx) by its Taylor series after an exact reduction of x to
// [-1, 1]: math.Sin's polynomial may compile to FMAs on arm64 and differ
// in the last bit from amd64; this, with every product rounded, cannot.
func sinPi(x float64) float64 {
	r := x - 2*math.Floor(x/2) // in [0, 2): exact for |x| < 2^52
	if r > 1 {
		r -= 2 // (-1, 1]
	}
	t := float64(math.Pi * r)
	t2 := float64(t * t)
	sum, term := t, t
	for k := 1; k < 30; k++ {
		term = -float64(term*t2) / float64((2*k)*(2*k+1))
		sum += term
		if math.Abs(term) < 1e-18 {
			break
		}
	}
	return sum
}

// besselI0 is the modified Bessel function of the first kind, order 0,
// by its power series: only +, × and ÷, so every CPU gets its bits.
func besselI0(x float64) float64 {
	sum, term := 1.0, 1.0
	q := float64(x*x) / 4
	for k := 1; k < 200; k++ {
		term = float64(term*q) / float64(k*k)
		sum += term
		if term < sum*1e-17 {
			break
		}
	}
	return sum
}

// S16 converts a sample in [-1, 1] to 16 bits as ffmpeg converts float to
// 16-bit samples: v×32768 rounded half to even, clipped to the int16
// range, NaN to 0. 16-bit sources come back bit-exact.
func S16(v float32) int16 {
	s := math.RoundToEven(float64(v) * 32768)
	switch {
	case s > math.MaxInt16:
		return math.MaxInt16
	case s < math.MinInt16:
		return math.MinInt16
	case s != s: // NaN
		return 0
	}
	return int16(s)
}

// AppendS16 appends S16 of each of src to dst.
func AppendS16(dst []int16, src []float32) []int16 {
	for _, v := range src {
		dst = append(dst, S16(v))
	}
	return dst
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func ceilDiv(a, b int64) int64 {
	return (a + b - 1) / b
}
