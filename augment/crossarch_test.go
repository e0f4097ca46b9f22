package augment

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// recipesSHA256 is the hash of every recipe's output in TestRecipeBytes,
// as amd64 computes it. Only a deliberate change to an op's arithmetic
// changes it (then update it here, on amd64, and say why).
const recipesSHA256 = "e4f75cc43c8968082fecee3aedd6813513449fd720943212a6f5b4ee7500b7d2"

// TestRecipeBytes runs image and audio recipes of every random op from a
// fixed seed and hashes the pixels, samples and drawn parameters. make
// cross runs it on arm64, where the compiler may fuse a multiply and an
// add (FMA) that amd64 rounds apart: the dataset must not depend on the
// CPU.
func TestRecipeBytes(t *testing.T) {
	h := sha256.New()
	for i, spec := range []string{
		"resize=40,crop=32:random,hflip=0.5",
		"rrc=24:scale=0.3-1:ratio=0.75-1.33,vflip=0.5",
		"rotate=17,jitter=0.4/0.4/0.4/0.1",
		"gray=0.5,blur=0.5-2,resize=33x21:fit",
	} {
		r, err := Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		for k := range 3 {
			rng := rand.New(rand.NewPCG(uint64(i), uint64(k)))
			out, params := r.Apply(noiseImage(57+k, 45, uint64(10*i+k)), rng)
			fmt.Fprint(h, spec, out.Rect)
			for y := range out.Rect.Dy() {
				h.Write(out.Pix[y*out.Stride:][:out.Rect.Dx()*4])
			}
			js, _ := json.Marshal(params)
			h.Write(js)
		}
	}
	for i, spec := range []string{"gain=-6-6,shift=0.01:roll", "noise=10-30,gain=3"} {
		r, err := Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		pcm := make([]float32, 2*800)
		for j := range pcm {
			pcm[j] = float32(math.Sin(float64(j) / 7))
		}
		params := r.ApplyAudio(pcm, 2, 16000, rand.New(rand.NewPCG(uint64(i), 99)))
		for _, v := range pcm {
			fmt.Fprintf(h, "%x", math.Float32bits(v))
		}
		js, _ := json.Marshal(params)
		h.Write(js)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != recipesSHA256 {
		t.Errorf("recipes on %s hash to %s, want %s", runtime.GOARCH, got, recipesSHA256)
	}
}
