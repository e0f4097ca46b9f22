//go:build cgo

package audiodec

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
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
// 60 dB TestCloseToFFmpeg asks of Vorbis.
func TestMP3LikeFFmpeg(t *testing.T) {
	for name, path := range mp3Set(t) {
		t.Run(name, func(t *testing.T) {
			ref := runFFmpeg(t, "-i", path, "-f", "f32le", "-")
			want := make([]float32, len(ref)/4)
			for i := range want {
				want[i] = math.Float32frombits(binary.LittleEndian.Uint32(ref[4*i:]))
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			src, dec, err := inProcess(bufio.NewReaderSize(bytes.NewReader(b), 64<<10))
			if err != nil || dec != "mp3" {
				t.Fatalf("decoder %q, %v; want mp3", dec, err)
			}
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
			var sig, noise, worst float64
			for i := range got {
				d := float64(got[i]) - float64(want[i])
				sig += float64(want[i]) * float64(want[i])
				noise += d * d
				worst = max(worst, math.Abs(d))
			}
			snr := 10 * math.Log10(sig/noise)
			t.Logf("%d Hz × %d, %d samples, %d announced: %.1f dB from ffmpeg, largest difference %.2g", rate, ch, len(got), frames, snr, worst)
			if snr < 60 {
				t.Errorf("%.1f dB from ffmpeg's samples, want ≥ 60", snr)
			}
		})
	}
}

// mp3Decoder is the decoder of MP3 files in this build.
const mp3Decoder Decoder = "mp3"
