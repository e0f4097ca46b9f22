package convert

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/manifest"
)

// Entry is one input of the plan.
type Entry struct {
	Key   string // sorted on; seeds the sample's RNG
	Label int64
	Src   cloudsrc.Source // opens Key
	Size  int64           // bytes as listed; 0 when the listing gives none (input lists)
	// ModTime or Generation, as listed (cloudsrc.Object), identify this
	// version of the input in the run's input list (inputRecords).
	ModTime    time.Time
	Generation int64
}

// Listing is the sorted input of a run.
type Listing struct {
	Entries []Entry
	Classes []string           // label i is Classes[i]; nil when unlabelled
	Ignored []manifest.Skipped // files no handler takes
}

// ListSource lists a source in ImageFolder layout when every file sits in
// a class folder (SRC/<class>/<file>: classes are the sorted folder names),
// otherwise as a flat, unlabelled folder. Files whose extension no handler
// takes are listed in Ignored.
func ListSource(ctx context.Context, src cloudsrc.Source, handled func(key string) bool) (*Listing, error) {
	objs, err := src.List(ctx)
	if err != nil {
		return nil, err
	}
	l := &Listing{}
	for _, o := range objs {
		if formats.IsTemp(o.Key) {
			continue
		}
		if !handled(o.Key) {
			l.Ignored = append(l.Ignored, manifest.Skipped{Key: o.Key, Reason: fmt.Sprintf("unsupported file type %q", ext(o.Key))})
			continue
		}
		l.Entries = append(l.Entries, Entry{Key: o.Key, Label: formats.NoLabel, Src: src, Size: o.Size, ModTime: o.ModTime, Generation: o.Generation})
	}
	slices.SortFunc(l.Entries, func(a, b Entry) int { return strings.Compare(a.Key, b.Key) })
	foldered := len(l.Entries) > 0
	classSet := map[string]bool{}
	for _, e := range l.Entries {
		i := strings.IndexByte(e.Key, '/')
		if i < 0 {
			foldered = false
			break
		}
		classSet[e.Key[:i]] = true
	}
	if foldered {
		for c := range classSet {
			l.Classes = append(l.Classes, c)
		}
		sort.Strings(l.Classes)
		index := make(map[string]int64, len(l.Classes))
		for i, c := range l.Classes {
			index[c] = int64(i)
		}
		for i := range l.Entries {
			e := &l.Entries[i]
			e.Label = index[e.Key[:strings.IndexByte(e.Key, '/')]]
		}
	}
	return l, nil
}

// IsManifestFile reports whether SRC names a list of inputs rather than a
// folder: a .csv, .jsonl or .txt file.
func IsManifestFile(name string) bool {
	switch strings.ToLower(path.Ext(name)) {
	case ".csv", ".jsonl", ".txt":
		return true
	}
	return false
}

