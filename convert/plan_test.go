package convert

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/manifest"
)

func TestParseInputList(t *testing.T) {
	dir := t.TempDir()
	src := cloudsrc.Dir{Root: dir}
	open := func(uri string) (cloudsrc.Source, string, error) { return src, uri, nil }
	isImage := func(k string) bool { return strings.HasSuffix(k, ".png") || strings.HasSuffix(k, ".jpg") }
	tests := []struct {
		name, file, body string
		keys             []string
		labels           []int64
		classes          []string
		ignored          []string
		err              string
	}{
		{"csv names", "in.csv", "path,label\nb.jpg,dog\na.jpg,cat\nc.jpg,dog\n",
			[]string{"a.jpg", "b.jpg", "c.jpg"}, []int64{0, 1, 1}, []string{"cat", "dog"}, nil, ""},
		{"csv ints", "in.csv", "x/1.png,3\nx/0.png,7\n", []string{"x/0.png", "x/1.png"}, []int64{7, 3}, nil, nil, ""},
		{"csv no labels", "in.csv", "z.png\ny.png\n", []string{"y.png", "z.png"}, []int64{-1, -1}, nil, nil, ""},
		{"jsonl", "in.jsonl", `{"path": "b.png", "label": "x"}` + "\n\n" + `{"uri": "a.png", "label": "y"}` + "\n",
			[]string{"a.png", "b.png"}, []int64{1, 0}, []string{"x", "y"}, nil, ""},
		{"jsonl int labels", "in.jsonl", `{"path": "a.png", "label": 2}` + "\n", []string{"a.png"}, []int64{2}, nil, nil, ""},
		{"jsonl bad line", "in.jsonl", `{"path": "a.png"}` + "\nnot json\n", nil, nil, nil, nil, "in.jsonl:2"},
		{"duplicate", "in.csv", "a.png,1\na.png,2\n", nil, nil, nil, nil, "twice"},
		{"empty", "in.csv", "path,label\n", nil, nil, nil, nil, "lists no inputs"},
		// Files no handler takes are ignored, as a folder scan does, and
		// their labels number no class.
		{"unsupported", "in.csv", "path,label\nREADME,x\nb.png,dog\nanim.gif,cat\na.jpg,dog\n",
			[]string{"a.jpg", "b.png"}, []int64{0, 0}, []string{"dog"}, []string{"README", "anim.gif"}, ""},
		{"only unsupported", "in.jsonl", `{"path": "notes.txt"}` + "\n", nil, nil, nil, []string{"notes.txt"}, ""},
		// A mix of integer labels and names would renumber the integers:
		// the first label of the rarer kind is named, with its line.
		{"mixed, one name", "in.csv", "path,label\na.png,4\nb.png,cat\nc.png,2\nd.png,dog\ne.png,1\n",
			nil, nil, nil, nil, `in.csv:3: label "cat" is a class name, but 3 other labels are integers: use all integers`},
		{"mixed, one integer", "in.jsonl", `{"path": "a.png", "label": "cat"}` + "\n" + `{"path": "b.png", "label": "dog"}` + "\n" + `{"path": "c.png", "label": 4}` + "\n",
			nil, nil, nil, nil, `in.jsonl:3: label "4" is an integer, but 2 other labels are class names`},
		{"mixed, a tie names the later kind", "in.csv", "a.png,cat\nb.png,4\n", nil, nil, nil, nil, `in.csv:2: label "4" is an integer`},
		// Lists as the standard libraries read them (issue 28).
		{"csv bom header", "in.csv", "\ufeffpath,label\r\na.png,cat\r\n", []string{"a.png"}, []int64{0}, []string{"cat"}, nil, ""},
		{"csv quoted comma and quote", "in.csv", "\"x,\"\"y\"\".png\",\"big, cat\"\n", []string{`x,"y".png`}, []int64{0}, []string{"big, cat"}, nil, ""},
		{"csv float labels", "in.csv", "a.png,10.0\nb.png,2.0\nc.png,3\n", []string{"a.png", "b.png", "c.png"}, []int64{10, 2, 3}, nil, nil, ""},
		{"csv fraction", "in.csv", "a.png,1\nb.png,2.5\n", nil, nil, nil, nil, `in.csv:2: label "2.5" is a number but not a class index`},
		{"csv negative", "in.csv", "a.png,-1\n", nil, nil, nil, nil, `in.csv:1: label "-1" is negative`},
		{"csv nan", "in.csv", "a.png,NaN\n", nil, nil, nil, nil, `label "NaN" is a number but not a class index`},
		{"jsonl bom float", "in.jsonl", "\ufeff" + `{"path": "a.png", "label": 10.0}` + "\n" + `{"path": "b.png", "label": 2}` + "\n", []string{"a.png", "b.png"}, []int64{10, 2}, nil, nil, ""},
		{"jsonl multi-label", "in.jsonl", `{"path": "a.png", "label": 1}` + "\n" + `{"path": "b.png", "label": [3, 7]}` + "\n", nil, nil, nil, nil, "in.jsonl:2: label [3, 7] is a list"},
		{"jsonl object label", "in.jsonl", `{"path": "a.png", "label": {"c": 1}}` + "\n", nil, nil, nil, nil, "in.jsonl:1: label"},
		{"jsonl surrogateescape", "in.jsonl", `{"path": "caf\udce9.png", "label": "caf\udce8"}` + "\n", []string{"caf\xe9.png"}, []int64{0}, []string{"caf\xe8"}, nil, ""},
		{"jsonl null label", "in.jsonl", `{"path": "a.png", "label": null}` + "\n", []string{"a.png"}, []int64{-1}, nil, nil, ""},
		{"txt paths with commas and spaces", "in.txt", "a, b.png\n# comment\n\nmy photo.jpg\r\n", []string{"a, b.png", "my photo.jpg"}, []int64{-1, -1}, nil, nil, ""},
		{"txt caffe labels", "in.txt", "n01/x 1.png 3\nn02/y.png\t0\n", []string{"n01/x 1.png", "n02/y.png"}, []int64{3, 0}, nil, nil, ""},
		{"txt names", "in.txt", "a.png dog\nb.png cat\n", []string{"a.png", "b.png"}, []int64{1, 0}, []string{"cat", "dog"}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ParseInputList(tt.file, []byte(tt.body), open, isImage)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(l.Classes, ",") != strings.Join(tt.classes, ",") {
				t.Errorf("classes %v, want %v", l.Classes, tt.classes)
			}
			var ignored []string
			for _, s := range l.Ignored {
				ignored = append(ignored, s.Key)
			}
			if strings.Join(ignored, ",") != strings.Join(tt.ignored, ",") {
				t.Errorf("ignored %v, want %v", ignored, tt.ignored)
			}
			if len(l.Entries) != len(tt.keys) {
				t.Fatalf("%d entries, want %d", len(l.Entries), len(tt.keys))
			}
			for i, e := range l.Entries {
				if e.Key != tt.keys[i] || e.Label != tt.labels[i] {
					t.Errorf("entry %d = %s/%d, want %s/%d", i, e.Key, e.Label, tt.keys[i], tt.labels[i])
				}
			}
		})
	}
}

