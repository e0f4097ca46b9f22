package augment

import (
	"bytes"
	"encoding/json"
	"image"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// testImage returns a w x h image whose pixel (x, y) is (x, y, x^y) mod
// 256, opaque, so every crop and flip can be checked by value.
func testImage(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			i := img.PixOffset(x, y)
			img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = uint8(x), uint8(y), uint8(x^y), 255
		}
	}
	return img
}

// noiseImage returns a w x h image of uniform random opaque pixels.
func noiseImage(w, h int, seed uint64) *image.NRGBA {
	rng := rand.New(rand.NewPCG(seed, 0))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = uint8(rng.IntN(256))
		if i%4 == 3 {
			img.Pix[i] = 255
		}
	}
	return img
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

func mustParse(t testing.TB, s string) *Recipe {
	t.Helper()
	r, err := Parse(s)
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return r
}

func TestParseCanonical(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"  ", ""},
		{"resize=256,crop=224:random,hflip=0.5", "resize=256,crop=224:random,hflip=0.5"},
		{" resize = 256 , crop=224x224 ", "resize=256,crop=224"},
		{"resize=320x240", "resize=320x240"},
		{"resize=320x240:fit", "resize=320x240:fit"},
		{"resize=256x256", "resize=256x256"},
		{"crop=200x100", "crop=200x100"},
		{"resize=16384x16384:fit,crop=16384", "resize=16384x16384:fit,crop=16384"}, // the largest size allowed
		{"rrc=224", "rrc=224"},
		{"rrc=224:scale=0.08-1:ratio=0.75-1.3333333333333333", "rrc=224"},
		{"rrc=224x160:ratio=0.75-1.333:scale=0.2-1", "rrc=224x160:scale=0.2-1:ratio=0.75-1.333"},
		{"vflip=1,hflip=0", "vflip=1,hflip=0"},
		{"rotate=15.0", "rotate=15"},
		{"jitter=0.4/0.4/0.4/0.1", "jitter=0.4/0.4/0.4/0.1"},
		{"jitter=0.4", "jitter=0.4/0/0/0"},
		{"gray=0.2", "gray=0.2"},
		{"blur=0.1-2", "blur=0.1-2"},
		{"blur=1.5-1.5", "blur=1.5"},
		{"gain=-6-6", "gain=-6-6"},
		{"gain=-6--3", "gain=-6--3"},
		{"gain=3", "gain=3"},
		{"shift=0.1", "shift=0.1"},
		{"shift=0.1:roll", "shift=0.1:roll"},
		{"noise=10-30", "noise=10-30"},
		{"noise=1e1-2e1", "noise=10-20"},
	}
	for _, tt := range tests {
		r := mustParse(t, tt.in)
		if got := r.String(); got != tt.want {
			t.Errorf("Parse(%q).String() = %q, want %q", tt.in, got, tt.want)
		}
		again := mustParse(t, r.String())
		if !reflect.DeepEqual(again, r) {
			t.Errorf("Parse(%q) = %#v, round trip gives %#v", tt.in, r, again)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"flip=0.5", `recipe: unknown op "flip" (valid: resize=S|WxH|WxH:fit, crop=S|WxH[:random], rrc=`},
		{"hflip=1.5", "recipe: hflip=1.5: probability must be in [0,1]"},
		{"hflip=x", "recipe: hflip=x: probability must be in [0,1]"},
		{"hflip", "recipe: hflip needs a value (syntax: hflip=P)"},
		{"resize=256,,crop=224", "recipe: empty op"},
		{"resize=0", "recipe: resize=0: size"},
		{"resize=abc", "(syntax: resize=S|WxH|WxH:fit)"},
		{"resize=256:fit", "fit needs WxH"},
		{"resize=20x10:fill", "unknown mode fill"},
		{"crop=224:center", "unknown mode center"},
		{"crop=-3", "recipe: crop=-3: size"},
		{"rrc=224:scale=0-1", "scale must lie in (0,1]"},
		{"rrc=224:scale=0.5-0.2", "low end above high end"},
		{"rrc=224:ratio=-1-2", "ratio must be positive"},
		{"rrc=224:zoom=1", "unknown parameter zoom"},
		{"rotate=200", "degrees must be in [0,180]"},
		{"jitter=0.4/0.4/0.4/0.6", "hue must be in [0,0.5]"},
		{"jitter=1/2/3/0.1/5", "at most 4 values"},
		{"jitter=-1", "brightness must be a number >= 0"},
		{"gray=2", "recipe: gray=2: probability must be in [0,1]"},
		{"blur=0", "sigma must be a number > 0"},
		{"blur=NaN", "sigma must be a number > 0"},
		{"gain=loud", "recipe: gain=loud"},
		{"shift=-1", "seconds must be a number >= 0"},
		{"shift=1:wrap", "unknown mode wrap"},
		{"noise=x", "recipe: noise=x"},
		// Output sizes are bounded when parsed, not by running out of
		// memory mid-run.
		{"resize=99999999", `recipe: resize=99999999: size "99999999": over the limit of 16384 pixels a side`},
		{"resize=16384x16385:fit", "resize=16384x16385:fit: size \"16384x16385\": over the limit of 16384"},
		{"crop=99999", "recipe: crop=99999: size \"99999\": over the limit of 16384"},
		{"crop=224x20000:random", "recipe: crop=224x20000:random: size \"224x20000\": over the limit of 16384"},
		{"rrc=99999", "recipe: rrc=99999: size \"99999\": over the limit of 16384"},
	}
	for _, tt := range tests {
		_, err := Parse(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) error = %v, want it to contain %q", tt.in, err, tt.want)
		}
	}
	// The unknown-op message lists every op.
	_, err := Parse("zoom=2")
	for _, sp := range specs() {
		if !strings.Contains(err.Error(), sp.syntax) {
			t.Errorf("unknown-op error %q does not list %s", err, sp.syntax)
		}
	}
}

