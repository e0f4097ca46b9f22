package media

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestKindOf(t *testing.T) {
	for _, tt := range []struct {
		key  string
		kind Kind
	}{
		{"cat/1.JPG", Image}, {"a.webp", Image}, {"a.gif", Image}, {"IMG_1.HEIC", Image}, {"a.avif", Image}, {"a.jxl", Image}, {"x.npz", Array}, {"clip.MOV", Video},
		{"song.m4a", Audio}, {"voice.mp3", Audio}, {"README", None}, {"layers.psd", None}, {"a.jpg.txt", None},
	} {
		if got := KindOf(tt.key); got != tt.kind {
			t.Errorf("KindOf(%q) = %s, want %s", tt.key, got, tt.kind)
		}
	}
	if got := Exts(); len(got) != 28 || got[0] != ".jpg" || !slices.Contains(got, ".opus") {
		t.Errorf("Exts() = %q", got)
	}
	if got := Video.Flags(); !slices.Equal(got, []string{"fps", "every", "clip", "max-frames"}) {
		t.Errorf("video flags %q", got)
	}
}

func TestDefaultFormat(t *testing.T) {
	for _, tt := range []struct {
		keys []string
		want string
	}{
		{nil, "hdf5"}, {[]string{"a.wav", "b.mp3"}, "wav"}, {[]string{"a.wav", "b.jpg"}, "hdf5"}, {[]string{"v.mp4"}, "hdf5"},
	} {
		if got := DefaultFormat(tt.keys); got != tt.want {
			t.Errorf("DefaultFormat(%q) = %s, want %s", tt.keys, got, tt.want)
		}
	}
}

// TestReplay: what Record writes, Replay reads back; keys a manifest
// lacks keep the base's values; a value that is no number is refused.
func TestReplay(t *testing.T) {
	o := Options{MaxPixels: 5000, Decoder: "go", SplitAxis: 0, FPS: 29.97, Every: 3, Clip: 4, MaxFrames: 9,
		Rate: 8000, Channels: 2, Duration: 1e-3, SampleFormat: "f32"}
	rec := o.Record()
	if rec["fps"] != "29.97" || rec["duration"] != "0.001" || rec["max_pixels"] != "5000" || len(rec) != 11 {
		t.Errorf("recorded %v", rec)
	}
	back, err := Replay(rec, Defaults())
	if err != nil || back != o {
		t.Errorf("Replay(Record(o)) = %+v, %v; want %+v", back, err, o)
	}
	partial := map[string]string{"rate": "22050", "unknown_key": "x"}
	got, err := Replay(partial, Defaults())
	want := Defaults()
	want.Rate = 22050
	if err != nil || got != want {
		t.Errorf("Replay(%v) = %+v, %v", partial, got, err)
	}
	if _, err := Replay(map[string]string{"rate": "fast"}, Defaults()); err == nil || !strings.Contains(err.Error(), `rate="fast" (--rate)`) {
		t.Errorf("a rate that is no number: %v", err)
	}
	if !maps.Equal(Defaults().Record(), map[string]string{"max_pixels": "100000000", "decoder": "auto", "split_axis": "-1",
		"fps": "0", "every": "1", "clip": "1", "max_frames": "0", "rate": "16000", "channels": "1", "duration": "0", "sample_fmt": "s16"}) {
		t.Errorf("defaults recorded as %v", Defaults().Record())
	}
}