func TestListSourceLayouts(t *testing.T) {
	tests := []struct {
		name    string
		files   []string
		classes []string
		labels  []int64
	}{
		{"imagefolder", []string{"dog/1.png", "cat/2.png", "cat/1.png"}, []string{"cat", "dog"}, []int64{0, 0, 1}},
		{"flat", []string{"b.png", "a.png"}, nil, []int64{formats.NoLabel, formats.NoLabel}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tt.files {
				os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755)
				os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644)
			}
			os.WriteFile(filepath.Join(dir, ".hidden.png"), []byte("x"), 0o644)
			l, err := ListSource(context.Background(), cloudsrc.Dir{Root: dir}, func(k string) bool { return strings.HasSuffix(k, ".png") })
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(l.Classes, ",") != strings.Join(tt.classes, ",") || len(l.Entries) != len(tt.labels) {
				t.Fatalf("classes %v entries %d", l.Classes, len(l.Entries))
			}
			for i, e := range l.Entries {
				if e.Label != tt.labels[i] {
					t.Errorf("%s label %d, want %d", e.Key, e.Label, tt.labels[i])
				}
				if i > 0 && l.Entries[i-1].Key >= e.Key {
					t.Errorf("entries not sorted: %s before %s", l.Entries[i-1].Key, e.Key)
				}
			}
		})
	}
}

