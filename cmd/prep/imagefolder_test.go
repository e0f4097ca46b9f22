package main

import (
	"bytes"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prep-dev/prep/internal/testenv"
)

// torchvisionCheck runs torchvision's ImageFolder on src and compares it
// with prep's shards in out (HDF5): classes, class_to_idx, and every
// sample's label by path. It prints JSON.
const torchvisionCheck = `
import json, os, sys
import h5py
from torchvision.datasets import ImageFolder
from torchvision.datasets.folder import find_classes
# Names travel as the hex of their bytes (os.fsencode), so that names
# that are not UTF-8 compare exactly.
enc = lambda s: os.fsencode(s).hex()
src, out = sys.argv[1], sys.argv[2]
res = {"find_classes": [enc(c) for c in find_classes(src)[0]]}
try:
    ds = ImageFolder(src)
    res["classes"] = [enc(c) for c in ds.classes]
    res["class_to_idx"] = {enc(c): i for c, i in ds.class_to_idx.items()}
    res["samples"] = {enc(os.path.relpath(p, src)): y for p, y in ds.samples}
except Exception as e:
    res["error"] = type(e).__name__ + ": " + str(e)
if out != "-":
    m = json.load(open(os.path.join(out, "manifest.json")))
    res["prep_classes"] = [enc(c) for c in m.get("classes", [])]
    got = {}
    for s in m["shards"]:
        with h5py.File(os.path.join(out, s["file"]), "r") as f:
            for k, y in zip(f["keys"][:], f["labels"][:]):
                got[k.hex()] = int(y)
    res["prep_samples"] = got
print(json.dumps(res))
`

type tvResult struct {
	FindClasses []string       `json:"find_classes"`
	Classes     []string       `json:"classes"`
	ClassToIdx  map[string]int `json:"class_to_idx"`
	Samples     map[string]int `json:"samples"`
	Error       string         `json:"error"`
	PrepClasses []string       `json:"prep_classes"`
	PrepSamples map[string]int `json:"prep_samples"`
}

func runTorchvision(t *testing.T, src, out string) tvResult {
	t.Helper()
	py := testenv.NeedPython(t, "torchvision", "h5py")
	cmd := exec.Command(py, "-c", torchvisionCheck, src, out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("torchvision: %v\n%s", err, stderr.String())
	}
	var r tvResult
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("torchvision output %q: %v", b, err)
	}
	return r
}

func tinyPNG(t *testing.T, path string, shade uint8) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 3))
	for i := range img.Pix {
		img.Pix[i] = shade + uint8(i)
	}
	img.Set(0, 0, color.RGBA{shade, 0, 0, 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestImageFolderAsTorchvision converts folders with prep and reads them
// with torchvision's own ImageFolder: where torchvision takes a folder,
// prep's classes, indices and every sample's label equal its; where
// torchvision refuses one, prep refuses it too, naming the folder and the
// fix, and its flag keeps find_classes' indices (issue 28).
func TestImageFolderAsTorchvision(t *testing.T) {
	tests := []struct {
		name   string
		files  []string // a name ending in / is an empty folder
		flags  []string
		tvErr  bool     // torchvision's ImageFolder refuses the folder
		refuse []string // prep's error holds each; nil: prep converts it
	}{
		{"order and nesting", []string{"B/1.png", "a/2.png", "a/sub/deep/3.png", "10/4.png", "2/5.png", "é/6.png", "\ue000/7.png", "😀/8.png", "Z z/9.png", "a/notes.txt"}, nil, false, nil},
		{"names not UTF-8", []string{"caf\xe9/1.png", "caf\xe8/2.png", "a\nb/3.png", "\xff/4.png", "\ue000/5.png", "x/\xfe\n.png"}, nil, false, nil},
		{"empty class", []string{"a/1.png", "b/", "c/2.png"}, nil, true, []string{`class folder "b" (index 1)`, "--keep-empty-classes"}},
		{"empty class kept", []string{"a/1.png", "b/", "c/2.png"}, []string{"--keep-empty-classes"}, true, nil},
		{"class of other files", []string{"a/1.png", "b/readme.md", "c/2.png"}, nil, true, []string{`class folder "b" (index 1)`, "no file prep converts (1 .md)"}},
		{"stray image", []string{"a/1.png", "b/2.png", "top.png"}, nil, false, []string{"beside the class folders", "(top.png)", "--ignore-stray-files"}},
		{"stray image left out", []string{"a/1.png", "b/2.png", "top.png", "notes.txt"}, []string{"--ignore-stray-files"}, false, nil},
		{"hidden class folder", []string{".cache/", "a/1.png", "b/2.png"}, nil, true, []string{`class folder ".cache" (index 0)`, "hidden"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "src")
			for i, f := range tt.files {
				p := filepath.Join(src, f)
				switch {
				case strings.HasSuffix(f, "/"):
					os.MkdirAll(p, 0o755)
				case strings.HasSuffix(f, ".png"):
					tinyPNG(t, p, uint8(10*i))
				default:
					os.MkdirAll(filepath.Dir(p), 0o755)
					os.WriteFile(p, []byte("not an image"), 0o644)
				}
			}
			out := filepath.Join(dir, "out")
			_, stderr, code := prepRun(t, append([]string{"convert", src, out, "--format", "hdf5"}, tt.flags...)...)
			if tt.refuse != nil {
				if code != 1 {
					t.Fatalf("prep exit %d, want 1 (refused); stderr:\n%s", code, stderr)
				}
				for _, want := range tt.refuse {
					if !strings.Contains(stderr, want) {
						t.Errorf("stderr lacks %q:\n%s", want, stderr)
					}
				}
				if _, err := os.Stat(out); err == nil {
					t.Errorf("a refused run left %s", out)
				}
				if tv := runTorchvision(t, src, "-"); (tv.Error != "") != tt.tvErr {
					t.Errorf("torchvision error %q, want one: %v", tv.Error, tt.tvErr)
				}
				return
			}
			if code != 0 {
				t.Fatalf("prep exit %d:\n%s", code, stderr)
			}
			tv := runTorchvision(t, src, out)
			if (tv.Error != "") != tt.tvErr {
				t.Fatalf("torchvision error %q, want one: %v", tv.Error, tt.tvErr)
			}
			if strings.Join(tv.PrepClasses, "\x00") != strings.Join(tv.FindClasses, "\x00") {
				t.Errorf("prep classes %q, torchvision's find_classes %q", tv.PrepClasses, tv.FindClasses)
			}
			if tv.Error != "" {
				return // torchvision has no samples to compare
			}
			for i, c := range tv.Classes {
				if tv.ClassToIdx[c] != i || i >= len(tv.PrepClasses) || tv.PrepClasses[i] != c {
					t.Errorf("class %q: torchvision index %d, prep's classes %q", c, tv.ClassToIdx[c], tv.PrepClasses)
				}
			}
			if len(tv.Samples) != len(tv.PrepSamples) {
				t.Errorf("torchvision has %d samples, prep %d: %v vs %v", len(tv.Samples), len(tv.PrepSamples), tv.Samples, tv.PrepSamples)
			}
			for k, y := range tv.Samples {
				if got, ok := tv.PrepSamples[k]; !ok || got != y {
					t.Errorf("%s: torchvision label %d, prep %d (present %v)", k, y, got, ok)
				}
			}
		})
	}
}
