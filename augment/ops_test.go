package augment

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestOps checks the op table that prep help recipes and shell completion
// show: every entry is an op the parser accepts, its example parses to an
// op of that name and kind, and every op the parser accepts is listed.
func TestOps(t *testing.T) {
	ops := Ops()
	if len(ops) == 0 {
		t.Fatal("Ops() is empty")
	}
	var names []string
	for _, o := range ops {
		names = append(names, o.Name)
		if o.Syntax == "" || o.Doc == "" || o.File == "" {
			t.Errorf("%s: syntax %q, doc %q, file %q: none may be empty", o.Name, o.Syntax, o.Doc, o.File)
		}
		if !strings.HasPrefix(o.Syntax, o.Name+"=") || !strings.HasPrefix(o.Example, o.Name+"=") {
			t.Errorf("%s: syntax %q and example %q must start with %s=", o.Name, o.Syntax, o.Example, o.Name)
		}
		r, err := Parse(o.Example)
		if err != nil {
			t.Errorf("%s: example %q: %v", o.Name, o.Example, err)
			continue
		}
		if len(r.ops) != 1 || opName(r.ops[0]) != o.Name {
			t.Errorf("%s: example %q parses to %v", o.Name, o.Example, r)
			continue
		}
		if _, audio := r.ops[0].(audioOp); audio != o.Audio {
			t.Errorf("%s: Audio %v, but the parsed op is an audio op: %v", o.Name, o.Audio, audio)
		}
		if _, image := r.ops[0].(imageOp); image == o.Audio {
			t.Errorf("%s: Audio %v, but the parsed op is an image op: %v", o.Name, o.Audio, image)
		}
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Errorf("%s is listed twice", n)
		}
		seen[n] = true
	}
	// The parser's own list of valid ops, in its error for an unknown
	// op, must name exactly the listed ones.
	_, err := Parse("nosuchop=1")
	if err == nil {
		t.Fatal("Parse accepted an unknown op")
	}
	for _, o := range ops {
		if !strings.Contains(err.Error(), o.Syntax) {
			t.Errorf("the parser's list of valid ops lacks %s: %v", o.Syntax, err)
		}
	}
}

// TestShiftRecordUnits: the shift a sample got reads, in its JSON, with
// its units.
func TestShiftRecordUnits(t *testing.T) {
	pcm := stereoRamp(16000)
	params := mustParse(t, "shift=0.5").ApplyAudio(pcm, 2, 16000, newRand(3))
	b, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Shift struct {
			Frames  *int     `json:"frames"`
			Seconds *float64 `json:"seconds"`
		} `json:"shift"`
	}
	if err := json.Unmarshal(b, &got); err != nil || got.Shift.Frames == nil || got.Shift.Seconds == nil {
		t.Fatalf("params %s: want {\"shift\": {\"frames\": n, \"seconds\": s}} (%v)", b, err)
	}
	if *got.Shift.Frames == 0 || *got.Shift.Seconds != float64(*got.Shift.Frames)/16000 {
		t.Errorf("params %s: seconds must be frames / rate, and this seed shifts", b)
	}
}
