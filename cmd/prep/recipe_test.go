package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		r, err := parseRecipe(tt.in)
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
