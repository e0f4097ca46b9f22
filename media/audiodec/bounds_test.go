package audiodec

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/wav"
	"github.com/prep-dev/prep/media/pcm"
)

// slowWAV writes a WAV of n frames of a ramp at rate Hz, mono 16-bit.
func slowWAV(t *testing.T, dir string, rate, n int) string {
	t.Helper()
	data := make([]byte, 2*n)
	for i := range n {
		binary.LittleEndian.PutUint16(data[2*i:], uint16(i*97))
	}
	var b bytes.Buffer
	if err := wav.Encode(&b, formats.Tensor{DType: formats.Int16, Shape: []int{n}, Data: data}, rate); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "slow.wav")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// unknownLength clears a FLAC's STREAMINFO total (36 bits from byte 21's
// low nibble): "length unknown", so only the decode can tell it.
func unknownLength(t *testing.T, dir, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b[:4]) != "fLaC" || b[4]&0x7f != 0 {
		t.Fatalf("%s: no STREAMINFO first", path)
	}
	b[21] &= 0xf0
	clear(b[22:26])
	out := filepath.Join(dir, "unknown-"+filepath.Base(path))
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDecodeTooLong checks Options.MaxSamples on every decoder: a file
// whose result would pass it is a *TooLongError, said from the header
// when it gives the length and found while decoding when not, whatever
// rate the file declares; one exactly at the bound decodes.
func TestDecodeTooLong(t *testing.T) {
	dir := t.TempDir()
	// 3 frames at 1 Hz are 48,000 at 16 kHz.
	tiny := slowWAV(t, t.TempDir(), 1, 3)
	// 100,000 frames of silence at 1 Hz: a few KB of FLAC that resample
	// to 1.6 billion samples, 6.4 GB of float32.
	raw := filepath.Join(dir, "silence.raw")
	if err := os.WriteFile(raw, make([]byte, 200_000), 0o644); err != nil {
		t.Fatal(err)
	}
	in1Hz := []string{"-f", "s16le", "-ar", "1", "-ac", "1", "-i", raw}
	flac1 := filepath.Join(dir, "slow.flac")
	runFFmpeg(t, append(in1Hz, "-c:a", "flac", flac1)...)
	mka1 := filepath.Join(dir, "slow.mka") // through ffmpeg: no length known before the end
	runFFmpeg(t, append(in1Hz, "-c:a", "pcm_s16le", mka1)...)
	big1 := slowWAV(t, dir, 1, 100_000)
	sine := filepath.Join(audioDir, "sine.flac") // 1 s at 16 kHz
	mp3 := filepath.Join(audioDir, "sine.mp3")   // 1 s at 44.1 kHz, an Info header: 16,000 samples at 16 kHz
	// No Info header: the length is known only once decoded (1.5 s at
	// 8 kHz, 1.6 s with the codec's delay: 25,344 samples at 16 kHz).
	mp3NoLen := filepath.Join(dir, "noinfo.mp3")
	runFFmpeg(t, "-f", "lavfi", "-i", "sine=f=440:d=1.5:r=8000", "-c:a", "libmp3lame", "-b:a", "16k", "-write_xing", "0", mp3NoLen)

	const max = 1 << 20
	tests := []struct {
		name    string
		path    string
		opt     Options
		dec     Decoder
		samples int64 // the error's; 0: decodes, -1: any over the bound
		partial bool
		fileHz  int
	}{
		{"wav at 1 Hz, at the bound", tiny, Options{MaxSamples: 48000}, "wav", 0, false, 1},
		{"wav at 1 Hz, one over", tiny, Options{MaxSamples: 47999}, "wav", 48000, false, 1},
		{"wav at 1 Hz, stereo out", tiny, Options{Channels: 2, MaxSamples: 95999}, "wav", 96000, false, 1},
		{"long wav at 1 Hz", big1, Options{MaxSamples: max}, "wav", 1_600_000_000, false, 1},
		{"flac at 1 Hz", flac1, Options{MaxSamples: max}, "flac", 1_600_000_000, false, 1},
		{"flac at 1 Hz, no length", unknownLength(t, dir, flac1), Options{MaxSamples: max}, "flac", -1, true, 1},
		{"ffmpeg at 1 Hz", mka1, Options{MaxSamples: max}, "ffmpeg", -1, true, 1},
		{"duration over the bound", sine, Options{Duration: 2, MaxSamples: 31999}, "flac", 32000, false, 16000},
		{"duration at the bound", flac1, Options{Duration: 2, MaxSamples: 32000}, "flac", 0, false, 1},
		{"sine at the bound", sine, Options{MaxSamples: 16000}, "flac", 0, false, 16000},
		{"sine, no length, one over", unknownLength(t, dir, sine), Options{MaxSamples: 15999}, "flac", 16000, true, 16000},
		{"mp3 at the bound", mp3, Options{MaxSamples: 16000}, mp3Decoder, 0, false, 44100},
		{"mp3, one over", mp3, Options{MaxSamples: 15999}, mp3Decoder, 16000, false, 44100},
		{"mp3 at 8 kHz, no length", mp3NoLen, Options{MaxSamples: 20000}, mp3Decoder, -1, true, 8000},
	}
	for _, tt := range tests {
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		out, dec, err := Decode(context.Background(), tt.path, tt.opt)
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if dec != tt.dec {
			t.Errorf("%s: decoded by %q, want %q", tt.name, dec, tt.dec)
		}
		if tt.samples == 0 {
			if err != nil || int64(len(out)) != tt.opt.MaxSamples {
				t.Errorf("%s: %d samples, %v; want %d", tt.name, len(out), err, tt.opt.MaxSamples)
			}
			continue
		}
		var tl *TooLongError
		if !errors.As(err, &tl) {
			t.Errorf("%s: error %v, want a TooLongError", tt.name, err)
			continue
		}
		if tl.Partial != tt.partial || tt.samples > 0 && tl.Samples != tt.samples || tl.Samples <= tl.Max || tl.Max != tt.opt.MaxSamples {
			t.Errorf("%s: %+v, want %d samples (partial %v) over %d", tt.name, *tl, tt.samples, tt.partial, tt.opt.MaxSamples)
		}
		if tl.Rate != DefaultRate || tl.FileRate != tt.fileHz {
			t.Errorf("%s: %+v, want the file's rate and 16000 Hz", tt.name, *tl)
		}
		// Nothing near the result's size was taken: 6.4 GB at 1 Hz, and
		// the limit's 4 MiB at most where it is found decoding.
		if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
			t.Errorf("%s: %d MiB allocated before the refusal", tt.name, got>>20)
		}
		// DecodeS16 counts samples as Decode does.
		if _, _, err := DecodeS16(context.Background(), tt.path, tt.opt); !errors.As(err, &tl) {
			t.Errorf("%s: DecodeS16 error %v, want a TooLongError", tt.name, err)
		}
	}
}

// TestDecodeSlowRateBlocks checks that a file at a very low rate decodes
// to the same samples as at a normal one would resample (a block of
// input is cut to what makes a block of output): 1 Hz against the pcm
// Converter fed the whole input at once.
func TestDecodeSlowRateBlocks(t *testing.T) {
	path := slowWAV(t, t.TempDir(), 3, 50)
	got, dec := decodeFile(t, path, Options{Rate: 16000})
	w, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tensor, _, err := wav.DecodeBytes(w)
	if err != nil {
		t.Fatal(err)
	}
	in := make([]float32, 50)
	for i := range in {
		in[i] = float32(int16(binary.LittleEndian.Uint16(tensor.Data[2*i:]))) / 32768
	}
	c, err := pcm.NewConverter(3, 1, 16000, 1)
	if err != nil {
		t.Fatal(err)
	}
	want, err := c.Write(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	want = c.Flush(want)
	if dec != "wav" || len(got) != len(want) {
		t.Fatalf("decoded by %s, %d samples; want wav, %d", dec, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("sample %d = %v, want %v", i, got[i], want[i])
		}
	}
}
