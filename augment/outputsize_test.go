package augment

import (
	"image/color"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestOutputSize checks OutputSize against the size of what Apply really
// makes, for recipes of every geometric op and inputs of several shapes.
func TestOutputSize(t *testing.T) {
	recipes := []string{
		"", "hflip=0.5,gray=1", "resize=16", "resize=12x7", "resize=20x10:fit", "resize=16,crop=9",
		"crop=5x30", "rrc=11x6", "resize=16,rotate=10,crop=8x20,blur=1", "resize=9,resize=30", "gain=3,resize=10",
	}
	sizes := [][2]int{{40, 30}, {7, 50}, {13, 13}, {1, 3}}
	for _, text := range recipes {
		r, err := Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sizes {
			img := uniformImage(s[0], s[1], color.NRGBA{10, 20, 30, 255})
			out, _ := r.Apply(img, rand.New(rand.NewPCG(1, 2)))
			w, h, err := r.OutputSize(s[0], s[1])
			if err != nil || w != out.Rect.Dx() || h != out.Rect.Dy() {
				t.Errorf("%q on %dx%d: OutputSize %dx%d (%v), Apply made %dx%d", text, s[0], s[1], w, h, err, out.Rect.Dx(), out.Rect.Dy())
			}
		}
	}
}

// TestOutputSizeLimit: a resize=S that would make a side longer than
// MaxSide is refused with a message that names the op, both sizes and
// the fix, and nothing is allocated to find out.
func TestOutputSizeLimit(t *testing.T) {
	for _, tc := range []struct {
		recipe string
		w, h   int
		want   string // "" when allowed
	}{
		{"resize=256", 1, 20000, "resize=256 would make this 1×20000 image 256×5120000 (1.3 Gpx), over the 16384-pixel side limit: crop it first"},
		{"resize=256", 20000, 1, "5120000×256"},
		{"resize=256", 1, 64, ""}, // 256×16384: at the limit
		{"resize=256", 1, 65, "256×16640 (4.3 Mpx)"},
		{"hflip=1,resize=256,crop=224", 2, 6000, "256×768000 (196.6 Mpx)"}, // a crop after the resize comes too late
		{"crop=2x100,resize=256", 2, 6000, ""},                             // one before it bounds the aspect ratio
		{"resize=256x256", 1, 20000, ""},
		{"resize=256x256:fit", 1, 20000, ""},
		{"rrc=224", 1, 20000, ""},
		{"resize=16384", 2, 3, "16384×24576"},
		{"resize=8,resize=16384", 3, 2, "resize=16384 would make this 12×8 image 24576×16384"},
	} {
		r, err := Parse(tc.recipe)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = r.OutputSize(tc.w, tc.h)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%q on %dx%d: %v, want %q", tc.recipe, tc.w, tc.h, err, tc.want)
		}
		if tc.want == "" {
			if n := testing.AllocsPerRun(10, func() { r.OutputSize(tc.w, tc.h) }); n != 0 {
				t.Errorf("%q: OutputSize allocated %v times", tc.recipe, n)
			}
		}
	}
	var nilRecipe *Recipe
	if w, h, err := nilRecipe.OutputSize(3, 4); w != 3 || h != 4 || err != nil {
		t.Errorf("nil recipe: %dx%d, %v", w, h, err)
	}
}
