package main

import (
	"archive/tar"
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prep-dev/prep/formats/manifest"
)

// TestParseRecipe: --recipe loads a .yaml/.yml/.json name as a file, even
// a missing one (to report it) or one whose name holds "=" when it exists,
// and parses anything else as the one-line form.
func TestParseRecipe(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"r.yaml":       "- resize: 256\n- hflip=0.5\n",
		"r.json":       `["resize=256", {"crop": {"size": 224, "random": true}}]`,
		"hflip=1.yaml": "- vflip=1\n",
		"bad.yml":      "- flip: 1\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in := func(name string) string { return filepath.Join(dir, name) }
	tests := []struct{ in, want, wantErr string }{
		{"", "", ""},
		{"hflip=1", "hflip=1", ""},
		{in("r.yaml"), "resize=256,hflip=0.5", ""},
		{in("r.json"), "resize=256,crop=224:random", ""},
		{in("hflip=1.yaml"), "vflip=1", ""},
		{in("bad.yml"), "", in("bad.yml") + `: op 1: recipe: unknown op "flip"`},
		{"missing.yaml", "", "missing.yaml: no such file"},
		{in("missing.json"), "", in("missing.json") + ": no such file"},
		// A one-line recipe that happens to end in .json is still parsed.
		{"hflip=0.5.json", "", "recipe: hflip=0.5.json: probability"},
	}
	for _, tt := range tests {
		r, _, err := parseRecipe(tt.in)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseRecipe(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
		case err != nil:
			t.Errorf("parseRecipe(%q): %v", tt.in, err)
		case r.String() != tt.want:
			t.Errorf("parseRecipe(%q) = %q, want %q", tt.in, r, tt.want)
		}
	}
}

// TestSplitRecipe: convert runs the ops before "|" and records the ones
// after it for the reader, in a manifest of format version 3; a manifest
// without them stays version 2; a resume with another online part is
// refused (issue 30).
func TestSplitRecipe(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "out")
	args := []string{"convert", "../../testdata/images", dst, "--recipe", "resize=40,crop=40 | crop=32:random,hflip=0.5", "--format", "png"}
	if _, stderr, code := prepRun(t, args...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	m, err := manifest.Read(dst)
	if err != nil {
		t.Fatal(err)
	}
	if m.Recipe != "resize=40,crop=40" || m.OnlineRecipe != "crop=32:random,hflip=0.5" || m.FormatVersion != 3 {
		t.Errorf("recipe %q online %q version %d", m.Recipe, m.OnlineRecipe, m.FormatVersion)
	}
	if m.DatasetID != manifest.DatasetID(m) {
		t.Errorf("dataset id %s, want %s", m.DatasetID, manifest.DatasetID(m))
	}
	// Shards hold the offline part's 40×40 samples.
	tr := tar.NewReader(bytes.NewReader(readDir(t, dst)[m.Shards[0].File]))
	hdr, err := tr.Next()
	for err == nil && !strings.HasSuffix(hdr.Name, ".png") {
		hdr, err = tr.Next()
	}
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := png.DecodeConfig(tr)
	if err != nil || cfg.Width != 40 || cfg.Height != 40 {
		t.Errorf("stored sample %dx%d (%v), want 40x40", cfg.Width, cfg.Height, err)
	}
	args[4] = "resize=40,crop=40 | crop=30:random"
	if _, stderr, code := prepRun(t, append(args, "--resume")...); code != 1 || !strings.Contains(stderr, `online recipe "crop=32:random,hflip=0.5", now "crop=30:random"`) {
		t.Errorf("resume with another online part: exit %d: %s", code, stderr)
	}
	if _, stderr, code := prepRun(t, "convert", "../../testdata/images", filepath.Join(t.TempDir(), "bad"), "--recipe", "crop=40 | blur=1"); code != exitUsage || !strings.Contains(stderr, "move it before") {
		t.Errorf("an expensive online op: exit %d: %s", code, stderr)
	}
	plain := filepath.Join(t.TempDir(), "plain")
	if _, stderr, code := prepRun(t, "convert", "../../testdata/images", plain, "--recipe", "resize=40,crop=40"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if m, err := manifest.Read(plain); err != nil || m.FormatVersion != 2 || m.OnlineRecipe != "" {
		t.Errorf("a run without online ops: version %d online %q (%v)", m.FormatVersion, m.OnlineRecipe, err)
	}
	stdout, _, _ := prepRun(t, "inspect", dst)
	if !strings.Contains(stdout, "online recipe: crop=32:random,hflip=0.5") {
		t.Errorf("inspect does not show the online recipe:\n%s", stdout)
	}
}