// ParseInputList reads a CSV (`path,label` rows, an optional header) or a
// JSONL file ({"path": ..., "label": ...}, "uri" also accepted). Labels
// that are all integers are used as they are; labels that are all names
// are class names, numbered in sorted order; a mix is an error. open
// resolves each path to a Source. Paths whose extension no handler takes
// are listed in Ignored, as ListSource does.
func ParseInputList(name string, data []byte, open func(uri string) (cloudsrc.Source, string, error), handled func(key string) bool) (*Listing, error) {
	type row struct {
		uri, label string
		line       int
	}
	var rows []row
	switch strings.ToLower(path.Ext(name)) {
	case ".jsonl":
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" {
				continue
			}
			var v struct {
				Path  string          `json:"path"`
				URI   string          `json:"uri"`
				Label json.RawMessage `json:"label"`
			}
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				return nil, fmt.Errorf("%s:%d: %w (each line must be {\"path\": ..., \"label\": ...})", name, n, err)
			}
			p := v.Path
			if p == "" {
				p = v.URI
			}
			if p == "" {
				return nil, fmt.Errorf("%s:%d: no \"path\" field", name, n)
			}
			// A string label is decoded, escapes and all ("caf\u00e9" is
			// café, "null" a class name); null is no label; anything else,
			// a number, is taken as written.
			var label string
			if json.Unmarshal(v.Label, &label) != nil {
				label = string(v.Label)
			}
			rows = append(rows, row{p, label, n})
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	default:
		r := csv.NewReader(bytes.NewReader(data))
		r.FieldsPerRecord = -1
		r.TrimLeadingSpace = true
		for i := 0; ; i++ {
			rec, err := r.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w (rows must be path,label)", name, err)
			}
			if len(rec) == 0 || rec[0] == "" {
				continue
			}
			if i == 0 && (rec[0] == "path" || rec[0] == "uri") {
				continue
			}
			label := ""
			if len(rec) > 1 {
				label = rec[1]
			}
			line, _ := r.FieldPos(0)
			rows = append(rows, row{rec[0], label, line})
		}
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s lists no inputs", name)
	}
	l := &Listing{}
	kept := rows[:0]
	for _, r := range rows {
		if !handled(r.uri) {
			l.Ignored = append(l.Ignored, manifest.Skipped{Key: r.uri, Reason: fmt.Sprintf("unsupported file type %q", ext(r.uri))})
			continue
		}
		kept = append(kept, r)
	}
	rows = kept
	// Reading integer labels as names too would silently renumber them (4
	// would become the index of "4" among the names), so a mix is refused,
	// naming the first label of the rarer kind, the likely mistake.
	var nInt, nName int
	var firstInt, firstName *row
	for i := range rows {
		r := &rows[i]
		if r.label == "" {
			continue
		}
		if _, err := strconv.ParseInt(r.label, 10, 64); err != nil {
			nName++
			if firstName == nil {
				firstName = r
			}
			continue
		}
		nInt++
		if firstInt == nil {
			firstInt = r
		}
	}
	numeric := nName == 0
	if nInt > 0 && nName > 0 {
		odd, kind, n, others := firstName, "a class name", nInt, "integers"
		if nInt < nName || (nInt == nName && firstInt.line > firstName.line) {
			odd, kind, n, others = firstInt, "an integer", nName, "class names"
		}
		return nil, fmt.Errorf("%s:%d: label %q is %s, but %d other labels are %s: use all integers (class indices) or all class names",
			name, odd.line, odd.label, kind, n, others)
	}
	index := map[string]int64{}
	if !numeric {
		set := map[string]bool{}
		for _, r := range rows {
			if r.label != "" {
				set[r.label] = true
			}
		}
		for c := range set {
			l.Classes = append(l.Classes, c)
		}
		sort.Strings(l.Classes)
		for i, c := range l.Classes {
			index[c] = int64(i)
		}
	}
	seen := map[string]bool{}
	for _, r := range rows {
		src, key, err := open(r.uri)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if seen[r.uri] {
			return nil, fmt.Errorf("%s lists %s twice", name, r.uri)
		}
		seen[r.uri] = true
		label := formats.NoLabel
		switch {
		case r.label == "":
		case numeric:
			label, _ = strconv.ParseInt(r.label, 10, 64)
		default:
			label = index[r.label]
		}
		e := Entry{Key: key, Label: label, Src: src}
		// A local file's size and time identify it in the run's input
		// list; a missing one is left for the run to report as it opens
		// it. A gs:// entry is not asked for: one request per object
		// would cost more than the run's listing, so it is known by its
		// path and label alone.
		if st, ok := src.(cloudsrc.Stater); ok {
			if o, err := st.Stat(context.Background(), key); err == nil {
				e.Size, e.ModTime = o.Size, o.ModTime
			}
		}
		l.Entries = append(l.Entries, e)
	}
	sort.Slice(l.Entries, func(i, j int) bool { return l.Entries[i].Key < l.Entries[j].Key })
	return l, nil
}

func ext(key string) string { return strings.ToLower(path.Ext(key)) }

// readAll reads a whole object; size is a hint for the buffer.
func readAll(r io.Reader, size int64) ([]byte, error) {
	if size <= 0 {
		return io.ReadAll(r)
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}
