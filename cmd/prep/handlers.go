package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/prep-dev/prep/augment"
	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/convert"
	"github.com/prep-dev/prep/formats/imgdec"
	"github.com/prep-dev/prep/formats/manifest"
)

// handler builds the input handlers convert's flags and recipe ask for,
// and picks one by a key's extension (nil: no handler takes it). convert,
// plan and inspect --rebuild all convert through it.
func (f *convertFlags) handler(recipe *augment.Recipe) func(key string) convert.Handler {
	decOpt := imgdec.Options{MaxPixels: f.maxPixels, Decoder: f.decoder}
	imageHandler := convert.NewScaledImageHandler(convert.ImgdecDecoder(decOpt), imgdec.Release, recipe, recipe.MinSide())
	maxSample, _ := parseSize(f.maxSampleSize) // checked by check
	npyHandler := convert.NewNPYHandler(convert.NPYOptions{SplitAxis: f.splitAxis, MaxSampleBytes: maxSample})
	video, audio := f.video, f.audio
	video.MaxSampleBytes, audio.MaxSampleBytes = maxSample, maxSample
	videoHandler := convert.NewVideoHandler(video, recipe)
	audioHandler := convert.NewAudioHandler(audio, recipe)
	return func(key string) convert.Handler {
		switch {
		case hasExt(key, imageExts):
			return imageHandler
		case hasExt(key, npyExts):
			return npyHandler
		case hasExt(key, videoExts):
			return videoHandler
		case hasExt(key, audioExts):
			return audioHandler
		}
		return nil
	}
}

// optionFlags pairs the manifest's options (docs/FORMAT.md §2.1) with the
// flags they record: the settings besides the recipe that shape the output.
var optionFlags = []struct{ key, flag string }{
	{"max_pixels", "max-pixels"},
	{"decoder", "decoder"},
	{"split_axis", "split-axis"},
	{"fps", "fps"},
	{"every", "every"},
	{"clip", "clip"},
	{"max_frames", "max-frames"},
	{"rate", "rate"},
	{"channels", "channels"},
	{"duration", "duration"},
	{"sample_fmt", "sample-format"},
}

// recordedOptions are the options a run's manifest records, from convert's
// flags.
func recordedOptions(fl *pflag.FlagSet) map[string]string {
	opts := make(map[string]string, len(optionFlags))
	for _, o := range optionFlags {
		opts[o.key] = fl.Lookup(o.flag).Value.String()
	}
	return opts
}

// flagsOf gives back the convert flags a manifest records (recipe,
// options) and the recipe, so that a run can be redone as it was made;
// options the manifest lacks (an older prep) keep their defaults.
func flagsOf(m *manifest.Manifest) (*convertFlags, *augment.Recipe, error) {
	f := &convertFlags{}
	fl := pflag.NewFlagSet("manifest", pflag.ContinueOnError)
	addConvertFlags(fl, f)
	for _, o := range optionFlags {
		v, ok := m.Options[o.key]
		if !ok {
			continue
		}
		if err := fl.Set(o.flag, v); err != nil {
			return nil, nil, fmt.Errorf("manifest option %s=%q: %w", o.key, v, err)
		}
	}
	if v, ok := m.Options["layout"]; ok {
		f.labels.Layout = convert.Layout(v)
	}
	recipe, err := augment.Parse(m.Recipe)
	if err != nil {
		return nil, nil, fmt.Errorf("manifest recipe %q: %w", m.Recipe, err)
	}
	f.recipe = m.Recipe
	return f, recipe, nil
}

// sourceOf is SRC as the manifest records it: a local path made absolute,
// so that inspect --rebuild finds the inputs from any folder.
func sourceOf(src string) string {
	if cloudsrc.IsRemote(src) {
		return src
	}
	if abs, err := filepath.Abs(src); err == nil {
		return abs
	}
	return src
}
