package convert

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/formats"
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
		{"mixed is flat", []string{"a.png", "x/b.png"}, nil, []int64{formats.NoLabel, formats.NoLabel}},
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