// TestListSourceClasses: a folder's classes are torchvision's, whatever
// else sits in it; what would change them is refused, naming it and the
// fix, or allowed by a flag with a warning (issue 28).
func TestListSourceClasses(t *testing.T) {
	tests := []struct {
		name    string
		files   []string // a name ending in / is an empty folder
		rules   LabelRules
		classes []string
		keys    []string
		labels  []int64
		err     []string // each must be in the error
		warn    int
	}{
		{"stray refused", []string{"a.png", "x/b.png", "y/c.png"}, LabelRules{}, nil, nil, nil,
			[]string{"1 convertible file beside the class folders", "(a.png)", "--ignore-stray-files", "--layout flat"}, 0},
		{"stray left out", []string{"a.png", "x/b.png", "y/c.png", "z/README"}, LabelRules{IgnoreStrays: true, KeepEmptyClasses: true},
			[]string{"x", "y", "z"}, []string{"x/b.png", "y/c.png"}, []int64{0, 1}, nil, 2},
		{"flat by flag", []string{"a.png", "x/b.png"}, LabelRules{Layout: LayoutFlat}, nil, []string{"a.png", "x/b.png"}, []int64{-1, -1}, nil, 0},
		{"imagefolder wanted", []string{"a.png"}, LabelRules{Layout: LayoutImageFolder}, nil, nil, nil, []string{"no class folders"}, 0},
		{"empty folder refused", []string{"a/1.png", "b/", "c/2.png"}, LabelRules{}, nil, nil, nil,
			[]string{`class folder "b" (index 1)`, "empty", "--keep-empty-classes"}, 0},
		{"no convertible file", []string{"a/1.png", "b/x.webp", "b/y.txt"}, LabelRules{}, nil, nil, nil,
			[]string{`class folder "b" (index 1)`, "no file prep converts (1 .txt, 1 .webp)"}, 0},
		{"hidden folder counts", []string{".ipynb_checkpoints/", "a/1.png", "b/2.png"}, LabelRules{}, nil, nil, nil,
			[]string{`class folder ".ipynb_checkpoints" (index 0)`, "hidden"}, 0},
		{"empty kept", []string{".ipynb_checkpoints/", "a/1.png", "b/", "c/2.png"}, LabelRules{KeepEmptyClasses: true},
			[]string{".ipynb_checkpoints", "a", "b", "c"}, []string{"a/1.png", "c/2.png"}, []int64{1, 3}, nil, 2},
		{"python order", []string{"\xff/1.png", "\ue000/2.png", "B/3.png", "a/4.png"}, LabelRules{},
			[]string{"B", "a", "\xff", "\ue000"}, []string{"B/3.png", "a/4.png", "\ue000/2.png", "\xff/1.png"}, []int64{0, 1, 3, 2}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tt.files {
				if strings.HasSuffix(f, "/") {
					os.MkdirAll(filepath.Join(dir, f), 0o755)
					continue
				}
				os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755)
				os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644)
			}
			l, err := ListSource(context.Background(), cloudsrc.Dir{Root: dir}, func(k string) bool { return strings.HasSuffix(k, ".png") })
			if err != nil {
				t.Fatal(err)
			}
			warnings, err := l.Check("SRC", tt.rules)
			if tt.err != nil {
				if err == nil {
					t.Fatalf("no error; classes %q", l.Classes)
				}
				for _, want := range tt.err {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q lacks %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(warnings) != tt.warn {
				t.Errorf("warnings %q, want %d", warnings, tt.warn)
			}
			if !slices.Equal(l.Classes, tt.classes) {
				t.Errorf("classes %q, want %q", l.Classes, tt.classes)
			}
			var keys []string
			var labels []int64
			for _, e := range l.Entries {
				keys, labels = append(keys, e.Key), append(labels, e.Label)
			}
			if !slices.Equal(keys, tt.keys) || !slices.Equal(labels, tt.labels) {
				t.Errorf("entries %q %v, want %q %v", keys, labels, tt.keys, tt.labels)
			}
		})
	}
}

