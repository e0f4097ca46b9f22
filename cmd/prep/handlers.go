package main

import (
	"fmt"
	"path/filepath"

	"github.com/prep-dev/prep/augment"
	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/convert"
	"github.com/prep-dev/prep/formats/imgdec"
	"github.com/prep-dev/prep/formats/manifest"
	"github.com/prep-dev/prep/media"
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
		switch media.KindOf(key) {
		case media.Image:
			return imageHandler
		case media.Array:
			return npyHandler
		case media.Video:
			return videoHandler
		case media.Audio:
			return audioHandler
		}
		return nil
	}
}

// mediaOptions are the media settings of f, as a manifest records them.
func (f *convertFlags) mediaOptions() media.Options {
	return media.Options{
		MaxPixels: f.maxPixels, Decoder: f.decoder, SplitAxis: f.splitAxis,
		FPS: f.video.FPS, Every: f.video.Every, Clip: f.video.Clip, MaxFrames: f.video.MaxFrames,
		Rate: f.audio.Rate, Channels: f.audio.Channels, Duration: f.audio.Duration, SampleFormat: f.audio.SampleFormat,
	}
}

// setMediaOptions sets f's media flags from o.
func (f *convertFlags) setMediaOptions(o media.Options) {
	f.maxPixels, f.decoder, f.splitAxis = o.MaxPixels, o.Decoder, o.SplitAxis
	f.video.FPS, f.video.Every, f.video.Clip, f.video.MaxFrames = o.FPS, o.Every, o.Clip, o.MaxFrames
	f.audio.Rate, f.audio.Channels, f.audio.Duration, f.audio.SampleFormat = o.Rate, o.Channels, o.Duration, o.SampleFormat
}

// flagsOf gives back the convert flags a manifest records (recipe,
// options), replayed through media.Replay, and the recipe, so that a run
// can be redone as it was made; options the manifest lacks (an older
// prep) keep their defaults.
func flagsOf(m *manifest.Manifest) (*convertFlags, *augment.Recipe, error) {
	f := &convertFlags{maxSampleSize: defaultMaxSample, maxSkipped: defaultMaxSkipped, labels: convert.LabelRules{Layout: convert.LayoutAuto}}
	o, err := media.Replay(m.Options, media.Defaults())
	if err != nil {
		return nil, nil, err
	}
	f.setMediaOptions(o)
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