func TestParseFile(t *testing.T) {
	want := "resize=256,crop=224:random,hflip=0.5,rrc=224x160:scale=0.2-1:ratio=0.75-1.333,jitter=0.4/0.4/0.4/0.1,blur=0.1-2,resize=320x240:fit,shift=0.5:roll,gain=-6-6,noise=20"
	files := map[string]string{
		"r.yaml": `
- resize: 256
- crop: 224:random
- hflip=0.5
- rrc: {width: 224, height: 160, scale: [0.2, 1], ratio: 0.75-1.333}
- jitter: {brightness: 0.4, contrast: 0.4, saturation: 0.4, hue: 0.1}
- blur: {sigma: [0.1, 2]}
- resize: {width: 320, height: 240, fit: true}
- shift: {seconds: 0.5, roll: true}
- gain: {db: [-6, 6]}
- noise: 20
`,
		"r.json": `["resize=256", {"crop": {"size": 224, "random": true}}, {"hflip": {"p": 0.5}},
 {"rrc": "224x160:scale=0.2-1:ratio=0.75-1.333"},
 {"jitter": "0.4/0.4/0.4/0.1"}, {"blur": [0.1, 2]}, {"resize": "320x240:fit"},
 {"shift": "0.5:roll"}, {"gain": {"db": "-6-6"}}, {"noise": {"snr_db": 20}}]`,
	}
	for name, body := range files {
		r, err := ParseFile(name, []byte(body))
		if err != nil {
			t.Fatalf("ParseFile(%s): %v", name, err)
		}
		if got := r.String(); got != want {
			t.Errorf("ParseFile(%s) = %q, want %q", name, got, want)
		}
	}
}

func TestParseFileErrors(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"a.yaml", "- flip: 1\n", `op 1: recipe: unknown op "flip"`},
		{"b.yaml", "- resize: 256\n- hflip: 2\n", "op 2: recipe: hflip=2: probability must be in [0,1]"},
		{"c.yaml", "resize: 256\n", "want a list of ops"},
		{"d.json", `[{"resize": 256, "crop": 224}]`, `want one op per list element, have ["crop" "resize"]`},
		{"e.json", `[{"crop": {"size": 224, "where": "top"}}]`, `recipe: crop: unknown parameter "where" (want size, width, height, random)`},
		{"f.yaml", "- rrc: {width: 224}\n", "want size, or width and height"},
		{"g.yaml", "- hflip:\n", "recipe: hflip needs a value"},
		{"h.txt", "[]", `unknown extension ".txt"`},
		{"i.yaml", "- 3\n", `want an op such as "hflip=0.5"`},
	}
	for _, tt := range tests {
		_, err := ParseFile(tt.name, []byte(tt.body))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseFile(%s) error = %v, want it to contain %q", tt.name, err, tt.want)
		}
		// Every message names the file, so the user knows which to fix.
		if err != nil && !strings.Contains(err.Error(), tt.name+": ") {
			t.Errorf("ParseFile(%s) error = %v, want it to name the file", tt.name, err)
		}
	}
}

