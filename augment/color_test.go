package augment

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/disintegration/imaging"

	"github.com/prep-dev/prep/internal/testenv"
)

// pilScript applies Pillow's ImageEnhance (what torchvision's ColorJitter
// calls on PIL images) and convert("L") to the image in argv[1], writing
// the raw RGB results one after another.
const pilScript = `
import sys
from PIL import Image, ImageEnhance
img = Image.open(sys.argv[1]).convert("RGB")
out = sys.stdout.buffer
for arg in sys.argv[2:]:
    kind, f = arg.split(":")
    if kind == "gray":
        res = img.convert("L").convert("RGB")
    else:
        enh = {"brightness": ImageEnhance.Brightness, "contrast": ImageEnhance.Contrast,
               "saturation": ImageEnhance.Color}[kind]
        res = enh(img).enhance(float(f))
    out.write(res.tobytes())
`

// TestColorMatchesPillow compares brightness, contrast, saturation and
// grayscale with Pillow byte for byte.
func TestColorMatchesPillow(t *testing.T) {
	py := testenv.NeedPython(t, "PIL")
	img := noiseImage(64, 48, 11)
	// Mid-grey patches make contrast's mean and the blends less extreme.
	for i := 0; i < len(img.Pix)/2; i += 4 {
		for c := range 3 {
			img.Pix[i+c] = 100 + img.Pix[i+c]/4
		}
	}
	path := filepath.Join(t.TempDir(), "in.png")
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		arg string
		f   func(*image.NRGBA)
	}{
		{"brightness:0.6", func(m *image.NRGBA) { brightness(m, 0.6) }},
		{"brightness:1.37", func(m *image.NRGBA) { brightness(m, 1.37) }},
		{"brightness:0", func(m *image.NRGBA) { brightness(m, 0) }},
		{"brightness:0.9123456", func(m *image.NRGBA) { brightness(m, 0.9123456) }},
		{"contrast:0.6", func(m *image.NRGBA) { contrast(m, 0.6) }},
		{"contrast:1.4", func(m *image.NRGBA) { contrast(m, 1.4) }},
		{"contrast:1.0731", func(m *image.NRGBA) { contrast(m, 1.0731) }},
		{"saturation:0.55", func(m *image.NRGBA) { saturation(m, 0.55) }},
		{"saturation:1.9", func(m *image.NRGBA) { saturation(m, 1.9) }},
		{"gray:1", func(m *image.NRGBA) {
			m2, _ := gray{1}.applyImage(m, newRand(1))
			copy(m.Pix, m2.Pix)
		}},
	}
	args := []string{"-c", pilScript, path}
	for _, tt := range tests {
		args = append(args, tt.arg)
	}
	cmd := exec.Command(py, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("pillow: %v\n%s", err, stderr.String())
	}
	n := 64 * 48 * 3
	if len(got) != n*len(tests) {
		t.Fatalf("pillow wrote %d bytes, want %d", len(got), n*len(tests))
	}
	for i, tt := range tests {
		m := imaging.Clone(img)
		tt.f(m)
		want := got[i*n : (i+1)*n]
		diff := 0
		for p := range 64 * 48 {
			for c := range 3 {
				if m.Pix[p*4+c] != want[p*3+c] {
					diff++
				}
			}
		}
		if diff > 0 {
			t.Errorf("%s: %d of %d values differ from Pillow", tt.arg, diff, n)
		}
	}
}

func TestGray(t *testing.T) {
	// PIL's L of the primaries: 0.299, 0.587, 0.114 of 255, rounded.
	tests := []struct {
		in   color.NRGBA
		want uint8
	}{
		{color.NRGBA{255, 0, 0, 255}, 76},
		{color.NRGBA{0, 255, 0, 255}, 150},
		{color.NRGBA{0, 0, 255, 255}, 29},
		{color.NRGBA{255, 255, 255, 255}, 255},
		{color.NRGBA{10, 200, 180, 128}, 141}, // 140.91
	}
	for _, tt := range tests {
		img := uniformImage(3, 2, tt.in)
		out, params := mustParse(t, "gray=1").Apply(img, newRand(1))
		want := color.NRGBA{tt.want, tt.want, tt.want, tt.in.A}
		if got := out.NRGBAAt(2, 1); got != want || params["gray"] != true {
			t.Errorf("gray of %v = %v (params %v), want %v", tt.in, got, params, want)
		}
	}
	img := uniformImage(3, 2, teal)
	if out, params := mustParse(t, "gray=0").Apply(img, newRand(1)); out != img || params["gray"] != false {
		t.Errorf("gray=0 changed the image (params %v)", params)
	}
}

