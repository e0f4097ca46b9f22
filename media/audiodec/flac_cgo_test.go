//go:build cgo

package audiodec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prep-dev/prep/internal/testenv"
)

// readAll decodes all of src.
func readAll(src source) ([]float32, error) {
	var out []float32
	buf := make([]float32, 4096)
	for {
		n, err := src.read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// decodeWith decodes the FLAC bytes b with open.
func decodeWith(open func(io.Reader) (source, error), b []byte) (rate, channels int, frames int64, pcm []float32, err error) {
	src, err := open(bytes.NewReader(b))
	if err != nil {
		return 0, 0, 0, nil, err
	}
	defer src.close()
	rate, channels, frames = src.format()
	pcm, err = readAll(src)
	return rate, channels, frames, pcm, err
}

// flacSet returns testdata's FLAC and FLACs sox makes of noise and a sine
// at several bit depths, channel counts, rates and compression levels
// (which change the block sizes and predictors).
func flacSet(t *testing.T) map[string][]byte {
	sox := testenv.NeedCommand(t, "sox", "sox")
	set := map[string][]byte{}
	b, err := os.ReadFile(filepath.Join(audioDir, "sine.flac"))
	if err != nil {
		t.Fatal(err)
	}
	set["sine.flac"] = b
	dir := t.TempDir()
	for _, c := range []struct{ bits, channels, rate, level int }{
		{16, 2, 44100, 5}, {24, 2, 48000, 8}, {8, 1, 22050, 0}, {16, 6, 48000, 3}, {24, 1, 96000, 5}, {16, 1, 8000, 8},
	} {
		name := fmt.Sprintf("%db-%dch-%dHz-C%d.flac", c.bits, c.channels, c.rate, c.level)
		out := filepath.Join(dir, name)
		cmd := exec.Command(sox, "-n", "-r", fmt.Sprint(c.rate), "-c", fmt.Sprint(c.channels), "-b", fmt.Sprint(c.bits),
			"-C", fmt.Sprint(c.level), out, "synth", "0.7", "pinknoise", "sine", "440", "gain", "-3")
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sox %s: %v: %s", name, err, msg)
		}
		if set[name], err = os.ReadFile(out); err != nil {
			t.Fatal(err)
		}
	}
	return set
}

// TestFLACDecodersAgree: libFLAC (cgo builds) and github.com/mewkiz/flac
// (builds without cgo) give the same format and samples, FLAC being
// lossless, so a dataset does not depend on how prep was built; and both
// refuse damaged files.
func TestFLACDecodersAgree(t *testing.T) {
	for name, b := range flacSet(t) {
		t.Run(name, func(t *testing.T) {
			r1, c1, f1, lib, err1 := decodeWith(newLibFLAC, b)
			r2, c2, f2, ref, err2 := decodeWith(newGoFLAC, b)
			if err1 != nil || err2 != nil {
				t.Fatalf("libFLAC: %v; Go: %v", err1, err2)
			}
			if r1 != r2 || c1 != c2 || f1 != f2 {
				t.Fatalf("libFLAC: %d Hz, %d channels, %d frames; Go: %d, %d, %d", r1, c1, f1, r2, c2, f2)
			}
			if int64(len(lib)) != f1*int64(c1) || !slices.Equal(lib, ref) {
				t.Fatalf("libFLAC gave %d samples, Go %d, %d frames announced; equal: %v", len(lib), len(ref), f1, slices.Equal(lib, ref))
			}
			// Damage in the audio frames: a flipped byte, the end cut off.
			start := len(b) / 8
			for at := start; at < len(b); at += max(1, (len(b)-start)/25) {
				for _, d := range []struct {
					kind string
					data []byte
				}{
					{"flip", func() []byte { c := bytes.Clone(b); c[at] ^= 0x24; return c }()},
					{"cut", b[:at]},
				} {
					_, _, _, lib, err1 := decodeWith(newLibFLAC, d.data)
					_, _, _, ref, err2 := decodeWith(newGoFLAC, d.data)
					switch {
					case err1 == nil && err2 == nil:
						if !slices.Equal(lib, ref) {
							t.Errorf("%s at %d: both decoded it, to different samples", d.kind, at)
						}
					case err1 == nil:
						t.Errorf("%s at %d: libFLAC decoded it; Go: %v", d.kind, at, err2)
					case errors.Is(err1, io.EOF):
						t.Errorf("%s at %d: libFLAC: %v", d.kind, at, err1)
					}
				}
			}
		})
	}
}
