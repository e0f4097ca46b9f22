package convert

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"image"
	"math/rand/v2"
	"strconv"

	"github.com/prep-dev/prep/formats"
)

// Input is one fetched input file.
type Input struct {
	Key    string // relative key, '/'-separated: "cat/001.jpg"
	Source string // full path or URI, for messages and manifests
	Label  int64  // class index or formats.NoLabel
	Data   []byte // the whole file
	Path   string // local file path when the source is local, else ""
}

// Handler turns one input into its augmented samples. It must be safe for
// concurrent use and deterministic: the same input, copy and seed give the
// same samples, in the same order.
type Handler interface {
	// Samples decodes in and applies the recipe with rng; copy is the
	// augmentation copy number (0 when --copies is 1). The caller may
	// reseed rng for its next call: keep no reference to it.
	Samples(ctx context.Context, in *Input, copy int, rng *rand.Rand) ([]formats.Sample, error)
}

// Stager is implemented by handlers whose work splits into decoding, the
// part that bounds a conversion's speed, and the rest (augmenting, copying
// into the tensor). The pipeline runs the two parts on separate
// goroutines, so that finishing one sample overlaps decoding the next:
// with fewer decode workers than cores, a conversion runs at about the
// speed of decoding alone.
type Stager interface {
	Handler
	// Decode does the first part of Samples(ctx, in, copy, rng), drawing
	// nothing from rng; finish does the rest, and its result is what
	// Samples would return. finish runs once, on another goroutine, after
	// Decode returns; in stays valid until it has.
	Decode(ctx context.Context, in *Input, copy int) (finish func(rng *rand.Rand) ([]formats.Sample, error), err error)
}

// Recycler is implemented by handlers whose samples hold memory worth
// reusing. The pipeline hands a sample back through Recycle once the shard
// writer has copied it (formats.ShardWriter.Add returned) and touches it no
// more; so may any other caller that is done with a sample.
type Recycler interface {
	Recycle(samples []formats.Sample)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, in *Input, copy int, rng *rand.Rand) ([]formats.Sample, error)

// Samples calls f.
func (f HandlerFunc) Samples(ctx context.Context, in *Input, copy int, rng *rand.Rand) ([]formats.Sample, error) {
	return f(ctx, in, copy, rng)
}

// An Emitter hands its samples over one at a time as it makes them, for
// inputs whose samples together need not fit in memory (a long video):
// the pipeline holds them within Options.MemoryBudget and moves the bytes
// of the rest to a scratch file beside the shards until the writer takes
// them. Emit calls emit for each sample in order and returns the error
// that ends the input, if any, after which what it emitted is dropped: an
// input is written whole or not at all. An error from emit (the run
// stopping) must be returned. Samples gives what Emit emits. The
// samples' memory must be their own (a scratch file then frees it); for
// an input whose samples would share the input's memory, Emit returns
// errWhole before emitting anything, and the pipeline takes Samples'
// result whole.
type Emitter interface {
	Handler
	Emit(ctx context.Context, in *Input, copy int, rng *rand.Rand, emit func(formats.Sample) error) error
}

// errWhole is Emit's answer for an input it does not hand over sample by
// sample (Emitter).
var errWhole = errors.New("samples made whole")

// A PathHandler reads a local input from its file, Input.Path, and never
// from Input.Data: the fetch stage then leaves Data empty, so a long
// recording or a video is not read into memory before its decoder
// streams it (a one-hour WAV was held whole, 635 MB, next to its
// samples).
type PathHandler interface {
	Handler
	ReadsPath()
}

// pathFunc is a HandlerFunc that reads local inputs from their path.
type pathFunc HandlerFunc

func (f pathFunc) Samples(ctx context.Context, in *Input, copy int, rng *rand.Rand) ([]formats.Sample, error) {
	return f(ctx, in, copy, rng)
}

func (pathFunc) ReadsPath() {}

// SampleSeed derives the per-sample seed from the run's seed, the input key
// and the copy number, so results never depend on scheduling.
func SampleSeed(seed uint64, key string, copy int) (uint64, uint64) {
	h := fnv.New128a()
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], seed)
	binary.LittleEndian.PutUint64(b[8:], uint64(copy))
	h.Write(b[:])
	h.Write([]byte(key))
	sum := h.Sum(nil)
	return binary.LittleEndian.Uint64(sum[:8]), binary.LittleEndian.Uint64(sum[8:])
}

// NewRand returns the per-sample generator for (seed, key, copy).
func NewRand(seed uint64, key string, copy int) *rand.Rand {
	s1, s2 := SampleSeed(seed, key, copy)
	return rand.New(rand.NewPCG(s1, s2))
}

// CopyKey is the sample key of one augmentation copy of an input.
func CopyKey(key string, copy, copies int) string {
	if copies <= 1 {
		return key
	}
	return key + "#c" + strconv.Itoa(copy)
}

// ImageAugmenter applies a recipe to one decoded image. Implementations
// draw every random parameter from rng and report them in params.
type ImageAugmenter interface {
	Apply(img *image.NRGBA, rng *rand.Rand) (out *image.NRGBA, params map[string]any)
}

// AudioAugmenter applies a recipe, in place, to interleaved PCM in [-1, 1].
type AudioAugmenter interface {
	ApplyAudio(pcm []float32, channels, rate int, rng *rand.Rand) (params map[string]any)
}