func TestHue(t *testing.T) {
	tests := []struct {
		in    color.NRGBA
		shift float64
		want  color.NRGBA
	}{
		{color.NRGBA{255, 0, 0, 255}, 1.0 / 3, color.NRGBA{0, 255, 0, 255}},
		{color.NRGBA{255, 0, 0, 255}, -1.0 / 3, color.NRGBA{0, 0, 255, 255}},
		{color.NRGBA{255, 0, 0, 255}, 0.5, color.NRGBA{0, 255, 255, 255}},
		{color.NRGBA{200, 100, 50, 255}, 1.0 / 6, color.NRGBA{150, 200, 50, 255}},
		{color.NRGBA{90, 90, 90, 7}, 0.3, color.NRGBA{90, 90, 90, 7}}, // grey has no hue
	}
	for _, tt := range tests {
		img := uniformImage(2, 2, tt.in)
		hue(img, tt.shift)
		if got := img.NRGBAAt(1, 1); got != tt.want {
			t.Errorf("hue(%v, %.3f) = %v, want %v", tt.in, tt.shift, got, tt.want)
		}
	}
	// A zero shift gives back every color.
	img := noiseImage(128, 128, 2)
	orig := bytes.Clone(img.Pix)
	hue(img, 0)
	if !bytes.Equal(img.Pix, orig) {
		t.Error("hue(0) changed colors")
	}
}

// TestJitter checks the draws (ranges, order) and that the output is the
// adjustments applied in the reported order with the reported factors.
func TestJitter(t *testing.T) {
	img := noiseImage(32, 24, 8)
	tests := []struct {
		recipe string
		keys   []string
		lo, hi [4]float64
	}{
		{"jitter=0.4/0.4/0.4/0.1", []string{"brightness", "contrast", "saturation", "hue"},
			[4]float64{0.6, 0.6, 0.6, -0.1}, [4]float64{1.4, 1.4, 1.4, 0.1}},
		{"jitter=1.5/0/0.2", []string{"brightness", "saturation"},
			[4]float64{0, 0, 0.8, 0}, [4]float64{2.5, 0, 1.2, 0}},
		{"jitter=0/0/0/0.5", []string{"hue"}, [4]float64{0, 0, 0, -0.5}, [4]float64{0, 0, 0, 0.5}},
	}
	adjust := map[string]func(*image.NRGBA, float64){
		"brightness": brightness, "contrast": contrast, "saturation": saturation, "hue": hue,
	}
	for _, tt := range tests {
		r := mustParse(t, tt.recipe)
		orders := map[string]bool{}
		for seed := range uint64(30) {
			out, all := r.Apply(img, newRand(seed))
			p := all["jitter"].(map[string]any)
			order := p["order"].([]string)
			if len(order) != len(tt.keys) || len(p) != len(tt.keys)+1 {
				t.Fatalf("%s: params %v, want %v and order", tt.recipe, p, tt.keys)
			}
			orders[strings.Join(order, " ")] = true
			want := imaging.Clone(img)
			for _, name := range order {
				f := p[name].(float64)
				i := map[string]int{"brightness": 0, "contrast": 1, "saturation": 2, "hue": 3}[name]
				if f < tt.lo[i] || f > tt.hi[i] {
					t.Fatalf("%s: %s = %v outside [%v, %v]", tt.recipe, name, f, tt.lo[i], tt.hi[i])
				}
				adjust[name](want, f)
			}
			if !bytes.Equal(out.Pix, want.Pix) {
				t.Fatalf("%s seed %d: output is not %v applied in order", tt.recipe, seed, order)
			}
		}
		if want := min(6, len(tt.keys)); len(orders) < want {
			t.Errorf("%s: %d distinct orders in 30 draws", tt.recipe, len(orders))
		}
	}
}

func TestBlur(t *testing.T) {
	// A uniform image stays uniform, whatever sigma.
	img := uniformImage(20, 10, teal)
	out, params := mustParse(t, "blur=0.5-3").Apply(img, newRand(3))
	if s := params["blur"].(float64); s < 0.5 || s > 3 {
		t.Errorf("sigma %v outside [0.5, 3]", s)
	}
	for y := range 10 {
		for x := range 20 {
			if got := out.NRGBAAt(x, y); got != teal {
				t.Fatalf("blurred uniform image has %v at (%d,%d)", got, x, y)
			}
		}
	}
	// A white dot spreads symmetrically, keeping its peak in the middle.
	dot := uniformImage(21, 21, opaqueBlack)
	dot.SetNRGBA(10, 10, color.NRGBA{255, 255, 255, 255})
	out, params = mustParse(t, "blur=1").Apply(dot, newRand(3))
	if len(params) != 0 {
		t.Errorf("fixed sigma reported %v", params)
	}
	c, n, e := out.NRGBAAt(10, 10).R, out.NRGBAAt(10, 9).R, out.NRGBAAt(11, 10).R
	if !(c > n && n > 0 && n == e && out.NRGBAAt(9, 10).R == e && out.NRGBAAt(0, 0).R == 0) {
		t.Errorf("blurred dot: center %d, neighbors %d %d, corner %d", c, n, e, out.NRGBAAt(0, 0).R)
	}
	if want := imaging.Blur(dot, 1); !bytes.Equal(out.Pix, want.Pix) {
		t.Error("blur=1 differs from imaging.Blur(img, 1)")
	}
}
