//go:build cgo

package audiodec

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// mp3Set encodes a second and a half of noise and a sine with ffmpeg's
// libmp3lame in the ways MP3 datasets hold it: CBR and VBR, MPEG-1, 2
// and 2.5 rates, mono and stereo, with and without the Xing/Info header
// (and its LAME tag of encoder delay and padding), with ID3v2 and ID3v1
// tags; and testdata's sine.mp3.
func mp3Set(t *testing.T) map[string]string {
	dir := t.TempDir()
	set := map[string]string{"sine.mp3": filepath.Join(audioDir, "sine.mp3")}
	for _, c := range []struct {
		name string
		rate int
		ch   int
		args []string
	}{
		{"cbr64-44k-mono", 44100, 1, []string{"-b:a", "64k"}},
		{"vbr-44k-stereo", 44100, 2, []string{"-q:a", "4"}},
		{"cbr128-48k-stereo", 48000, 2, []string{"-b:a", "128k"}},
		{"cbr32-22k-mono", 22050, 1, []string{"-b:a", "32k"}}, // MPEG-2
		{"vbr-16k-mono", 16000, 1, []string{"-q:a", "6"}},     // MPEG-2, as speech corpora
		{"cbr16-8k-mono", 8000, 1, []string{"-b:a", "16k"}},   // MPEG-2.5
		{"noxing-44k-stereo", 44100, 2, []string{"-b:a", "96k", "-write_xing", "0"}},
		{"noxing-16k-mono", 16000, 1, []string{"-b:a", "32k", "-write_xing", "0"}},
		{"noxing-id3v1-11k-mono", 11025, 1, []string{"-b:a", "40k", "-write_xing", "0", "-write_id3v1", "1", "-metadata", "title=t"}},
		{"tags-32k-stereo", 32000, 2, []string{"-b:a", "80k", "-id3v2_version", "3", "-write_id3v1", "1",
			"-metadata", "title=a title", "-metadata", "artist=someone"}},
	} {
		p := filepath.Join(dir, c.name+".mp3")
		runFFmpeg(t, slices.Concat([]string{"-f", "lavfi", "-i", fmt.Sprintf("anoisesrc=d=1.5:a=0.2:r=%d:s=7", c.rate),
			"-f", "lavfi", "-i", fmt.Sprintf("sine=f=440:d=1.5:r=%d", c.rate),
			"-filter_complex", fmt.Sprintf("amix=inputs=2,pan=%dc|c0=c0%s", c.ch, map[int]string{1: "", 2: "|c1=0.5*c0"}[c.ch]),
			"-c:a", "libmp3lame"}, c.args, []string{p})...)
		set[c.name] = p
	}
	// A tag larger than the reader's buffer (cover art): prep skips it
	// to find the first frame.
	b, err := os.ReadFile(set["cbr64-44k-mono"])
	if err != nil {
		t.Fatal(err)
	}
	n := 200 << 10
	tag := append([]byte("ID3\x03\x00\x00"), byte(n>>21&0x7f), byte(n>>14&0x7f), byte(n>>7&0x7f), byte(n&0x7f))
	tag = append(tag, make([]byte, n)...)
	copy(tag[10:], "TIT2\x00\x00\x00\x05\x00\x00\x00abcd")
	set["bigtag"] = filepath.Join(dir, "bigtag.mp3")
	if err := os.WriteFile(set["bigtag"], append(tag, b...), 0o644); err != nil {
		t.Fatal(err)
	}
	return set
}

// TestMP3LikeFFmpeg decodes MP3s with libmpg123 and compares them with
// ffmpeg's decode (as 32-bit float at the file's rate): the same number
// of samples, the encoder delay and padding cut off alike where the LAME
// tag gives them, and the samples equal to float rounding (the two
// decoders' synthesis filters sum in different orders), far within the
// 60 dB TestCloseToFFmpeg asks of Vorbis. MPEG-2 at 24 kHz is left to
// TestMP3At24kHz.
func TestMP3LikeFFmpeg(t *testing.T) {
	for name, path := range mp3Set(t) {
		t.Run(name, func(t *testing.T) {
			want := ffmpegF32(t, "-i", path, "-f", "f32le", "-")
			src := openInProcess(t, path, "mp3")
			defer src.close()
			rate, ch, frames := src.format()
			got, err := readAll(src)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d samples, ffmpeg %d (%d Hz × %d, %d frames announced)", len(got), len(want), rate, ch, frames)
			}
			if frames >= 0 && frames*int64(ch) != int64(len(got)) {
				t.Errorf("%d frames announced, %d decoded", frames, len(got)/ch)
			}
			snr, worst := snrDB(got, want)
			t.Logf("%d Hz × %d, %d samples, %d announced: %.1f dB from ffmpeg, largest difference %.2g", rate, ch, len(got), frames, snr, worst)
			if snr < 60 {
				t.Errorf("%.1f dB from ffmpeg's samples, want ≥ 60", snr)
			}
		})
	}
}

