package convert

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/manifest"
)

// PyCompare orders names as Python's sorted() orders the strs that
// os.scandir gives for them, which is the order of torchvision's classes:
// by code point, a byte that is not part of valid UTF-8 read as
// U+DC80+byte (surrogateescape). For valid UTF-8 this is byte order.
func PyCompare(a, b string) int {
	for a != "" && b != "" {
		ra, na := pyRune(a)
		rb, nb := pyRune(b)
		if ra != rb {
			return cmp.Compare(ra, rb)
		}
		a, b = a[na:], b[nb:]
	}
	return cmp.Compare(len(a), len(b))
}

func pyRune(s string) (rune, int) {
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && n == 1 {
		return 0xDC00 + rune(s[0]), 1
	}
	return r, n
}

// whyEmpty says why class folder c has no convertible file.
func (l *Listing) whyEmpty(c string) string {
	if strings.HasPrefix(c, ".") {
		return "a hidden folder, which prep does not read, while torchvision's ImageFolder counts it as a class"
	}
	exts := map[string]int{}
	n := 0
	for _, s := range l.Ignored {
		if strings.HasPrefix(s.Key, c+"/") {
			exts[ext(s.Key)]++
			n++
		}
	}
	if n == 0 {
		return "empty"
	}
	var kinds []string
	for e, k := range exts {
		if e == "" {
			e = "no extension"
		}
		kinds = append(kinds, fmt.Sprintf("%d %s", k, e))
	}
	slices.Sort(kinds)
	return fmt.Sprintf("no file prep converts (%s)", strings.Join(kinds, ", "))
}

// Layout says how a folder's files get their labels.
type Layout string

const (
	// LayoutAuto is ImageFolder when any convertible file sits in a
	// folder, flat otherwise.
	LayoutAuto Layout = "auto"
	// LayoutImageFolder requires class folders.
	LayoutImageFolder Layout = "imagefolder"
	// LayoutFlat takes every file at any depth, unlabelled.
	LayoutFlat Layout = "flat"
)

// LabelRules are what a user may allow a folder's labels.
type LabelRules struct {
	Layout           Layout
	KeepEmptyClasses bool // an empty class keeps its index, with a warning
	IgnoreStrays     bool // files beside the class folders are left out, with a warning
}

// Check applies rules to a folder's listing: it refuses, naming them and
// the fix, the files and folders that would change the labels torchvision's
// ImageFolder gives the same folder, unless rules allow them; then it
// returns a warning for each it allowed. It may change l: a flat layout
// takes the strays back, unlabelled, and strays left out join Ignored.
func (l *Listing) Check(src string, rules LabelRules) (warnings []string, err error) {
	switch rules.Layout {
	case LayoutFlat:
		l.flatten()
		return nil, nil
	case LayoutImageFolder:
		if l.Classes == nil {
			return nil, fmt.Errorf("%s has no class folders (--layout imagefolder wants SRC/<class>/<file>): move the files into class folders, or drop --layout for unlabelled samples", src)
		}
	case LayoutAuto, "":
	default:
		return nil, fmt.Errorf("--layout %q: want auto, imagefolder or flat", rules.Layout)
	}
	var refuse []string
	if n := l.hiddenIgnored(); n > 0 && l.Classes != nil {
		warnings = append(warnings, fmt.Sprintf("%s in %s left out (listed in the manifest's ignored): torchvision's ImageFolder would read them", count(n, "hidden convertible file"), src))
	}
	if len(l.Strays) > 0 {
		keys := make([]string, len(l.Strays))
		for i, e := range l.Strays {
			keys[i] = e.Key
		}
		what := fmt.Sprintf("%s beside the class folders of %s (%s) %s no class: an ImageFolder's label is the folder a file sits in, and torchvision's ImageFolder leaves such files out",
			count(len(keys), "convertible file"), src, examples(keys), hasHave(len(keys)))
		if !rules.IgnoreStrays {
			refuse = append(refuse, what+". Move them into a class folder or out of SRC, pass --ignore-stray-files to leave them out, or --layout flat for unlabelled samples")
		} else {
			warnings = append(warnings, what+"; left out (--ignore-stray-files)")
			for _, k := range keys {
				l.Ignored = append(l.Ignored, manifest.Skipped{Key: k, Reason: "beside the class folders: no class (--ignore-stray-files)"})
			}
			slices.SortFunc(l.Ignored, func(a, b manifest.Skipped) int { return strings.Compare(a.Key, b.Key) })
			l.Strays = nil
		}
	}
	for _, e := range l.Empty {
		what := fmt.Sprintf("class folder %q (index %d) of %s: %s", e.Name, e.Index, src, e.Why)
		switch {
		case rules.KeepEmptyClasses:
			warnings = append(warnings, what+"; index kept with no samples (--keep-empty-classes)")
		case strings.HasPrefix(e.Name, "."):
			refuse = append(refuse, fmt.Sprintf("%s: without it every later class index would shift. Remove or rename the folder, or pass --keep-empty-classes to keep index %d with no samples", what, e.Index))
		default:
			refuse = append(refuse, fmt.Sprintf("%s: torchvision's ImageFolder refuses it too (\"Found no valid file for the classes\"), and without it every later class index would shift. Add its files, remove the folder, or pass --keep-empty-classes to keep index %d with no samples", what, e.Index))
		}
	}
	if len(refuse) > 0 {
		return warnings, &LabelError{Problems: refuse}
	}
	return warnings, nil
}

