package audiodec

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzInProcess feeds the in-process decoders (WAV, FLAC, Ogg Vorbis,
// MP3) arbitrary bytes: no panic escapes (the FLAC and Vorbis decoders' are
// turned into errors; prep's own WAV reader must have none), nothing is
// allocated beyond what the bytes can hold, and a decoded file comes
// back trimmed or padded to exactly the duration.
func FuzzInProcess(f *testing.F) {
	for _, name := range []string{"sine.wav", "sine.flac", "sine.ogg", "sine.mp3", "truncated.mp3", "sine.opus"} {
		b, err := os.ReadFile(filepath.Join(audioDir, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[:min(len(b), 8192)])
		if name == "sine.mp3" {
			f.Add(b)                               // whole, with its Info header
			f.Add(append(b[:len(b):len(b)], b...)) // two files joined
			f.Add(b[id3Size(b):])                  // no ID3 tag
		}
		if name == "sine.ogg" {
			f.Add(append(b[:len(b):len(b)], b...)) // chained: two streams
		}
		if name == "sine.wav" {
			// The same header at 1 Hz: each frame 8000 at 8 kHz.
			slow := bytes.Clone(b[:min(len(b), 8192)])
			binary.LittleEndian.PutUint32(slow[24:], 1)
			binary.LittleEndian.PutUint32(slow[28:], 2) // bytes a second
			f.Add(slow)
		}
	}
	opt, _ := Options{Rate: 8000, Duration: 0.25}.withDefaults()
	// Without a duration, the bound on the samples: a header can claim
	// any rate and length.
	whole, _ := Options{Rate: 8000, MaxSamples: 1 << 16}.withDefaults()
	f.Fuzz(func(t *testing.T, b []byte) {
		if src, _, err := inProcess(bufio.NewReader(bytes.NewReader(b))); err == nil && src != nil {
			out, err := convert(src, whole, func(dst, src []float32) []float32 { return append(dst, src...) }, int64(len(b)))
			src.close()
			var tl *TooLongError
			if err == nil && int64(len(out)) > whole.MaxSamples || errors.As(err, &tl) && tl.Samples <= whole.MaxSamples {
				t.Fatalf("%d samples, error %v, with a bound of %d", len(out), err, whole.MaxSamples)
			}
		}
		src, dec, err := inProcess(bufio.NewReader(bytes.NewReader(b)))
		if err != nil && dec == "wav" && strings.Contains(err.Error(), "decoder failed") {
			t.Fatalf("the WAV reader panicked: %v", err)
		}
		if err != nil || src == nil {
			return
		}
		defer src.close()
		if _, ch, _ := src.format(); ch > 8 {
			return // mixing many channels is slow, not wrong
		}
		out, err := convert(src, opt, func(dst, src []float32) []float32 { return append(dst, src...) }, int64(len(b)))
		if err != nil {
			if dec == "wav" && strings.Contains(err.Error(), "decoder failed") {
				t.Fatalf("the WAV reader panicked: %v", err)
			}
			return
		}
		if len(out) != 2000 {
			t.Fatalf("%s: %d samples for 0.25 s at 8 kHz", dec, len(out))
		}
	})
}
