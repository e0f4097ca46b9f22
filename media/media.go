// Package media is the registry of input media: which extensions are
// which kind of input (images, arrays, video, audio), the flags of each
// kind, the shard format a run of them defaults to, and the options a run
// records in its manifest and replays, without a flag parser, to redo it
// (inspect --rebuild, resume). The decoders themselves are its
// subpackages imgdec, audiodec, ffmpeg and pcm; this package only names
// what goes where.
package media

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/prep-dev/prep/media/imgdec"
)

// Kind is what an input is, by its extension.
type Kind int

const (
	None  Kind = iota // no handler takes it
	Image             // decoded by content (media/imgdec)
	Array             // .npy, .npz
	Video             // frames through ffmpeg
	Audio             // decoded to PCM at a fixed rate
)

// kinds lists every kind's extensions (lower case) and the flags that
// apply only to it, in the order help text shows them.
var kinds = []struct {
	kind  Kind
	name  string
	exts  []string
	flags []string
}{
	// torchvision's IMG_EXTENSIONS, and .gif, .heic, .heif, .avif and
	// .jxl, which ImageFolder leaves out: the extension picks the files,
	// the content the decoder.
	{Image, "image", []string{".jpg", ".jpeg", ".png", ".ppm", ".pgm", ".pbm", ".bmp", ".tif", ".tiff", ".webp", ".gif",
		".heic", ".heif", ".avif", ".jxl"}, nil},
	{Array, "array", []string{".npy", ".npz"}, []string{"split-axis"}},
	{Video, "video", []string{".mp4", ".mkv", ".webm", ".avi", ".mov"}, []string{"fps", "every", "clip", "max-frames"}},
	{Audio, "audio", []string{".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a"}, []string{"rate", "channels", "duration", "sample-format"}},
}

// KindOf returns the kind of input key names, by its extension.
func KindOf(key string) Kind {
	e := strings.ToLower(path.Ext(key))
	for _, k := range kinds {
		if slices.Contains(k.exts, e) {
			return k.kind
		}
	}
	return None
}

// String names the kind: "image", "array", "video", "audio" or "none".
func (k Kind) String() string {
	for _, d := range kinds {
		if d.kind == k {
			return d.name
		}
	}
	return "none"
}

// Exts returns the kind's extensions.
func (k Kind) Exts() []string {
	for _, d := range kinds {
		if d.kind == k {
			return slices.Clone(d.exts)
		}
	}
	return nil
}

// Flags returns the flags that apply to inputs of this kind only: given
// with no such input, they are a usage error (a flag silently ignored is
// a recipe the user did not get).
func (k Kind) Flags() []string {
	for _, d := range kinds {
		if d.kind == k {
			return slices.Clone(d.flags)
		}
	}
	return nil
}

// Exts returns every extension a handler takes, images first.
func Exts() []string {
	var all []string
	for _, k := range kinds {
		all = append(all, k.exts...)
	}
	return all
}

// DefaultFormat is the shard format a run of inputs of these kinds
// writes without --format: WAV in tar for audio alone, HDF5 otherwise.
func DefaultFormat(keys []string) string {
	if len(keys) == 0 {
		return "hdf5"
	}
	for _, k := range keys {
		if KindOf(k) != Audio {
			return "hdf5"
		}
	}
	return "wav"
}

// Options are the settings besides the recipe that shape a run's output,
// as the manifest's options record them (docs/FORMAT.md §2.1).
type Options struct {
	MaxPixels    int64   // max_pixels
	Decoder      string  // decoder
	SplitAxis    int     // split_axis
	FPS          float64 // fps
	Every        int     // every
	Clip         int     // clip
	MaxFrames    int     // max_frames
	Rate         int     // rate
	Channels     int     // channels
	Duration     float64 // duration
	SampleFormat string  // sample_fmt
}

// option is one recorded option: its manifest key, its flag, and how it
// is written and read back. Values are written as the flag parser writes
// them, so that manifests are byte for byte those of earlier preps.
type option struct {
	key, flag string
	get       func(o *Options) string
	set       func(o *Options, v string) error
}

func intOpt(key, flag string, p func(o *Options) *int) option {
	return option{key, flag,
		func(o *Options) string { return strconv.Itoa(*p(o)) },
		func(o *Options, v string) error {
			n, err := strconv.Atoi(v)
			*p(o) = n
			return err
		}}
}

func floatOpt(key, flag string, p func(o *Options) *float64) option {
	return option{key, flag,
		func(o *Options) string { return strconv.FormatFloat(*p(o), 'g', -1, 64) },
		func(o *Options, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			*p(o) = f
			return err
		}}
}

func stringOpt(key, flag string, p func(o *Options) *string) option {
	return option{key, flag,
		func(o *Options) string { return *p(o) },
		func(o *Options, v string) error { *p(o) = v; return nil }}
}

// options lists what Record writes, in the manifest's order.
var options = []option{
	{"max_pixels", "max-pixels",
		func(o *Options) string { return strconv.FormatInt(o.MaxPixels, 10) },
		func(o *Options, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			o.MaxPixels = n
			return err
		}},
	stringOpt("decoder", "decoder", func(o *Options) *string { return &o.Decoder }),
	intOpt("split_axis", "split-axis", func(o *Options) *int { return &o.SplitAxis }),
	floatOpt("fps", "fps", func(o *Options) *float64 { return &o.FPS }),
	intOpt("every", "every", func(o *Options) *int { return &o.Every }),
	intOpt("clip", "clip", func(o *Options) *int { return &o.Clip }),
	intOpt("max_frames", "max-frames", func(o *Options) *int { return &o.MaxFrames }),
	intOpt("rate", "rate", func(o *Options) *int { return &o.Rate }),
	intOpt("channels", "channels", func(o *Options) *int { return &o.Channels }),
	floatOpt("duration", "duration", func(o *Options) *float64 { return &o.Duration }),
	stringOpt("sample_fmt", "sample-format", func(o *Options) *string { return &o.SampleFormat }),
}

// Defaults are the options of a run given no flags: the defaults of
// convert's flags, and what Replay starts from.
func Defaults() Options {
	return Options{MaxPixels: imgdec.DefaultMaxPixels, Decoder: "auto", SplitAxis: -1, Every: 1, Clip: 1, Rate: 16000, Channels: 1, SampleFormat: "s16"}
}

// Record returns the options as a manifest records them.
func (o Options) Record() map[string]string {
	m := make(map[string]string, len(options))
	for _, opt := range options {
		m[opt.key] = opt.get(&o)
	}
	return m
}

// Replay returns base with the options a manifest recorded in m applied:
// a run redone as it was made. Keys m lacks (an older prep) keep base's
// values; keys this prep does not know are left alone, as readers ignore
// them. A value that does not parse is an error naming the key.
func Replay(m map[string]string, base Options) (Options, error) {
	o := base
	for _, opt := range options {
		v, ok := m[opt.key]
		if !ok {
			continue
		}
		if err := opt.set(&o, v); err != nil {
			return base, fmt.Errorf("manifest option %s=%q (--%s): %w: the manifest is damaged; rerun prep convert", opt.key, v, opt.flag, err)
		}
	}
	return o, nil
}
