package audiodec

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prep-dev/prep/formats/wav"
	"github.com/prep-dev/prep/internal/testenv"
	"github.com/prep-dev/prep/media/pcm"
)

const audioDir = "../../testdata/audio"

// ffmpeg runs the ffmpeg program and returns its standard output.
func runFFmpeg(t *testing.T, args ...string) []byte {
	t.Helper()
	testenv.NeedCommand(t, "ffmpeg", "ffmpeg")
	var out, stderr bytes.Buffer
	cmd := exec.Command("ffmpeg", append([]string{"-nostdin", "-v", "error", "-y"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ffmpeg %v: %v: %s", args, err, stderr.String())
	}
	return out.Bytes()
}

// ffmpegF32 runs ffmpeg with args, which write 32-bit float samples to
// its standard output, and returns them.
func ffmpegF32(t *testing.T, args ...string) []float32 {
	t.Helper()
	b := runFFmpeg(t, args...)
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// snrDB is how far got is from want (as long): the signal-to-noise ratio
// in dB, +Inf when they are equal, and the largest difference.
func snrDB(got, want []float32) (db, worst float64) {
	var sig, noise float64
	for i := range want {
		d := float64(got[i]) - float64(want[i])
		sig += float64(want[i]) * float64(want[i])
		noise += d * d
		worst = max(worst, math.Abs(d))
	}
	if noise == 0 {
		return math.Inf(1), 0
	}
	return 10 * math.Log10(sig/noise), worst
}

// openInProcess opens the file at path with inProcess, which must pick
// the decoder want; the caller closes the source.
func openInProcess(t *testing.T, path string, want Decoder) source {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	src, dec, err := inProcess(bufio.NewReaderSize(bytes.NewReader(b), 64<<10))
	if err != nil || dec != want || src == nil {
		t.Fatalf("%s: decoder %q, %v; want %s", path, dec, err, want)
	}
	return src
}

// encode writes testdata/audio/sine.flac (1 s of 440 Hz at 16 kHz, mono)
// in another encoding, with extra ffmpeg arguments.
func encode(t *testing.T, name string, args ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	runFFmpeg(t, slices.Concat([]string{"-i", filepath.Join(audioDir, "sine.flac")}, args, []string{out})...)
	return out
}

func decodeFile(t *testing.T, path string, opt Options) ([]float32, Decoder) {
	t.Helper()
	pcm, dec, err := Decode(context.Background(), path, opt)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
	return pcm, dec
}

// sineStats returns the peak and the frequency of channel c of
// interleaved pcm, the latter from the zero crossings of its middle 80%.
func sineStats(pcm []float32, channels, c, rate int) (peak, hz float64) {
	frames := len(pcm) / channels
	lo, hi := frames/10, frames*9/10
	crossings := 0
	for i := lo; i < hi; i++ {
		a, b := pcm[i*channels+c], pcm[(i+1)*channels+c]
		if (a < 0) != (b < 0) {
			crossings++
		}
		peak = max(peak, math.Abs(float64(a)))
	}
	return peak, float64(crossings) / 2 / (float64(hi-lo) / float64(rate))
}

func TestDecodeSine(t *testing.T) {
	files := []struct {
		name string
		dec  Decoder
	}{{"sine.wav", "wav"}, {"sine.flac", "flac"}, {"sine.mp3", mp3Decoder}, {"sine.ogg", "vorbis"}, {"sine.opus", opusDecoder}}
	opts := []Options{
		{Duration: 0.5}, // 16 kHz mono, trimmed
		{Rate: 8000, Channels: 2, Duration: 1.25}, // stereo, padded with silence
		{Rate: 44100}, // whole
	}
	for _, file := range files {
		for _, opt := range opts {
			t.Run(fmt.Sprintf("%s/%+v", file.name, opt), func(t *testing.T) {
				t.Parallel()
				pcm, dec := decodeFile(t, filepath.Join(audioDir, file.name), opt)
				o, _ := opt.withDefaults()
				if dec != file.dec {
					t.Errorf("decoded by %s, want %s", dec, file.dec)
				}
				frames := int(math.Round(float64(o.Rate) * o.Duration))
				if o.Duration == 0 {
					frames = o.Rate // the files hold 1 s, give or take a codec's padding
					if d := len(pcm)/o.Channels - frames; d < -o.Rate/100 || d > o.Rate/10 {
						t.Fatalf("%d frames, want about %d", len(pcm)/o.Channels, frames)
					}
				} else if len(pcm) != frames*o.Channels {
					t.Fatalf("%d samples, want %d", len(pcm), frames*o.Channels)
				}
				voiced := pcm[:min(len(pcm), o.Rate*o.Channels*9/10)] // the sine lasts 1 s
				for c := range o.Channels {
					// lavfi's sine has amplitude 1/8 (1/8√2 in the stereo
					// files); lossy codecs wobble a little.
					if peak, hz := sineStats(voiced, o.Channels, c, o.Rate); math.Abs(hz-440) > 5 || peak < 0.08 || peak > 0.14 {
						t.Errorf("channel %d: %.1f Hz, peak %.3f; want 440 Hz, 0.088 to 0.125", c, hz, peak)
					}
				}
				if o.Duration > 1 {
					tail := pcm[int(1.1*float64(o.Rate))*o.Channels:]
					if slices.ContainsFunc(tail, func(v float32) bool { return v != 0 }) {
						t.Error("padding after the end is not silence")
					}
				}
			})
		}
	}
}

// TestDecodeEncodings decodes one signal stored in every WAVE encoding
// the in-process reader knows, and in FLAC: at the file's own rate the
// samples are the 16-bit source's, exactly where the encoding holds them.
func TestDecodeEncodings(t *testing.T) {
	ref := runFFmpeg(t, "-i", filepath.Join(audioDir, "sine.flac"), "-f", "s16le", "-")
	want := make([]float32, len(ref)/2)
	for i := range want {
		want[i] = float32(int16(binary.LittleEndian.Uint16(ref[2*i:]))) / 32768
	}
	tests := []struct {
		name string
		args []string
		tol  float64
		dec  Decoder
	}{
		{"s16.wav", []string{"-c:a", "pcm_s16le"}, 0, "wav"},
		{"s24.wav", []string{"-c:a", "pcm_s24le"}, 0, "wav"},
		{"s32.wav", []string{"-c:a", "pcm_s32le"}, 0, "wav"},
		{"f32.wav", []string{"-c:a", "pcm_f32le"}, 0, "wav"},
		{"f64.wav", []string{"-c:a", "pcm_f64le"}, 0, "wav"},
		{"u8.wav", []string{"-c:a", "pcm_u8"}, 1.0 / 128, "wav"},
		{"ext.wav", []string{"-c:a", "pcm_s24le", "-rf64", "never", "-write_bext", "1"}, 0, "wav"},
		{"s24.flac", []string{"-c:a", "flac", "-sample_fmt", "s32"}, 0, "flac"},
		{"mulaw.wav", []string{"-c:a", "pcm_mulaw"}, 0.01, "ffmpeg"}, // not decoded in process: ffmpeg's turn
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, dec := decodeFile(t, encode(t, tt.name, tt.args...), Options{})
			if dec != tt.dec {
				t.Errorf("decoded by %s, want %s", dec, tt.dec)
			}
			if len(got) != len(want) {
				t.Fatalf("%d samples, want %d", len(got), len(want))
			}
			for i := range got {
				if d := math.Abs(float64(got[i] - want[i])); d > tt.tol {
					t.Fatalf("sample %d = %v, want %v (±%v)", i, got[i], want[i], tt.tol)
				}
			}
		})
	}
}

// TestDecodersAgree checks that a file's samples do not depend on the
// decoder: the same PCM as WAV, FLAC and through ffmpeg (as WAV in a
// .mka) give the same bytes after mixing and resampling.
func TestDecodersAgree(t *testing.T) {
	src := filepath.Join(audioDir, "sine.wav") // 22.05 kHz stereo
	files := map[Decoder]string{
		"wav":    src,
		"flac":   encode(t, "x.flac", "-i", src, "-map", "1:a", "-c:a", "flac"),
		"ffmpeg": encode(t, "x.mka", "-i", src, "-map", "1:a", "-c:a", "pcm_s16le"),
	}
	opt := Options{Rate: 16000, Channels: 1}
	want, _ := decodeFile(t, src, opt)
	for name, path := range files {
		got, dec := decodeFile(t, path, opt)
		if dec != name || !slices.Equal(got, want) {
			t.Errorf("%s: decoded by %s, %d samples; want the same samples as the WAV", name, dec, len(got))
		}
	}
}

// TestCloseToFFmpeg compares prep's resampling with ffmpeg's own
// (libswresample, the same filter shape): the two differ by filter
// details and float32 rounding, far below 16-bit quantisation.
func TestCloseToFFmpeg(t *testing.T) {
	tests := []struct {
		file     string
		rate, ch int
		minSNR   float64
		why      string
	}{
		// Opus: the same decoder on both sides (libopus in cgo builds), prep resamples.
		{"sine.opus", 8000, 1, 70, "resampling"},
		{"sine.opus", 16000, 1, 70, "resampling"},
		{"sine.opus", 48000, 1, 1000, "nothing to resample"},
		{"sine.mp3", 16000, 1, 70, "resampling"},
		// libmpg123 against ffmpeg's decoder: float rounding (TestMP3LikeFFmpeg).
		{"sine.mp3", 44100, 1, 100, "MP3 decoding"},
		{"sine.ogg", 32000, 2, 60, "Vorbis decoding"}, // oggvorbis against ffmpeg's decoder
	}
	for _, tt := range tests {
		path := filepath.Join(audioDir, tt.file)
		got, _ := decodeFile(t, path, Options{Rate: tt.rate, Channels: tt.ch})
		var dec []string
		if strings.HasSuffix(tt.file, ".opus") && opusDecoder == "opus" {
			// libopus, as prep decodes Opus (ffmpeg's own decoder differs).
			dec = []string{"-request_sample_fmt", "flt", "-c:a", "libopus"}
		}
		ref := runFFmpeg(t, append(dec, "-i", path, "-ar", fmt.Sprint(tt.rate), "-ac", fmt.Sprint(tt.ch), "-f", "f32le", "-")...)
		var sig, noise float64
		n := min(len(got), len(ref)/4)
		for i := tt.rate / 10 * tt.ch; i < n-tt.rate/10*tt.ch; i++ {
			w := float64(math.Float32frombits(binary.LittleEndian.Uint32(ref[4*i:])))
			sig += w * w
			noise += (float64(got[i]) - w) * (float64(got[i]) - w)
		}
		snr := 10 * math.Log10(sig/noise)
		if snr < tt.minSNR {
			t.Errorf("%s at %d Hz: %.1f dB from ffmpeg (%s), want ≥ %v", tt.file, tt.rate, snr, tt.why, tt.minSNR)
		}
		t.Logf("%s at %d Hz: %.1f dB from ffmpeg (%s)", tt.file, tt.rate, snr, tt.why)
	}
}

func TestDecodeRemix(t *testing.T) {
	// 5.1 to stereo needs a downmix matrix: ffmpeg's.
	path := encode(t, "6ch.wav", "-af", "pan=5.1|c0=c0|c1=c0|c2=c0|c3=c0|c4=c0|c5=c0")
	pcm, dec := decodeFile(t, path, Options{Channels: 2})
	if dec != "ffmpeg" || len(pcm) != 2*16000 {
		t.Fatalf("decoded by %s, %d samples; want ffmpeg, %d", dec, len(pcm), 2*16000)
	}
	if _, hz := sineStats(pcm, 2, 1, 16000); math.Abs(hz-440) > 5 {
		t.Errorf("%.1f Hz, want 440", hz)
	}
	// To mono, prep averages the channels: no clipping whatever their number.
	mono, dec := decodeFile(t, path, Options{})
	if dec != "wav" {
		t.Errorf("6 channels to mono decoded by %s, want wav", dec)
	}
	if peak, _ := sineStats(mono, 1, 0, 16000); math.Abs(peak-0.125) > 0.002 {
		t.Errorf("mono peak %.4f, want 0.125", peak)
	}
}

func TestDecodeErrors(t *testing.T) {
	wavBytes, _ := os.ReadFile(filepath.Join(audioDir, "sine.wav"))
	flacBytes, _ := os.ReadFile(filepath.Join(audioDir, "sine.flac"))
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fast := bytes.Clone(wavBytes)
	binary.LittleEndian.PutUint32(fast[24:], 4_000_000_000) // the fmt chunk's rate
	tests := []struct {
		path, want string
		is         error
	}{
		{write("fast.wav", fast), "sample rates up to 1048576 Hz", nil},
		{filepath.Join(audioDir, "truncated.wav"), "damaged WAV: its header ends before the audio data; re-encode or remove the file", nil},
		{write("cut.wav", wavBytes[:len(wavBytes)/2+1]), "wav cut off", wav.ErrTruncated},
		{write("cut.flac", flacBytes[:len(flacBytes)/2]), "FLAC cut off", nil},
		// No STREAMINFO first: ffmpeg's to judge.
		{write("bad.flac", append([]byte("fLaC"), bytes.Repeat([]byte{0xff}, 100)...)), "not a media file ffmpeg can read", nil},
		// STREAMINFO that says nothing sensible.
		{write("zero.flac", append([]byte("fLaC\x80\x00\x00\x22"), make([]byte, 34)...)), "damaged FLAC header", nil},
		{filepath.Join(audioDir, "../video/testsrc.mp4"), "matches no streams", nil},
	}
	for _, tt := range tests {
		_, _, err := Decode(context.Background(), tt.path, Options{})
		if err == nil || !strings.Contains(err.Error(), tt.want) || tt.is != nil && !errors.Is(err, tt.is) {
			t.Errorf("%s: error %v, want one with %q", filepath.Base(tt.path), err, tt.want)
		}
	}
	// A duration stops before the damage: what it needs is there.
	if _, _, err := Decode(context.Background(), filepath.Join(dir, "cut.wav"), Options{Duration: 0.1}); err != nil {
		t.Errorf("cut.wav, first 0.1 s: %v", err)
	}
}

// TestDecodeS16 checks that 16-bit decoding gives pcm.S16 of the float
// samples, whichever decoder and length.
func TestDecodeS16(t *testing.T) {
	for _, file := range []string{"sine.wav", "sine.flac", "sine.ogg", "sine.mp3"} {
		for _, opt := range []Options{{}, {Rate: 22050, Channels: 2, Duration: 1.5}} {
			path := filepath.Join(audioDir, file)
			f, _ := decodeFile(t, path, opt)
			s, _, err := DecodeS16(context.Background(), path, opt)
			if err != nil {
				t.Fatal(err)
			}
			if len(s) != len(f) {
				t.Fatalf("%s %+v: %d samples, float gives %d", file, opt, len(s), len(f))
			}
			for i := range s {
				if s[i] != pcm.S16(f[i]) {
					t.Fatalf("%s %+v: sample %d = %d, want S16(%v) = %d", file, opt, i, s[i], f[i], pcm.S16(f[i]))
				}
			}
		}
	}
}
