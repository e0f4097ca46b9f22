package formattest_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/formattest"
	"github.com/prep-dev/prep/formats/hdf5"
	"github.com/prep-dev/prep/formats/manifest"
	"github.com/prep-dev/prep/formats/tarshard"
)

var update = flag.Bool("update", false, "rewrite testdata/golden with this build's writers (after a deliberate format change, with manifest.FormatVersion bumped)")

// goldenDir is testdata/golden at the repository's root.
var goldenDir = filepath.Join("..", "..", "testdata", "golden")

// goldens are the shards kept in testdata/golden: one folder per format
// and case, named FORMAT-CASE.
var goldens = []struct {
	format formats.ReadWriteFormat
	caps   formattest.Caps
	cases  []string
}{
	{hdf5.Format{}, formattest.Caps{Images: true, Ragged: true, Groups: true, Audio: true}, []string{"images", "ragged", "npz group", "audio int16"}},
	{tarshard.PNG(), formattest.Caps{Images: true, Extra: true, Clips: true, Params: true, FieldName: tarName}, []string{"images", "extra fields", "clips"}},
	{tarshard.WAV(), formattest.Caps{Audio: true, Params: true}, []string{"audio int16", "audio float32"}},
}

// tarName is the name a field reads back under from a tar shard: its
// member's (see tarshard's package comment).
func tarName(name string) string { return name[strings.LastIndexByte(name, '/')+1:] }

func goldenName(format, c string) string { return format + "-" + strings.ReplaceAll(c, " ", "-") }

// TestGolden checks that today's writers write the golden shards byte for
// byte, manifest included, and that today's readers read them back as the
// samples they were made of. The Python reader reads the same folders
// (python/tests/test_golden.py).
func TestGolden(t *testing.T) {
	known := map[string]bool{"README.md": true}
	for _, g := range goldens {
		for _, c := range formattest.Cases(g.caps) {
			if !slices.Contains(g.cases, c.Name) {
				continue
			}
			name := goldenName(g.format.Name(), c.Name)
			known[name] = true
			t.Run(name, func(t *testing.T) { golden(t, g.format, g.caps, name, c.Samples) })
		}
	}
	entries, err := os.ReadDir(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !known[e.Name()] {
			t.Errorf("%s: no test makes it; remove it", filepath.Join(goldenDir, e.Name()))
		}
	}
}

func golden(t *testing.T, f formats.ReadWriteFormat, caps formattest.Caps, name string, samples []formats.Sample) {
	dir := t.TempDir()
	_, info := formattest.WriteShard(t, f, dir, samples)
	m := &manifest.Manifest{
		Version: formattest.Meta.Version, Format: f.Name(),
		Recipe: formattest.Meta.Recipe, Seed: formattest.Meta.Seed, Copies: 1, Order: "sorted",
		Classes: formattest.Meta.Classes, Items: len(samples), ItemsPerShard: len(samples), ShardCount: 1,
		Shards: []manifest.Shard{{Index: 0, ShardInfo: info}},
	}
	m.FormatVersion = manifest.WriteVersion(m) // goldens have no online recipe: version 2
	m.Totals()
	m.DatasetID = manifest.DatasetID(m)
	if err := manifest.Write(dir, m); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(goldenDir, name)
	if *update {
		os.RemoveAll(want)
		if err := os.CopyFS(want, os.DirFS(dir)); err != nil {
			t.Fatal(err)
		}
	}
	for _, file := range []string{info.File, manifest.FileName} {
		got, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		old, err := os.ReadFile(filepath.Join(want, file))
		if err != nil {
			t.Fatalf("%v: make the goldens with go test ./formats/formattest -run Golden -update", err)
		}
		if !bytes.Equal(got, old) {
			t.Errorf("%s: today's writer writes other bytes than the golden (%d vs %d bytes). A deliberate format change bumps manifest.FormatVersion and rewrites the goldens (go test ./formats/formattest -run Golden -update); otherwise the writer broke the format", filepath.Join(want, file), len(got), len(old))
		}
	}
	// Today's reader reads the golden file, with its manifest's layout
	// and with the file's own.
	gm, err := manifest.Read(want)
	if err != nil {
		t.Fatal(err)
	}
	if v := manifest.WriteVersion(gm); gm.FormatVersion != v {
		t.Errorf("%s is format version %d, this prep writes %d: rewrite the goldens", want, gm.FormatVersion, v)
	}
	for _, layout := range [][]formats.DatasetInfo{gm.Shards[0].Datasets, nil} {
		r, err := f.Open(filepath.Join(want, gm.Shards[0].File), layout)
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		for s, err := range r.Samples() {
			if err != nil {
				t.Fatal(err)
			}
			if i >= len(samples) {
				t.Fatalf("more than the %d samples written", len(samples))
			}
			if d := formattest.Diff(caps, &samples[i], s); d != "" {
				t.Errorf("sample %d: %s", i, d)
			}
			i++
		}
		r.Close()
		if i != len(samples) {
			t.Errorf("read %d samples, wrote %d", i, len(samples))
		}
	}
}