// mp3Decoder is the decoder of MP3 files in this build.
const mp3Decoder Decoder = "mp3"

// TestMP3Damaged cuts MP3s short and flips bytes in them: a file cut
// off is refused as such, where its Info header announces more samples
// or its last frame is incomplete (ffmpeg decodes what is there without
// a word); a damaged one is refused or decoded, never a crash. A flipped
// byte inside a frame's audio data mostly decodes, with a glitch, as in
// players: a frame carries no checksum (LAME writes no CRC), where
// ffmpeg logs some such frames as errors and prep's ffmpeg path refuses
// the file.
func TestMP3Damaged(t *testing.T) {
	set := mp3Set(t)
	dir := t.TempDir()
	for _, name := range []string{"sine.mp3", "vbr-44k-stereo", "noxing-44k-stereo", "noxing-16k-mono"} {
		b, err := os.ReadFile(set[name])
		if err != nil {
			t.Fatal(err)
		}
		whole := len(runFFmpeg(t, "-i", set[name], "-f", "f32le", "-")) / 4
		refused, flipped := 0, 0
		for at := 1200; at < len(b); at += max(1, (len(b)-1200)/23) {
			p := filepath.Join(dir, "cut.mp3")
			if err := os.WriteFile(p, b[:at], 0o644); err != nil {
				t.Fatal(err)
			}
			src, dec, err := inProcess(bufio.NewReader(bytes.NewReader(b[:at])))
			if dec != "mp3" {
				t.Fatalf("%s cut at %d: decoder %q, %v; want mp3", name, at, dec, err)
			}
			var out []float32
			if err == nil {
				out, err = readAll(src)
				src.close()
			}
			switch {
			case err != nil && !strings.Contains(err.Error(), "MP3 cut off"):
				t.Errorf("%s cut at %d: %v, want a cut-off error", name, at, err)
			case err == nil && !strings.HasPrefix(name, "noxing"):
				t.Errorf("%s cut at %d: %d samples, no error; its Info header announces more", name, at, len(out))
			case err == nil:
				// Cut between two frames, which nothing tells: ffmpeg's
				// samples are the reference.
				if want := len(runFFmpeg(t, "-i", p, "-f", "f32le", "-")) / 4; len(out) != want {
					t.Errorf("%s cut at %d: %d samples, ffmpeg %d", name, at, len(out), want)
				}
			}
			if err != nil {
				refused++
			}
			c := bytes.Clone(b)
			c[at] ^= 0x5a
			if err := os.WriteFile(p, c, 0o644); err != nil {
				t.Fatal(err)
			}
			if out, _, err := Decode(context.Background(), p, Options{Rate: 16000}); err != nil {
				flipped++
			} else if len(out) > 2*whole {
				t.Errorf("%s flipped at %d: %d samples from %d", name, at, len(out), whole)
			}
		}
		t.Logf("%s: %d cuts refused; %d flipped files refused", name, refused, flipped)
	}
}

// TestMP3At24kHz: on MPEG-2 at 24 kHz with sound above about 2 kHz
// ffmpeg 5.1's decoder differs from libmpg123 by far more than rounding
// (16 dB), where libmpg123 and libmad (sox's MP3 decoder) agree to
// 120 dB: one of ffmpeg's scalefactor band tables for 24 kHz is not
// LAME's. libmpg123's samples are the nearer to what was encoded, which
// this test checks (and the same count as ffmpeg's).
func TestMP3At24kHz(t *testing.T) {
	src := "anoisesrc=d=1.5:a=0.2:r=24000:s=7"
	p := filepath.Join(t.TempDir(), "noise24k.mp3")
	runFFmpeg(t, "-f", "lavfi", "-i", src, "-c:a", "libmp3lame", "-b:a", "160k", p)
	orig := ffmpegF32(t, "-f", "lavfi", "-i", src, "-f", "f32le", "-")
	ff := ffmpegF32(t, "-i", p, "-f", "f32le", "-")
	s := openInProcess(t, p, "mp3")
	got, err := readAll(s)
	s.close()
	if err != nil || len(got) != len(ff) || len(got) != len(orig) {
		t.Fatalf("%d samples (%v), ffmpeg %d, encoded %d", len(got), err, len(ff), len(orig))
	}
	mine, _ := snrDB(got, orig)
	theirs, _ := snrDB(ff, orig)
	t.Logf("against the encoded noise: libmpg123 %.2f dB, ffmpeg %.2f dB", mine, theirs)
	if mine < theirs+0.3 {
		t.Errorf("libmpg123 %.2f dB from the encoded noise, ffmpeg %.2f: want libmpg123 the nearer", mine, theirs)
	}
}
