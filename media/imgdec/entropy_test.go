//go:build cgo && !noprepentropy

package imgdec

import (
	"bytes"
	"image"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// decodeEntropy decodes data at scale num/8 with prep's entropy decoders
// (own), as a convert does (dropping the scans dcScans drops at 1/8), or
// with libjpeg's, reading every scan.
func decodeEntropy(t testing.TB, data []byte, num int, own bool) (*image.NRGBA, string, error) {
	t.Helper()
	w, h, ok := jpegSize(data)
	if !ok {
		t.Fatal("no JPEG frame header")
	}
	img, _, warn, err := decodeTurboWith(data, image.Config{Width: w, Height: h}, num, own, own)
	return img, warn, err
}

// sameDecode reports how the two entropy decoders' results for data differ,
// or "" when pixels, warning and error are the same. At 1/8, where prep's
// decode drops AC scans it does not need, damage only in those scans
// leaves prep without libjpeg's warning (and the pixels as they are).
func sameDecode(t testing.TB, data []byte, num int) string {
	t.Helper()
	a, warnA, errA := decodeEntropy(t, data, num, true)
	b, warnB, errB := decodeEntropy(t, data, num, false)
	defer func() {
		if a != nil {
			Release(a)
		}
		if b != nil {
			Release(b)
		}
	}()
	switch {
	case (errA == nil) != (errB == nil) || errA != nil && errA.Error() != errB.Error():
		return "errors: prep " + errString(errA) + ", libjpeg " + errString(errB)
	case errA != nil:
		return ""
	case warnA != warnB && !(num == 1 && warnA == ""):
		return "warnings: prep " + warnA + ", libjpeg " + warnB
	case !a.Rect.Eq(b.Rect) || !bytes.Equal(a.Pix, b.Pix):
		return "pixels differ"
	}
	return ""
}

func errString(err error) string {
	if err == nil {
		return "none"
	}
	return err.Error()
}

// jpegSet returns the test JPEGs of one kind, progressive or sequential,
// and those of that kind under PREP_JPEG_DIR when set
// (scripts/benchphotos.py's, say). The progressive ones have every
// component layout and restart intervals of 1, 5 and 7 MCUs; the
// sequential ones those too, CMYK and YCCK, and one of a scan per
// component.
func jpegSet(t testing.TB, progressive bool) [][]byte {
	var files []string
	if progressive {
		files = progressiveJPEGs(t)
	} else {
		for _, pattern := range []string{
			"../../testdata/sequential/*.jpg", imagesDir + "/*/*.jpg", "../../testdata/edge/*.jpg",
		} {
			m, err := filepath.Glob(pattern)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, m...)
		}
	}
	if dir := os.Getenv("PREP_JPEG_DIR"); dir != "" {
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(strings.ToLower(p), ".jpg") {
				files = append(files, p)
			}
			return nil
		})
	}
	var datas [][]byte
	for _, f := range files {
		data := readFile(t, f)
		if _, _, ok := jpegSize(data); ok && isProgressive(data) == progressive {
			// Well-formed ones only: libjpeg decodes them without a warning.
			if img, _, warn, err := decodeTurboWith(data, cfgOf(data), 8, false, false); err == nil {
				Release(img)
				if warn == "" {
					datas = append(datas, data)
				}
			}
		}
	}
	if len(datas) < 9 {
		t.Fatalf("%d JPEGs (progressive %v) among %d files", len(datas), progressive, len(files))
	}
	return datas
}

// cfgOf returns the size in data's frame header.
func cfgOf(data []byte) image.Config {
	w, h, _ := jpegSize(data)
	return image.Config{Width: w, Height: h}
}

// refineModes runs f with AC refinement scans decoded each way this CPU
// can: with the bit-count search everywhere, with PDEP where it is fast.
func refineModes(t *testing.T, f func(t *testing.T)) {
	modes := []bool{false}
	if fastPdep() {
		modes = append(modes, true)
	}
	for _, pdep := range modes {
		t.Run(map[bool]string{false: "count", true: "pdep"}[pdep], func(t *testing.T) {
			was := usePdep(pdep)
			defer usePdep(was)
			f(t)
		})
	}
}

// entropyKinds are the two kinds of JPEG prep decodes with its own
// entropy decoders: how many times each decoder ran, and how to run a
// test with each way of decoding that kind (the refinement scans have
// two).
var entropyKinds = []struct {
	name        string
	progressive bool
	installs    func() uint64
	modes       func(t *testing.T, f func(t *testing.T))
}{
	{"progressive", true, phuffInstalls, refineModes},
	{"sequential", false, seqInstalls, func(t *testing.T, f func(t *testing.T)) { f(t) }},
}

// TestEntropySameCoefficients: prep's entropy decoders give libjpeg's
// pixels at every scale (at 1/8 libjpeg keeps only DC coefficients), for
// progressive JPEGs and sequential ones of one scan or several, without
// giving up on any.
func TestEntropySameCoefficients(t *testing.T) {
	for _, kind := range entropyKinds {
		t.Run(kind.name, func(t *testing.T) {
			datas := jpegSet(t, kind.progressive)
			kind.modes(t, func(t *testing.T) {
				before, retries := kind.installs(), entropyRetries()
				for i, data := range datas {
					for _, num := range []int{8, 4, 2, 1} {
						if d := sameDecode(t, data, num); d != "" {
							t.Errorf("JPEG %d at %d/8: %s", i, num, d)
						}
					}
				}
				if got, want := kind.installs()-before, uint64(4*len(datas)); got != want {
					t.Errorf("prep's decoder ran %d times, want %d", got, want)
				}
				if n := entropyRetries() - retries; n != 0 {
					t.Errorf("prep's decoder gave up on %d well-formed JPEGs", n)
				}
			})
		})
	}
}

