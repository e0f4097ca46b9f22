package convert

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/formats"
)

// FuzzParseInputList: ParseInputList never panics, on CSV or JSONL, and
// what it accepts is consistent (keys sorted and unique, each from a
// handled path; class names sorted, unique and not integers; labels in
// range) and survives being written back in the same format and parsed
// again: same entries, labels, classes and ignored paths.
func FuzzParseInputList(f *testing.F) {
	for _, s := range []string{
		"path,label\nb.jpg,dog\na.jpg,cat\nc.jpg,dog\n",
		"x/1.png,3\nx/0.png,7\n",
		"z.png\ny.png\n",
		"path,label\nREADME,x\nb.png,dog\nanim.gif,cat\na.jpg,dog\n",
		"path,label\na.png,4\nb.png,cat\n",
		"uri,label\n\" a.png\",\" 5\"\n\"b\nc.png\",+7\nd.png,-0\n",
		"a.png,1\na.png,2\n",
		"path,label\n",
	} {
		f.Add(false, []byte(s))
	}
	for _, s := range []string{
		`{"path": "b.png", "label": "x"}` + "\n\n" + `{"uri": "a.png", "label": "y"}` + "\n",
		`{"path": "a.png", "label": 2}` + "\n" + `{"path": "b.png", "label": null}` + "\n",
		`{"path": "a.png", "label": "caf\u00e9"}` + "\n" + `{"path": "b.png", "label": "say \"hi\""}` + "\n",
		`{"path": "a.png", "label": "null"}` + "\n" + `{"path": "b.png", "label": "x"}` + "\n",
		`{"path": "a.png", "label": "5"}` + "\n" + `{"path": "b.png", "label": 6}` + "\n",
		`{"path": "notes.txt"}` + "\n",
		`{"path": "a.png"}` + "\nnot json\n",
	} {
		f.Add(true, []byte(s))
	}
	f.Fuzz(func(t *testing.T, jsonl bool, data []byte) {
		name := "in.csv"
		if jsonl {
			name = "in.jsonl"
		}
		l, err := ParseInputList(name, data, fuzzOpen, fuzzHandled)
		if err != nil {
			return
		}
		checkListing(t, l)
		var again []byte
		if jsonl {
			again = listingJSONL(t, l)
		} else {
			again = listingCSV(t, l)
		}
		l2, err := ParseInputList(name, again, fuzzOpen, fuzzHandled)
		if err != nil {
			t.Fatalf("written back as\n%s\nrefused: %v", again, err)
		}
		if !sameListing(l, l2) {
			t.Fatalf("written back as\n%s\nreads as %+v, not %+v", again, l2, l)
		}
	})
}

// fuzzOpen resolves a path without touching the disk or the network: the
// key is the path under "k/", and a path with a \x01 cannot be opened.
func fuzzOpen(uri string) (cloudsrc.Source, string, error) {
	if strings.Contains(uri, "\x01") {
		return nil, "", errors.New("cannot open " + strconv.Quote(uri))
	}
	return cloudsrc.Dir{Root: "/nonexistent"}, "k/" + uri, nil
}

func fuzzHandled(key string) bool {
	switch path.Ext(key) {
	case ".png", ".jpg":
		return true
	}
	return false
}

func checkListing(t *testing.T, l *Listing) {
	t.Helper()
	for i, e := range l.Entries {
		uri, ok := strings.CutPrefix(e.Key, "k/")
		if !ok || !fuzzHandled(uri) {
			t.Fatalf("entry %q is not a handled path opened by open", e.Key)
		}
		if i > 0 && l.Entries[i-1].Key >= e.Key {
			t.Fatalf("entries %q, %q not sorted and unique", l.Entries[i-1].Key, e.Key)
		}
		if len(l.Classes) > 0 && e.Label != formats.NoLabel && (e.Label < 0 || e.Label >= int64(len(l.Classes))) {
			t.Fatalf("entry %q: label %d of %d classes", e.Key, e.Label, len(l.Classes))
		}
	}
	for i, c := range l.Classes {
		if _, err := strconv.ParseInt(c, 10, 64); err != nil && c != "" && (i == 0 || l.Classes[i-1] < c) {
			continue
		}
		t.Fatalf("classes %q: %q is empty, an integer, or out of order", l.Classes, c)
	}
	for _, s := range l.Ignored {
		if fuzzHandled(s.Key) {
			t.Fatalf("ignored %q, a handled path", s.Key)
		}
	}
}

// label is how a list names an entry's label: a class name, an integer or
// nothing.
func label(l *Listing, e Entry) (string, bool) {
	switch {
	case e.Label == formats.NoLabel:
		return "", false
	case len(l.Classes) > 0:
		return l.Classes[e.Label], true
	}
	return strconv.FormatInt(e.Label, 10), true
}

func listingCSV(t *testing.T, l *Listing) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	rows := [][]string{{"path", "label"}}
	for _, e := range l.Entries {
		lab, _ := label(l, e)
		rows = append(rows, []string{strings.TrimPrefix(e.Key, "k/"), lab})
	}
	for _, s := range l.Ignored {
		rows = append(rows, []string{s.Key, ""})
	}
	if err := w.WriteAll(rows); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func listingJSONL(t *testing.T, l *Listing) []byte {
	// formats.Name: bytes that are not UTF-8 written as \udcXX, as prep
	// writes names (encoding/json would make them U+FFFD)
	type row struct {
		Path  formats.Name `json:"path"`
		Label any          `json:"label,omitempty"`
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	put := func(r row) {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range l.Entries {
		r := row{Path: formats.Name(strings.TrimPrefix(e.Key, "k/"))}
		if lab, ok := label(l, e); ok && len(l.Classes) > 0 {
			r.Label = formats.Name(lab)
		} else if ok {
			r.Label = e.Label
		}
		put(r)
	}
	for _, s := range l.Ignored {
		put(row{Path: formats.Name(s.Key)})
	}
	return b.Bytes()
}

func sameListing(a, b *Listing) bool {
	if len(a.Entries) != len(b.Entries) || !slices.Equal(a.Classes, b.Classes) {
		return false
	}
	for i := range a.Entries {
		if a.Entries[i].Key != b.Entries[i].Key || a.Entries[i].Label != b.Entries[i].Label {
			return false
		}
	}
	keys := func(l *Listing) []string {
		var k []string
		for _, s := range l.Ignored {
			k = append(k, s.Key)
		}
		slices.Sort(k)
		return k
	}
	return slices.Equal(keys(a), keys(b))
}