func TestIsRecipeFile(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"r.yaml", true},
		{"dir/r.yml", true},
		{"R.JSON", true},
		{"hflip=0.5.json", true}, // by name only: parseRecipe in cmd/prep decides
		{"r.txt", false},
		{"resize=256,crop=224", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := IsRecipeFile(tt.name); got != tt.want {
			t.Errorf("IsRecipeFile(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestMinSide(t *testing.T) {
	tests := []struct {
		recipe string
		want   int
	}{
		{"", 0},
		{"resize=256,crop=224", 256},
		{"hflip=0.5,gray=0.1,jitter=0.4,resize=160,crop=128:random", 160},
		{"gain=3,resize=96", 96},
		{"resize=320x240", 320},
		{"resize=200x300:fit", 300},
		{"rrc=224", 0},
		{"crop=224,resize=256", 0},
		{"rotate=10,resize=256", 0},
		{"blur=2,resize=256", 0},
		{"hflip=0.5", 0},
		{"noise=20", 0},
	}
	for _, tt := range tests {
		if got := mustParse(t, tt.recipe).MinSide(); got != tt.want {
			t.Errorf("MinSide(%q) = %d, want %d", tt.recipe, got, tt.want)
		}
	}
}

func TestHasOps(t *testing.T) {
	tests := []struct {
		recipe       string
		image, audio bool
	}{
		{"", false, false},
		{"resize=256", true, false},
		{"gain=-3-3,shift=0.1", false, true},
		{"hflip=0.5,noise=20", true, true},
	}
	for _, tt := range tests {
		r := mustParse(t, tt.recipe)
		if r.HasImageOps() != tt.image || r.HasAudioOps() != tt.audio {
			t.Errorf("%q: HasImageOps, HasAudioOps = %v, %v, want %v, %v", tt.recipe, r.HasImageOps(), r.HasAudioOps(), tt.image, tt.audio)
		}
	}
	var nilRecipe *Recipe
	if nilRecipe.HasImageOps() || nilRecipe.MinSide() != 0 || nilRecipe.String() != "" {
		t.Error("nil recipe is not the identity")
	}
}

func TestApplyIdentity(t *testing.T) {
	img := testImage(40, 30)
	for _, s := range []string{"", "gain=6,noise=10"} {
		out, params := mustParse(t, s).Apply(img, newRand(1))
		if out != img || len(params) != 0 {
			t.Errorf("%q: Apply returned a new image or params %v", s, params)
		}
	}
}

func TestApplyParamsRepeatedOps(t *testing.T) {
	img := testImage(40, 30)
	out, params := mustParse(t, "hflip=1,crop=20:random,hflip=1,resize=40,hflip=0").Apply(img, newRand(1))
	want := []string{"crop", "hflip", "hflip.2", "hflip.3"}
	var keys []string
	for k := range params {
		keys = append(keys, k)
	}
	if len(keys) != len(want) {
		t.Fatalf("params %v, want keys %v", params, want)
	}
	for _, k := range want {
		if _, ok := params[k]; !ok {
			t.Errorf("params %v lack %q", params, k)
		}
	}
	if params["hflip"] != true || params["hflip.2"] != true || params["hflip.3"] != false {
		t.Errorf("params %v: want flips true, true, false", params)
	}
	// The crop was cut from the mirrored image, so its left edge is at
	// 40-x-20 in the input; the second flip restores its orientation.
	c := params["crop"].([]int)
	want0 := img.NRGBAAt(40-c[0]-c[2], c[1])
	if got := out.Bounds(); got.Dx() != 40 || got.Dy() != 40 {
		t.Fatalf("output %v, want 40x40", got)
	}
	if got := out.NRGBAAt(0, 0); absDiff(got.R, want0.R) > 2 || absDiff(got.G, want0.G) > 2 {
		t.Errorf("out(0,0) = %v, want about %v", got, want0)
	}
	if _, err := json.Marshal(params); err != nil {
		t.Errorf("params are not JSON-friendly: %v", err)
	}
}

// TestOpName checks that the names params are keyed by are those of the
// ops' String, for every op.
func TestOpName(t *testing.T) {
	r := mustParse(t, fullRecipe+",gain=-6-6,shift=0.1:roll,noise=20-30")
	if len(r.ops) != 13 {
		t.Fatalf("%d ops, want 13", len(r.ops))
	}
	for _, o := range r.ops {
		if name, _, _ := strings.Cut(o.String(), "="); opName(o) != name {
			t.Errorf("opName(%s) = %q, want %q", o, opName(o), name)
		}
	}
}

func absDiff(a, b uint8) int {
	if a > b {
		return int(a - b)
	}
	return int(b - a)
}

// fullRecipe uses every image op.
const fullRecipe = "rrc=96:scale=0.3-1,resize=80,crop=64:random,hflip=0.5,vflip=0.5,rotate=20,jitter=0.4/0.4/0.4/0.1,gray=0.5,blur=0.1-2,resize=48x40:fit"

// TestApplyDeterministic checks that the same image and rng state give the
// same bytes and params, whatever GOMAXPROCS imaging fans out over, and
// that Apply leaves its input alone.
func TestApplyDeterministic(t *testing.T) {
	r := mustParse(t, fullRecipe)
	img := noiseImage(300, 200, 5)
	orig := bytes.Clone(img.Pix)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	var first []byte
	var firstParams string
	for i, procs := range []int{1, 4, 1, 8} {
		runtime.GOMAXPROCS(procs)
		out, params := r.Apply(img, newRand(42))
		p, err := json.Marshal(params)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first, firstParams = out.Pix, string(p)
			continue
		}
		if !bytes.Equal(out.Pix, first) || string(p) != firstParams {
			t.Fatalf("GOMAXPROCS=%d: output differs from the first run (params %s vs %s)", procs, p, firstParams)
		}
	}
	if !bytes.Equal(img.Pix, orig) {
		t.Error("Apply modified its input")
	}
	_, other := r.Apply(img, newRand(43))
	if p, _ := json.Marshal(other); string(p) == firstParams {
		t.Error("another seed drew the same params")
	}
}

// TestApplyDegenerate runs every image op on images with no pixels, one
// pixel and one row, which must not panic.
func TestApplyDegenerate(t *testing.T) {
	r := mustParse(t, fullRecipe+",crop=5,resize=7,rrc=3")
	for _, size := range []image.Point{{0, 0}, {1, 1}, {1, 9}, {9, 1}} {
		img := image.NewNRGBA(image.Rectangle{Max: size})
		out, _ := r.Apply(img, newRand(1))
		if out.Bounds() != image.Rect(0, 0, 3, 3) && !size.Eq(image.Point{}) {
			t.Errorf("%v: output %v, want 3x3", size, out.Bounds())
		}
	}
}

// TestUniformBits pins the bits of numbers uniform draws, as amd64 draws
// them: make cross runs it on arm64, whose compiler would fuse the
// multiply and add of an unguarded lo + (hi-lo)*u and draw other
// parameters (which tar shards record) from the same seed.
func TestUniformBits(t *testing.T) {
	want := []uint64{0x3fa7dbc4dc6edd88, 0x3fea2c3ce19ac6ca, 0x3feb70ab0653601a, 0x3fe428ad59ddc9c8, 0x3ff38bcc61a0a40e, 0x4002bd1c67892f39}
	rng := rand.New(rand.NewPCG(7, 11))
	for i, w := range want {
		if got := math.Float64bits(uniform(rng, -0.3, 0.7+float64(i)/3)); got != w {
			t.Errorf("draw %d: %#x, want %#x", i, got, w)
		}
	}
}

func TestCenterCropLead(t *testing.T) {
	tests := []struct {
		recipe      string
		short, w, h int
		rest        string
		ok          bool
	}{
		{"resize=256,crop=224", 256, 224, 224, "", true},
		{"resize=256,crop=224x200,hflip=0.5,jitter=0.2", 256, 224, 200, "hflip=0.5,jitter=0.2/0/0/0", true},
		{"resize=256,crop=256", 256, 256, 256, "", true},
		{"resize=256,crop=224:random", 0, 0, 0, "", false}, // draws: stays here
		{"resize=256,crop=300", 0, 0, 0, "", false},        // pads: stays here
		{"resize=256x200,crop=100", 0, 0, 0, "", false},    // not a shorter side
		{"hflip=0.5,resize=256,crop=224", 0, 0, 0, "", false},
		{"resize=256,crop=224,rotate=10,crop=100", 0, 0, 0, "", false}, // "crop.2" would become "crop"
		{"resize=256", 0, 0, 0, "", false},
	}
	for _, tt := range tests {
		r, err := Parse(tt.recipe)
		if err != nil {
			t.Fatal(err)
		}
		short, w, h, rest, ok := r.CenterCropLead()
		if ok != tt.ok || short != tt.short || w != tt.w || h != tt.h || ok && rest.String() != tt.rest {
			t.Errorf("%s: %d %dx%d %v %v, want %d %dx%d %q %v", tt.recipe, short, w, h, rest, ok, tt.short, tt.w, tt.h, tt.rest, tt.ok)
		}
	}
}
