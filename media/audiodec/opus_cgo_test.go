//go:build cgo

package audiodec

import (
	"bufio"
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// opusDecoder is the decoder of Opus files in this build.
const opusDecoder Decoder = "opus"

// opusSet encodes Ogg Opus files with ffmpeg's libopus encoder: mono and
// stereo, speech-corpus lengths and a clip shorter than a second, CBR and
// VBR, from sources at 8 to 48 kHz.
func opusSet(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	set := map[string]string{}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"mono-16k", []string{"-f", "lavfi", "-i", "sine=frequency=440:duration=1.3:sample_rate=16000", "-b:a", "24k"}},
		{"speech-8k", []string{"-f", "lavfi", "-i", "aevalsrc=0.4*sin(2*PI*(200+300*t)*t)+0.05*random(0):d=3.2:s=8000", "-b:a", "16k"}},
		{"stereo-44k-vbr", []string{"-f", "lavfi", "-i", "aevalsrc=0.3*sin(2*PI*523*t)|0.2*random(1)-0.1:d=2.7:s=44100", "-vbr", "on", "-b:a", "64k"}},
		{"short-48k", []string{"-f", "lavfi", "-i", "sine=frequency=1000:duration=0.31:sample_rate=48000", "-b:a", "32k"}},
	} {
		p := filepath.Join(dir, c.name+".opus")
		runFFmpeg(t, append(c.args, "-c:a", "libopus", p)...)
		set[c.name] = p
	}
	return set
}

// TestOpusLikeFFmpeg decodes Ogg Opus with libopusfile and compares it
// with ffmpeg's decode through the same libopus (-c:a libopus before the
// input, as 32-bit float at 48 kHz): the same number of samples (the
// pre-skip and the last page's end trimming applied alike), bit for bit.
// ffmpeg's own Opus decoder, which prep ran before, is logged beside it:
// 88 dB from libopus on the stereo file, 5 to 24 dB on the mono ones.
func TestOpusLikeFFmpeg(t *testing.T) {
	for name, path := range opusSet(t) {
		t.Run(name, func(t *testing.T) {
			src := openInProcess(t, path, "opus")
			defer src.close()
			rate, ch, frames := src.format()
			got, err := readAll(src)
			if err != nil {
				t.Fatal(err)
			}
			if frames < 0 || frames*int64(ch) != int64(len(got)) || rate != 48000 {
				t.Errorf("%d Hz, %d frames announced, %d decoded", rate, frames, len(got)/max(ch, 1))
			}
			for _, ref := range []struct {
				name string
				args []string
				min  float64 // dB
			}{
				{"libopus", []string{"-request_sample_fmt", "flt", "-c:a", "libopus", "-i", path, "-f", "f32le", "-"}, math.Inf(1)},
				{"ffmpeg's own decoder", []string{"-i", path, "-f", "f32le", "-"}, 0},
			} {
				want := ffmpegF32(t, ref.args...)
				if len(got) != len(want) {
					t.Errorf("%d samples, ffmpeg (%s) %d", len(got), ref.name, len(want))
					continue
				}
				snr, _ := snrDB(got, want)
				t.Logf("%d × %d samples: %.1f dB from ffmpeg with %s", len(got)/ch, ch, snr, ref.name)
				if snr < ref.min {
					t.Errorf("%.1f dB from ffmpeg with %s, want ≥ %.0f", snr, ref.name, ref.min)
				}
			}
		})
	}
}

// TestOpusDamaged cuts an Opus file short and flips bytes in it: a
// decode, shorter for a cut, or an error, never a crash; and Decode
// resamples what it gets to the asked rate.
func TestOpusDamaged(t *testing.T) {
	set := opusSet(t)
	b, err := os.ReadFile(set["speech-8k"])
	if err != nil {
		t.Fatal(err)
	}
	whole := 0
	for at := len(b); at > 100; at -= max(1, len(b)/17) {
		d := bytes.Clone(b[:at])
		if at < len(b) && at > 200 {
			d[at/2] ^= 0x5a
		}
		src, dec, err := inProcess(bufio.NewReader(bytes.NewReader(d)))
		if dec != "opus" {
			t.Fatalf("cut at %d: decoder %q, %v; want opus", at, dec, err)
		}
		if err != nil {
			continue
		}
		out, err := readAll(src)
		src.close()
		if at == len(b) {
			whole = len(out)
		} else if err == nil && len(out) > whole {
			t.Errorf("cut at %d: %d samples, more than the whole file's %d", at, len(out), whole)
		}
	}
	p := filepath.Join(t.TempDir(), "a.opus")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, dec, err := Decode(context.Background(), p, Options{Rate: 16000})
	if err != nil || dec != "opus" || len(out) != int(math.Round(3.2*16000)) {
		t.Errorf("Decode at 16 kHz: %d samples by %q, %v; want %d by opus", len(out), dec, err, int(math.Round(3.2*16000)))
	}
}