// TestEntropyDamaged: on damaged data prep's decode gives libjpeg's pixels,
// warning or error — whether the damage is in Huffman codes, in a restart
// interval, a marker out of place or the end — by giving up at the first
// sign of damage for libjpeg's decoder to start again; progressive and
// sequential JPEGs alike.
func TestEntropyDamaged(t *testing.T) {
	seeds := map[string][]string{
		"progressive": {"progressive/rgb420.jpg", "progressive/restart7.jpg", "progressive/restart1.jpg", "progressive/grey.jpg"},
		"sequential":  {"sequential/restart7.jpg", "sequential/restart1.jpg", "sequential/noninterleaved.jpg", "images/everyday/camera.jpg"},
	}
	type damage struct {
		name string
		fn   func(data []byte, at int) []byte
	}
	damages := []damage{
		{"flip", func(d []byte, at int) []byte { d[at] ^= 0x5A; return d }},
		{"zero", func(d []byte, at int) []byte { d[at], d[at+1] = 0, 0; return d }},
		{"ones", func(d []byte, at int) []byte { d[at], d[at+1] = 0xFE, 0xFE; return d }},
		{"rst", func(d []byte, at int) []byte { d[at], d[at+1] = 0xFF, 0xD3; return d }},
		{"eoi", func(d []byte, at int) []byte { d[at], d[at+1] = 0xFF, 0xD9; return d }},
		{"cut", func(d []byte, at int) []byte { return d[:at] }},
		{"gap", func(d []byte, at int) []byte { return append(d[:at:at], d[at+40:]...) }},
	}
	for _, kind := range entropyKinds {
		t.Run(kind.name, func(t *testing.T) {
			kind.modes(t, func(t *testing.T) {
				retries := entropyRetries()
				for _, f := range seeds[kind.name] {
					seed := readFile(t, filepath.Join("../../testdata", f))
					start := bytes.Index(seed, []byte{0xFF, 0xDA})
					for _, dm := range damages {
						for at := start + 20; at+60 < len(seed); at += 397 {
							data := dm.fn(bytes.Clone(seed), at)
							for _, num := range []int{8, 2, 1} {
								if d := sameDecode(t, data, num); d != "" {
									t.Errorf("%s, %s at %d, %d/8: %s", f, dm.name, at, num, d)
								}
							}
						}
					}
				}
				if entropyRetries() == retries {
					t.Error("prep's decoder never gave up on a damaged JPEG")
				}
			})
		})
	}
}

// isProgressive reports whether data's first frame header is SOF2.
func isProgressive(data []byte) bool {
	for i := 2; i+4 <= len(data); {
		if data[i] != 0xFF {
			return false
		}
		m := data[i+1]
		switch {
		case m == 0xC2:
			return true
		case m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC:
			return false
		}
		i += 2 + (int(data[i+2])<<8 | int(data[i+3]))
	}
	return false
}

// BenchmarkEntropy decodes the progressive and the sequential test JPEGs,
// and those of PREP_JPEG_DIR, at the scale a resize to 256 picks, with
// prep's entropy decoders and with libjpeg's.
func BenchmarkEntropy(b *testing.B) {
	for _, c := range []struct {
		name        string
		progressive bool
		own         bool
	}{
		{"progressive/prep", true, true}, {"progressive/libjpeg", true, false},
		{"sequential/prep", false, true}, {"sequential/libjpeg", false, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			datas := jpegSet(b, c.progressive)
			b.ResetTimer()
			for b.Loop() {
				for _, data := range datas {
					w, h, _ := jpegSize(data)
					img, _, _, err := decodeTurboWith(data, image.Config{Width: w, Height: h}, scaleFor(w, h, 256, 0), false, c.own)
					if err != nil {
						b.Fatal(err)
					}
					Release(img)
				}
			}
		})
	}
}

// FuzzProgressive checks prep's progressive entropy decoder against
// libjpeg's on whatever progressive JPEG the fuzzer makes: the same
// pixels, warning and error (sameDecode), at full size and scaled. Its
// seeds, under testdata/fuzz, are small progressive JPEGs by Pillow (the
// fuzzer mutates large inputs slowly); the damaged-file test covers the
// larger ones with restart markers.
func FuzzProgressive(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		w, h, ok := jpegSize(b)
		if !ok || !isProgressive(b) || w*h > 4*fuzzMaxPixels {
			return
		}
		for _, num := range []int{8, 2, 1} {
			if d := sameDecode(t, b, num); d != "" {
				t.Fatalf("%dx%d at %d/8: %s", w, h, num, d)
			}
		}
	})
}

// FuzzSequential is FuzzProgressive for sequential JPEGs (prep's shuff.h
// against libjpeg's jdhuff.c); its seeds are small baseline JPEGs by
// Pillow.
func FuzzSequential(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		w, h, ok := jpegSize(b)
		if !ok || isProgressive(b) || w*h > 4*fuzzMaxPixels {
			return
		}
		for _, num := range []int{8, 2, 1} {
			if d := sameDecode(t, b, num); d != "" {
				t.Fatalf("%dx%d at %d/8: %s", w, h, num, d)
			}
		}
	})
}
