package convert

import (
	"context"
	"errors"
	"fmt"
	"image"
	"math/rand/v2"
	"strconv"

	"github.com/prep-dev/prep/augment"
	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/media/ffmpeg"
)

// VideoOptions choose the frames of each video and how they become
// samples.
type VideoOptions struct {
	FPS   float64 // resample to this rate first; 0 keeps the decoded frames
	Every int     // keep every Nth frame (after FPS); 0 or 1 keeps all
	// Clip makes each run of Clip consecutive kept frames one (T, H, W, 3)
	// sample; a shorter run at the end is dropped. 0 or 1: every frame is
	// an (H, W, 3) sample.
	Clip      int
	MaxFrames int // keep at most this many frames of a video; 0 for all
	// MaxSampleBytes skips a video whose samples (Clip frames of H×W×3)
	// would hold more bytes (--max-sample-bytes), found from its first
	// frame before their memory is taken; 0: no bound.
	MaxSampleBytes int64
}

// NewVideoHandler decodes .mp4, .mkv, .webm, .avi and .mov files with
// ffmpeg into RGB frames and applies aug (nil: no augmentation) to each.
// When aug starts with a resize (its MinSide), ffmpeg shrinks the frames
// to that shorter side first (ffmpeg.FrameOptions.ShortSide).
// A sample's key is "KEY#f<i>", i the index of its (first) frame after
// FPS, as ffmpeg.Frames counts; its Params hold aug's draws and "frame": i.
//
// All frames of one clip get the same augmentation: the handler draws two
// seeds from rng per clip and gives every frame of the clip a generator
// made from them, rand.New(rand.NewPCG(s1, s2)). Single frames are clips
// of one, so each gets its own draws.
//
// The handler is an Emitter: it hands each sample over as its frames are
// decoded, and the pipeline keeps a video's samples beyond its memory
// budget in a scratch file (a minute of 1080p at 30 fps is 11 GB).
// Samples, for callers that want them all, holds them in memory.
func NewVideoHandler(opt VideoOptions, aug ImageAugmenter) Handler {
	return &videoHandler{opt: opt, aug: aug}
}

// videoHandler is the Handler NewVideoHandler returns: a PathHandler, an
// Emitter and a Recycler.
type videoHandler struct {
	opt  VideoOptions
	aug  ImageAugmenter
	free bytePool // frame bytes handed back by Recycle
}

func (*videoHandler) ReadsPath() {}

// Recycle takes back the bytes of samples this handler made, once the
// shard writer has copied them.
func (h *videoHandler) Recycle(samples []formats.Sample) { h.free.recycle(samples) }