func TestPyCompare(t *testing.T) {
	// Python: sorted(["\udcff", "\ue000", "\U0001f600", "z", "\u00e9"]) by code point.
	in := []string{"\U0001f600", "\ue000", "\xff", "z", "\u00e9", "\xc3"}
	want := []string{"z", "\u00e9", "\xc3", "\xff", "\ue000", "\U0001f600"}
	slices.SortFunc(in, PyCompare)
	if !slices.Equal(in, want) {
		t.Errorf("sorted %q, want %q", in, want)
	}
}

// TestEmptyAfterRun: a class whose every input was skipped is named.
func TestEmptyAfterRun(t *testing.T) {
	l := &Listing{Classes: []string{"a", "b", "c"}, Entries: []Entry{{Key: "a/1.png", Label: 0}, {Key: "b/1.png", Label: 1}, {Key: "b/2.png", Label: 1}, {Key: "c/1.png", Label: 2}},
		Empty: nil}
	lost := l.EmptyAfterRun([]manifest.Skipped{{Key: "b/1.png#c0"}, {Key: "b/2.png#c0"}, {Key: "c/1.png#c0"}})
	if len(lost) != 2 || lost[0].Name != "b" || lost[1].Name != "c" {
		t.Errorf("lost %v, want b and c", lost)
	}
	if lost := l.EmptyAfterRun([]manifest.Skipped{{Key: "b/1.png#c0"}}); len(lost) != 0 {
		t.Errorf("lost %v, want none", lost)
	}
}

// TestListSourceHidden: a hidden file a handler takes, which
// torchvision's ImageFolder would read, is listed as ignored with the
// reason and warned about; other hidden files stay out of the way.
func TestListSourceHidden(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"cat/1.png", "cat/.2.png", "cat/._3.png", "cat/.thumbs/4.png", "dog/5.png", ".DS_Store", "dog/.git/objects/ab"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644)
	}
	l, err := ListSource(context.Background(), cloudsrc.Dir{Root: dir}, func(k string) bool { return strings.HasSuffix(k, ".png") })
	if err != nil {
		t.Fatal(err)
	}
	var keys, ignored []string
	for _, e := range l.Entries {
		keys = append(keys, e.Key)
	}
	for _, s := range l.Ignored {
		if s.Reason != HiddenReason {
			t.Errorf("ignored %s: %q", s.Key, s.Reason)
		}
		ignored = append(ignored, s.Key)
	}
	if !slices.Equal(keys, []string{"cat/1.png", "dog/5.png"}) || !slices.Equal(ignored, []string{"cat/.2.png", "cat/._3.png", "cat/.thumbs/4.png"}) {
		t.Errorf("entries %q, ignored %q", keys, ignored)
	}
	if !slices.Equal(l.Classes, []string{"cat", "dog"}) {
		t.Errorf("classes %q", l.Classes)
	}
	warnings, err := l.Check("SRC", LabelRules{})
	if err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], "3 hidden convertible files in SRC left out") {
		t.Errorf("warnings %q, err %v", warnings, err)
	}
}
