package convert

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
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

// HiddenReason is why a hidden file of a convertible type is ignored.
const HiddenReason = "hidden file (its name or a folder's starts with \".\"): left out, where torchvision's ImageFolder would read it; rename it to convert it"

// Listing is the sorted input of a run.
type Listing struct {
	Entries []Entry
	Classes []string           // label i is Classes[i]; nil when unlabelled
	Ignored []manifest.Skipped // files no handler takes
	// Strays are the convertible files beside the class folders of an
	// ImageFolder: no folder names their class, so they are not in
	// Entries. Check refuses them unless told to leave them out.
	Strays []Entry
	// Empty are the classes no listed file belongs to: torchvision's
	// ImageFolder refuses such a folder, and Check does too.
	Empty []EmptyClass
}

// EmptyClass is a class folder without a convertible file.
type EmptyClass struct {
	Name  string `json:"name"`
	Index int    `json:"index"`
	Why   string `json:"why"`
}

// ListSource lists a source in ImageFolder layout when any convertible
// file sits in a folder: the classes are the folders directly under the
// root, in the order and with the indices torchvision's ImageFolder gives
// them (Python's sorted() of the names), every folder counted, empty and
// hidden ones too where the source can name them (cloudsrc.Folderer).
// Otherwise it lists a flat, unlabelled folder. Files whose extension no
// handler takes are listed in Ignored. Check says whether the layout is
// one a run may take.
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
		if o.Hidden {
			// torchvision's ImageFolder would read a hidden image (a
			// macOS "._" file, a thumbnail cache): say it is left out.
			if handled(o.Key) {
				l.Ignored = append(l.Ignored, manifest.Skipped{Key: o.Key, Reason: HiddenReason})
			}
			continue
		}
		if !handled(o.Key) {
			l.Ignored = append(l.Ignored, manifest.Skipped{Key: o.Key, Reason: fmt.Sprintf("unsupported file type %q", ext(o.Key))})
			continue
		}
		l.Entries = append(l.Entries, Entry{Key: o.Key, Label: formats.NoLabel, Src: src, Size: o.Size, ModTime: o.ModTime, Generation: o.Generation})
	}
	slices.SortFunc(l.Entries, func(a, b Entry) int { return strings.Compare(a.Key, b.Key) })
	if !slices.ContainsFunc(l.Entries, func(e Entry) bool { return strings.Contains(e.Key, "/") }) {
		return l, nil // flat
	}
	classSet := map[string]bool{}
	if fl, ok := src.(cloudsrc.Folderer); ok {
		names, err := fl.Folders(ctx)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			classSet[n] = true
		}
	}
	for _, o := range objs {
		if c, _, ok := strings.Cut(o.Key, "/"); ok {
			classSet[c] = true
		}
	}
	for c := range classSet {
		l.Classes = append(l.Classes, c)
	}
	slices.SortFunc(l.Classes, PyCompare)
	index := make(map[string]int64, len(l.Classes))
	for i, c := range l.Classes {
		index[c] = int64(i)
	}
	kept := l.Entries[:0]
	inClass := make([]int, len(l.Classes))
	for _, e := range l.Entries {
		c, _, ok := strings.Cut(e.Key, "/")
		if !ok {
			l.Strays = append(l.Strays, e)
			continue
		}
		e.Label = index[c]
		inClass[e.Label]++
		kept = append(kept, e)
	}
	l.Entries = kept
	for i, c := range l.Classes {
		if inClass[i] == 0 {
			l.Empty = append(l.Empty, EmptyClass{Name: c, Index: i, Why: l.whyEmpty(c)})
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

// ParseInputList reads a list of inputs: a CSV (`path,label` rows per RFC
// 4180, an optional header), a JSONL file ({"path": ..., "label": ...},
// "uri" also accepted) or a .txt file (a path a line, optionally followed
// by a tab or space and a label; see parseTxt). A UTF-8 byte order mark is
// skipped. Labels that are all integers (10.0, as pandas writes integer
// columns with a gap, is 10) are used as they are; labels that are all
// names are class names, numbered in sorted order; a mix, a fraction, a
// negative index or a list of labels is refused naming the line. open
// resolves each path to a Source. Paths whose extension no handler takes
// are listed in Ignored, as ListSource does.
func ParseInputList(name string, data []byte, open func(uri string) (cloudsrc.Source, string, error), handled func(key string) bool) (*Listing, error) {
	type row struct {
		uri, label string
		line       int
	}
	var rows []row
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	switch strings.ToLower(path.Ext(name)) {
	case ".jsonl":
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" {
				continue
			}
			// Names as prep writes them: \udcXX is the raw byte
			// (surrogateescape), as Python's json.dumps of os.fsdecode gives.
			var v struct {
				Path  formats.Name    `json:"path"`
				URI   formats.Name    `json:"uri"`
				Label json.RawMessage `json:"label"`
			}
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				return nil, fmt.Errorf("%s:%d: %w (each line must be {\"path\": ..., \"label\": ...})", name, n, err)
			}
			p := string(v.Path)
			if p == "" {
				p = string(v.URI)
			}
			if p == "" {
				return nil, fmt.Errorf("%s:%d: no \"path\" field", name, n)
			}
			label, err := jsonLabel(v.Label)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", name, n, err)
			}
			rows = append(rows, row{p, label, n})
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	case ".txt":
		for n, line := range strings.Split(string(data), "\n") {
			p, label := parseTxt(strings.TrimSuffix(line, "\r"), handled)
			if p != "" {
				rows = append(rows, row{p, label, n + 1})
			}
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
				return nil, fmt.Errorf("%s: %w (rows must be path,label, a field holding a comma or quote in double quotes, quotes doubled)", name, err)
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
	for i := range rows {
		r := &rows[i]
		l, err := numericLabel(r.label)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, r.line, err)
		}
		r.label = l
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
		slices.SortFunc(l.Classes, PyCompare)
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

// jsonLabel reads a JSONL label: a string as its text, a number as
// written, null or none as no label. A list or object is refused: prep
// stores one class a sample.
func jsonLabel(raw json.RawMessage) (string, error) {
	v := bytes.TrimSpace(raw)
	if len(v) == 0 || string(v) == "null" {
		return "", nil
	}
	switch v[0] {
	case '"':
		return formats.UnquoteJSONName(v)
	case '[':
		return "", fmt.Errorf("label %s is a list: prep stores one class a sample (multi-label data is not supported); give one label, or convert without labels and keep the label lists beside the shards, keyed by path", v)
	case '{', 't', 'f':
		return "", fmt.Errorf("label %s is not a class index or name: give an integer or a string", v)
	}
	return string(v), nil
}

// numericLabel reads a label that is a number as the class index it
// names: "10" and "10.0" (pandas' integers in a float column) are "10".
// A number that is no index (2.5, -1, 1e30, NaN) is refused; other text
// is a class name, returned as it is.
func numericLabel(label string) (string, error) {
	if label == "" {
		return "", nil
	}
	if n, err := strconv.ParseInt(label, 10, 64); err == nil {
		if n < 0 {
			return "", fmt.Errorf("label %q is negative: class indices start at 0; leave the label empty for an unlabelled input", label)
		}
		return label, nil
	}
	f, err := strconv.ParseFloat(label, 64)
	if err != nil {
		return label, nil // a name
	}
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) || math.Abs(f) >= 1<<53:
		return "", fmt.Errorf("label %q is a number but not a class index: prep's labels are integers from 0 or class names; round them, or write names that do not read as numbers", label)
	case f < 0:
		return "", fmt.Errorf("label %q is negative: class indices start at 0; leave the label empty for an unlabelled input", label)
	}
	return strconv.FormatInt(int64(f), 10), nil
}

// parseTxt reads a line of a .txt list: a path, or a path, a tab or
// space, and a label (`train/n01/x.JPEG 0`, as Caffe's lists are). A line
// that is itself a path prep converts is a path, spaces and commas and
// all; otherwise the label is what follows the last tab, or else the
// last space. Blank lines and lines starting with # are skipped.
func parseTxt(line string, handled func(string) bool) (path, label string) {
	if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
		return "", ""
	}
	if handled(line) {
		return line, ""
	}
	i := strings.LastIndexByte(line, '\t')
	if i < 0 {
		i = strings.LastIndexByte(strings.TrimRight(line, " "), ' ')
	}
	if i < 0 {
		return line, ""
	}
	return strings.TrimRight(line[:i], " \t"), strings.TrimSpace(line[i+1:])
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