func (h *videoHandler) Samples(ctx context.Context, in *Input, copy int, rng *rand.Rand) ([]formats.Sample, error) {
	var samples []formats.Sample
	err := h.Emit(ctx, in, copy, rng, func(s formats.Sample) error {
		samples = append(samples, s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return samples, nil
}

// Emit hands over each sample as its frames are decoded (Emitter): a
// long video's samples need not fit in memory together.
func (h *videoHandler) Emit(ctx context.Context, in *Input, _ int, rng *rand.Rand, emit func(formats.Sample) error) error {
	opt, aug := h.opt, h.aug
	if opt.FPS < 0 || opt.Every < 0 || opt.Clip < 0 || opt.MaxFrames < 0 {
		return Fatal(fmt.Errorf("video options must not be negative: fps %v, every %d, clip %d, max frames %d",
			opt.FPS, opt.Every, opt.Clip, opt.MaxFrames))
	}
	v := videoSamples{in: in, aug: aug, rng: rng, clip: max(opt.Clip, 1), pool: &h.free, emit: emit}
	if a, ok := aug.(interface{ HasImageOps() bool }); ok && !a.HasImageOps() {
		v.aug = nil // an audio-only recipe: spare every frame the RGBA round trip
	}
	fo := ffmpeg.FrameOptions{FPS: opt.FPS, Every: opt.Every, MaxFrames: opt.MaxFrames, MaxFrameBytes: opt.MaxSampleBytes}
	v.maxBytes = opt.MaxSampleBytes
	if l, ok := v.aug.(centerCropLead); ok {
		if short, w, h, rest, ok := l.CenterCropLead(); ok {
			// resize=S,crop=WxH (centred) is ffmpeg's whole: frames come
			// W×H, and only the ops after them run here, none at all for
			// an evaluation recipe.
			fo.ShortSide, fo.CropW, fo.CropH = short, w, h
			v.aug = nil
			if rest.HasImageOps() {
				v.aug = rest
			}
		}
	}
	if m, ok := v.aug.(interface{ MinSide() int }); ok && fo.CropW == 0 {
		// The recipe starts with a resize (MinSide > 0): ffmpeg shrinks
		// each frame to that shorter side while converting it to RGB,
		// and the recipe runs on the small frame. The pipe then carries
		// a seventh of a 720p frame's bytes, and the resize is a copy.
		fo.ShortSide = m.MinSide()
	}
	if v.aug == nil && v.clip == 1 {
		// Frames go to the shard as ffmpeg made them: each is read
		// straight into its sample's bytes.
		fo.Buffer, v.owned = v.pool.get, true
	}
	err := withLocalFile(in, func(path string) error {
		_, _, err := ffmpeg.Frames(ctx, path, fo, v.add)
		if err != nil && v.n == 0 && ctx.Err() == nil {
			err = whyNoFrames(ctx, path, err)
		}
		return err
	})
	if tl := (*ffmpeg.FrameTooLargeError)(nil); errors.As(err, &tl) {
		err = &reworded{err: err, msg: fmt.Sprintf("video frames of %dx%d are %s as RGB, over --max-sample-bytes %s: raise --max-sample-bytes, or shrink them with a recipe that starts with resize=",
			tl.Width, tl.Height, ByteSize(tl.Bytes()), ByteSize(opt.MaxSampleBytes))}
	}
	if err != nil {
		return mediaError(err)
	}
	if v.emitted == 0 {
		return fmt.Errorf("%d frames decoded, fewer than one clip of %d", v.n, v.clip)
	}
	return nil
}

// centerCropLead is an augmenter that can hand a leading resize and
// centred crop to the frame source (augment.Recipe).
type centerCropLead interface {
	CenterCropLead() (short, w, h int, rest *augment.Recipe, ok bool)
}

// videoSamples turns the frames of one video into samples as they arrive.
type videoSamples struct {
	in   *Input
	aug  ImageAugmenter
	rng  *rand.Rand
	clip int
	// maxBytes bounds a sample's bytes (0: none).
	maxBytes int64
	// owned: frames' RGB are the pool's bytes, given to ffmpeg.Frames as
	// FrameOptions.Buffer, and become samples as they are.
	owned bool

	n       int // frames seen
	s1, s2  uint64
	first   int             // index of the current clip's first frame
	params  map[string]any  // the current clip's augmentation draws
	data    []byte          // the current clip's pixels
	shape   []int           // one frame's (H, W, 3) after augmentation
	pool    *bytePool       // the samples' bytes
	img     *image.NRGBA    // reused input to aug
	buf     augment.Buffers // aug's resampled images, reused frame after frame
	emit    func(formats.Sample) error
	emitted int
}

// add takes one frame; f.RGB is ffmpeg's reused buffer unless v.owned.
func (v *videoSamples) add(f ffmpeg.Frame) error {
	index := f.Index
	pos := v.n % v.clip
	v.n++
	if pos == 0 {
		v.s1, v.s2 = v.rng.Uint64(), v.rng.Uint64()
		v.first, v.params, v.data = index, nil, nil
	}
	if v.n == 1 {
		// Frames of one video share a size: the first tells whether the
		// recipe would blow it up past its limit, as checkSize does for
		// images.
		if err := checkOutputSize(v.aug, f.Width, f.Height); err != nil {
			return err
		}
	}
	frame, params := v.augment(f)
	if v.n == 1 {
		// A clip's bytes are taken in one piece below: check them first.
		if b := int64(v.clip) * int64(len(frame.Data)); v.maxBytes > 0 && b > v.maxBytes {
			return fmt.Errorf("a sample of %d frames of %v is %s, over --max-sample-bytes %s: raise --max-sample-bytes, or make it smaller with --clip or a recipe that starts with resize=",
				v.clip, frame.Shape, ByteSize(b), ByteSize(v.maxBytes))
		}
	}
	if pos == 0 {
		v.params, v.shape = params, frame.Shape
		switch {
		case v.clip > 1:
			v.data = v.pool.get(v.clip * len(frame.Data))[:0]
		case v.owned:
			v.data = frame.Data
		case v.aug == nil:
			v.data = append(v.pool.get(len(frame.Data))[:0], frame.Data...)
		default:
			v.data = frame.Data // augment's copy
		}
	} else if !formats.SameShape(frame, formats.Tensor{DType: formats.Uint8, Shape: v.shape}) {
		return fmt.Errorf("frame %d is %v after augmentation, frame %d was %v; frames of a clip must keep one size",
			index, frame.Shape, v.first, v.shape)
	}
	if v.clip > 1 {
		v.data = append(v.data, frame.Data...)
	}
	if pos < v.clip-1 {
		return nil
	}
	shape := v.shape
	if v.clip > 1 {
		shape = append([]int{v.clip}, v.shape...)
	}
	if v.params == nil {
		v.params = map[string]any{}
	}
	v.params["frame"] = v.first
	v.emitted++
	return v.emit(formats.Sample{
		Key:    v.in.Key + "#f" + strconv.Itoa(v.first),
		Source: v.in.Source,
		Label:  v.in.Label,
		Fields: []formats.Field{{Name: formats.DataField, Tensor: formats.Tensor{DType: formats.Uint8, Shape: shape, Data: v.data}}},
		Params: v.params,
	})
}

// augment returns one frame augmented with the clip's seeds, and the
// draws. Without an augmenter the frame's Data is f.RGB itself.
func (v *videoSamples) augment(f ffmpeg.Frame) (formats.Tensor, map[string]any) {
	if v.aug == nil {
		return formats.Tensor{DType: formats.Uint8, Shape: []int{f.Height, f.Width, 3}, Data: f.RGB}, nil
	}
	if v.img == nil {
		// Frames of one video share a size, so one image serves them all;
		// augmenters do not modify their input.
		v.img = image.NewNRGBA(image.Rect(0, 0, f.Width, f.Height))
	}
	pix := v.img.Pix
	for i, j := 0, 0; j < len(f.RGB); i, j = i+4, j+3 {
		pix[i], pix[i+1], pix[i+2], pix[i+3] = f.RGB[j], f.RGB[j+1], f.RGB[j+2], 0xff
	}
	rng := rand.New(rand.NewPCG(v.s1, v.s2))
	if b, ok := v.aug.(bufferedAugmenter); ok {
		// Frames are opaque; out is v.buf's memory, which RGBTensor copies
		// out of before the next frame.
		out, params := b.ApplyScaled(v.img, augment.Source{Opaque: true}, rng, &v.buf)
		return v.tensor(out), params
	}
	out, params := v.aug.Apply(v.img, rng)
	return v.tensor(out), params
}

// tensor copies img into an RGB tensor in the pool's memory.
func (v *videoSamples) tensor(img *image.NRGBA) formats.Tensor {
	return rgbInto(v.pool.get(img.Rect.Dx()*img.Rect.Dy()*3), img, nil)
}