// LabelError is a folder whose labels a run would get wrong.
type LabelError struct{ Problems []string }

func (e *LabelError) Error() string {
	if len(e.Problems) == 1 {
		return e.Problems[0]
	}
	return "the labels would not be the folder's:\n  - " + strings.Join(e.Problems, "\n  - ")
}

// flatten makes l an unlabelled listing of every convertible file.
func (l *Listing) flatten() {
	l.Entries = append(l.Entries, l.Strays...)
	for i := range l.Entries {
		l.Entries[i].Label = formats.NoLabel
	}
	slices.SortFunc(l.Entries, func(a, b Entry) int { return strings.Compare(a.Key, b.Key) })
	l.Classes, l.Strays, l.Empty = nil, nil, nil
}

// EmptyAfterRun names the classes that had inputs but got no sample,
// every one of their inputs skipped: the class index is kept, but a model
// never sees it. skipped are the run's skipped keys.
func (l *Listing) EmptyAfterRun(skipped []manifest.Skipped) []EmptyClass {
	if len(l.Classes) == 0 {
		return nil
	}
	gone := map[string]bool{}
	for _, s := range skipped {
		gone[inputKey(s.Key)] = true
	}
	has := make([]bool, len(l.Classes))
	for _, e := range l.Entries {
		if e.Label >= 0 && int(e.Label) < len(has) && !gone[e.Key] {
			has[e.Label] = true
		}
	}
	var lost []EmptyClass
	for i, ok := range has {
		empty := slices.ContainsFunc(l.Empty, func(e EmptyClass) bool { return e.Index == i })
		if !ok && !empty {
			lost = append(lost, EmptyClass{Name: l.Classes[i], Index: i, Why: "every input failed to convert"})
		}
	}
	return lost
}

// inputKey strips a skipped key's copy suffix ("#c3"): the input's key.
func inputKey(k string) string {
	i := strings.LastIndex(k, "#c")
	if i < 0 {
		return k
	}
	if _, err := strconv.Atoi(k[i+2:]); err != nil {
		return k
	}
	return k[:i]
}

// examples names the first few of keys.
func examples(keys []string) string {
	const n = 3
	if len(keys) <= n {
		return strings.Join(keys, ", ")
	}
	return strings.Join(keys[:n], ", ") + fmt.Sprintf(" and %d more", len(keys)-n)
}

func hasHave(n int) string {
	if n == 1 {
		return "has"
	}
	return "have"
}

func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// hiddenIgnored counts the hidden files of convertible types left out.
func (l *Listing) hiddenIgnored() int {
	n := 0
	for _, s := range l.Ignored {
		if s.Reason == HiddenReason {
			n++
		}
	}
	return n
}
