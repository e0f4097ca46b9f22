package augment

import (
	"testing"
)

// FuzzParse: Parse never panics; a recipe it accepts names no output
// size beyond MaxSide, and its String, the canonical form written to
// manifests, parses to the same ops and the same string again.
func FuzzParse(f *testing.F) {
	for _, op := range Ops() {
		f.Add(op.Example)
	}
	for _, s := range []string{
		"resize=256,crop=224:random,hflip=0.5",
		"resize=16384", "resize=16385", "resize=99999999", "crop=99999", "rrc=99999", "resize=300x16384:fit",
		"rrc=224x160:scale=1e-05-2e-05:ratio=0.5-2", "rrc=224:scale=0.08-1:ratio=0.75-1.3333333333333333",
		"gain=-6--3", "gain=-1e-05-2e-05", "jitter=0.4/0.4", "jitter=0/0/0/0.5", "blur=0x1p-2", "rotate=-0",
		" resize = 256 , crop = 224 ", "resize=256,,crop=2", "shift=0.1:roll", "noise=20-40", "crop=+5x05",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		if err != nil {
			return
		}
		for _, o := range r.ops {
			if w, h := outputSize(o); w > MaxSide || h > MaxSide || w < 0 || h < 0 {
				t.Fatalf("%q: op %s outputs %dx%d, over MaxSide %d", s, o, w, h, MaxSide)
			}
		}
		if m := r.MinSide(); m < 0 || m > MaxSide {
			t.Fatalf("%q: MinSide %d", s, m)
		}
		canon := r.String()
		r2, err := Parse(canon)
		if err != nil {
			t.Fatalf("%q: its canonical form %q is refused: %v", s, canon, err)
		}
		if len(r2.ops) != len(r.ops) {
			t.Fatalf("%q: %d ops, canonical form %q has %d", s, len(r.ops), canon, len(r2.ops))
		}
		for i := range r.ops {
			if r.ops[i] != r2.ops[i] {
				t.Fatalf("%q: op %d is %#v, from canonical form %q %#v", s, i, r.ops[i], canon, r2.ops[i])
			}
		}
		if again := r2.String(); again != canon {
			t.Fatalf("%q: canonical form %q prints as %q", s, canon, again)
		}
	})
}

// outputSize is the size an op names for its output, or 0x0 when it keeps
// the input's (or the input decides it, as resize=S does for the longer
// side).
func outputSize(o op) (w, h int) {
	switch o := o.(type) {
	case resize:
		if o.short > 0 {
			return o.short, o.short
		}
		return o.w, o.h
	case crop:
		return o.w, o.h
	case rrc:
		return o.w, o.h
	}
	return 0, 0
}
