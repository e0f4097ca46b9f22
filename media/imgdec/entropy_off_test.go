//go:build cgo && noprepentropy

package imgdec

import (
	"path/filepath"
	"testing"
)

// TestEntropyOff: under the noprepentropy tag libjpeg-turbo decodes every
// scan itself (the other tests check its pixels against Pillow's and the
// Go decoder's), and prep version says why.
func TestEntropyOff(t *testing.T) {
	own, why := OwnEntropy()
	if own || why != "off (noprepentropy build tag)" {
		t.Errorf("OwnEntropy() = %v, %q", own, why)
	}
	photos, _ := filepath.Glob(filepath.Join(imagesDir, "*", "*.jpg"))
	if len(photos) == 0 {
		t.Fatalf("no JPEG under %s", imagesDir)
	}
	for _, p := range photos {
		if _, _, err := Decode(readFile(t, p), Options{Decoder: DecoderTurbo}); err != nil {
			t.Fatal(p, err)
		}
	}
	if n := phuffInstalls() + seqInstalls(); n != 0 {
		t.Errorf("prep's entropy decoders ran %d times", n)
	}
}
