package main

import (
	"maps"
	"testing"

	"github.com/spf13/pflag"

	"github.com/prep-dev/prep/formats/manifest"
)

// recordedOptions parses args as convert's flags and returns what the
// manifest records of them, checking each value against the flag's own
// text: earlier preps recorded that text, and resume compares it.
func recordedOptions(t *testing.T, args ...string) map[string]string {
	t.Helper()
	var f convertFlags
	fl := pflag.NewFlagSet("convert", pflag.ContinueOnError)
	addConvertFlags(fl, &f)
	if err := fl.Parse(args); err != nil {
		t.Fatal(err)
	}
	opts := f.mediaOptions().Record()
	for key, flag := range map[string]string{"max_pixels": "max-pixels", "decoder": "decoder", "split_axis": "split-axis",
		"fps": "fps", "every": "every", "clip": "clip", "max_frames": "max-frames", "rate": "rate", "channels": "channels",
		"duration": "duration", "sample_fmt": "sample-format"} {
		if want := fl.Lookup(flag).Value.String(); opts[key] != want {
			t.Errorf("option %s recorded as %q, the flag --%s reads %q", key, opts[key], flag, want)
		}
	}
	return opts
}

// TestRecordedOptions checks what a manifest records of convert's flags,
// and that inspect --rebuild gets the same flags back from it.
func TestRecordedOptions(t *testing.T) {
	defaults := map[string]string{
		"max_pixels": "100000000", "decoder": "auto", "split_axis": "-1",
		"fps": "0", "every": "1", "clip": "1", "max_frames": "0",
		"rate": "16000", "channels": "1", "duration": "0", "sample_fmt": "s16",
	}
	if got := recordedOptions(t); !maps.Equal(got, defaults) {
		t.Errorf("defaults recorded as %v, want %v", got, defaults)
	}
	args := []string{"--max-pixels", "5000", "--decoder", "go", "--split-axis", "0", "--fps", "2.5", "--every", "3",
		"--clip", "4", "--max-frames", "9", "--rate", "8000", "--channels", "2", "--duration", "1.25", "--sample-format", "f32",
		"--recipe", "resize=64,crop=48:random"}
	opts := recordedOptions(t, args...)
	f, recipe, err := flagsOf(&manifest.Manifest{Recipe: "resize=64,crop=48:random", Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	if recipe.String() != "resize=64,crop=48:random" || f.maxPixels != 5000 || f.decoder != "go" || f.splitAxis != 0 ||
		f.video.FPS != 2.5 || f.video.Every != 3 || f.video.Clip != 4 || f.video.MaxFrames != 9 ||
		f.audio.Rate != 8000 || f.audio.Channels != 2 || f.audio.Duration != 1.25 || f.audio.SampleFormat != "f32" {
		t.Errorf("flags from %v: %+v, recipe %s", opts, f, recipe)
	}
	if _, _, err := flagsOf(&manifest.Manifest{Options: map[string]string{"rate": "fast"}}); err == nil {
		t.Error("a manifest option that is no number was taken")
	}
}
