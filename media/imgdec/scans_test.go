//go:build cgo

package imgdec

import (
	"bytes"
	"image"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const progressiveDir = "../../testdata/progressive"

// progressiveJPEGs returns testdata/progressive's JPEGs (every component
// layout) and the progressive test photo.
func progressiveJPEGs(t testing.TB) []string {
	files, err := filepath.Glob(filepath.Join(progressiveDir, "*.jpg"))
	if err != nil || len(files) < 5 {
		t.Fatalf("found %d progressive JPEGs under %s (%v)", len(files), progressiveDir, err)
	}
	return append(files, filepath.Join(imagesDir, "space", "rocket.jpg"))
}

// decodeBoth decodes data at scale num/8 reading every scan, then with
// the AC scan data a 1/8 decode does not use left out.
func decodeBoth(t *testing.T, data []byte, num int) (whole, dropped *image.NRGBA, warnW, warnD string, errW, errD error) {
	t.Helper()
	w, h, ok := jpegSize(data)
	if !ok {
		t.Fatal("no JPEG frame header")
	}
	cfg := image.Config{Width: w, Height: h}
	whole, _, warnW, errW = decodeTurboScans(data, cfg, num, false)
	dropped, _, warnD, errD = decodeTurboScans(data, cfg, num, true)
	return
}

// TestDropACScans: a progressive JPEG decoded at 1/8 without the AC scan
// data of its 1×1-IDCT components gives the same bytes, from far less
// data, for grey, CMYK and every chroma subsampling.
func TestDropACScans(t *testing.T) {
	for _, f := range progressiveJPEGs(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data := readFile(t, f)
			var ids componentIDs
			s, n, ok := dcScans(data, &ids)
			if own, _ := OwnEntropy(); !own && strings.HasPrefix(filepath.Base(f), "restart") {
				// libjpeg's own decoder would warn at the missing
				// restart markers: such files are decoded whole.
				if ok {
					t.Error("AC scans of a JPEG with restart markers dropped without prep's entropy decoders")
				}
				return
			}
			if !ok {
				t.Fatal("no AC scans dropped")
			}
			t.Logf("%d components DC-only; %d of %d bytes kept", n, len(*s), len(data))
			if len(*s) > len(data)*3/4 {
				t.Errorf("kept %d of %d bytes", len(*s), len(data))
			}
			whole, dropped, warnW, warnD, errW, errD := decodeBoth(t, data, 1)
			if errW != nil || errD != nil || warnW != "" || warnD != "" {
				t.Fatalf("errors %v, %v; warnings %q, %q", errW, errD, warnW, warnD)
			}
			if !whole.Rect.Eq(dropped.Rect) || !bytes.Equal(whole.Pix, dropped.Pix) {
				t.Error("pixels differ from a decode of every scan")
			}
		})
	}
}

// TestDropACScansRefused: what dropACScans must leave whole.
func TestDropACScansRefused(t *testing.T) {
	prog := readFile(t, filepath.Join(progressiveDir, "rgb420.jpg"))
	lastScan := bytes.LastIndex(prog, []byte{0xFF, 0xDA})
	tests := []struct {
		name string
		data []byte
	}{
		{"cut off", prog[:len(prog)*9/10]},
		{"no EOI", prog[:len(prog)-2]},
		{"last scan missing", append(bytes.Clone(prog[:lastScan]), 0xFF, 0xD9)},
		{"not a JPEG", []byte("\xff\xd9\xff\xd8")},
		{"restart marker between segments", append(bytes.Clone(prog[:lastScan]), append([]byte{0xFF, 0xD0}, prog[lastScan:]...)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if out, ok := dropACScans(nil, tt.data, []byte{1}); ok {
				t.Errorf("dropped scans: %d of %d bytes kept", len(out), len(tt.data))
			}
		})
	}
	// A sequential JPEG has no AC scans of its own.
	var ids componentIDs
	if _, n, ok := dcScans(readFile(t, filepath.Join(imagesDir, "everyday", "chelsea.jpg")), &ids); ok || n != 0 {
		t.Errorf("sequential JPEG: %d components, ok %v", n, ok)
	}
	// Cut inside a dropped scan, the file fails as a whole decode does.
	_, _, _, _, errW, errD := decodeBoth(t, tests[0].data, 1)
	if errW == nil || errD == nil || errW.Error() != errD.Error() || !strings.Contains(errD.Error(), "truncated JPEG") {
		t.Errorf("cut off: %v, then %v", errW, errD)
	}
}

// FuzzDropACScans: dropACScans keeps within data and is idempotent, and
// a decode at 1/8 of what it keeps matches a decode of every scan: the
// same pixels for a file that decodes without warnings, an error for one
// that fails.
func FuzzDropACScans(f *testing.F) {
	for _, name := range []string{"rgb420.jpg", "grey.jpg", "rgb444.jpg"} {
		b, err := os.ReadFile(filepath.Join(progressiveDir, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, ids := range [][]byte{{1}, {1, 2, 3}} {
			out, ok := dropACScans(nil, b, ids)
			if !ok {
				if len(out) != 0 {
					t.Fatalf("refused, but %d bytes appended", len(out))
				}
				continue
			}
			if len(out) > len(b) || !bytes.HasPrefix(out, []byte{0xFF, 0xD8}) || !bytes.HasSuffix(out, []byte{0xFF, 0xD9}) {
				t.Fatalf("%d bytes from %d: % x ... % x", len(out), len(b), out[:2], out[len(out)-2:])
			}
			if again, ok := dropACScans(nil, out, ids); !ok || !bytes.Equal(again, out) {
				t.Fatalf("not idempotent: ok %v, %d then %d bytes", ok, len(out), len(again))
			}
		}
		w, h, ok := jpegSize(b)
		// At 1/8 the output is small; libjpeg's coefficients are not:
		// about 3 bytes a pixel.
		if !ok || checkSize(w, h, 1<<20) != nil {
			return
		}
		whole, dropped, warnW, _, errW, errD := decodeBoth(t, b, 1)
		switch {
		case errW != nil && errD == nil:
			t.Fatalf("a whole decode fails (%v), a decode without AC scans does not", errW)
		case errW == nil && warnW == "" && (errD != nil || !bytes.Equal(whole.Pix, dropped.Pix)):
			t.Fatalf("a clean whole decode differs from one without AC scans (%v)", errD)
		}
	})
}
