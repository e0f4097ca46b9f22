package manifest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"strings"

	"github.com/prep-dev/prep/formats"
)

// InputsFileName is the side file beside the manifest that lists a run's
// inputs, one Input per line in key order, gzip-compressed. The manifest
// records only its count (Inputs) and the SHA-256 of its uncompressed
// text (InputsSHA256), so that a manifest of millions of inputs stays
// small; the list itself is there to name which inputs changed when a
// resume or a rebuild finds another list.
const InputsFileName = "inputs.jsonl.gz"

// Input is one input of a run as it was listed: what identifies it
// besides its bytes. A local file is known by its size and modification
// time, a Cloud Storage object by its size and generation; an entry of an
// input list whose object was not listed (gs://) by its key and label.
type Input struct {
	Key        formats.Name `json:"key"` // exact bytes: \udcXX for a byte that is not UTF-8
	Label      int64        `json:"label"`
	Size       int64        `json:"size"`
	MTime      string       `json:"mtime,omitempty"`      // RFC 3339, UTC, nanoseconds; local files
	Generation int64        `json:"generation,omitempty"` // Cloud Storage objects
}

// InputsWriter writes the canonical text of an input list, one JSON line
// per Input, and hashes it as it goes.
type InputsWriter struct {
	w   io.Writer
	h   hash.Hash
	n   int
	buf bytes.Buffer
	enc *json.Encoder
}

// NewInputsWriter writes to w, which may be nil to only hash.
func NewInputsWriter(w io.Writer) *InputsWriter {
	iw := &InputsWriter{w: w, h: sha256.New()}
	iw.enc = json.NewEncoder(&iw.buf)
	iw.enc.SetEscapeHTML(false)
	return iw
}

// Write adds one input; inputs must come in key order.
func (iw *InputsWriter) Write(in Input) error {
	iw.buf.Reset()
	if err := iw.enc.Encode(in); err != nil { // one line, "\n" included
		return err
	}
	iw.h.Write(iw.buf.Bytes())
	iw.n++
	if iw.w == nil {
		return nil
	}
	_, err := iw.w.Write(iw.buf.Bytes())
	return err
}

// Sum returns the number of inputs written and the SHA-256 of their text.
func (iw *InputsWriter) Sum() (int, string) { return iw.n, hex.EncodeToString(iw.h.Sum(nil)) }

// NewInputsGzip returns a gzip writer whose bytes depend only on what is
// written to it (no name, no time in its header).
func NewInputsGzip(w io.Writer) *gzip.Writer {
	zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed) // a valid level never fails
	return zw
}

// ReadInputs reads an inputs file (gzip-compressed JSON lines) and returns
// its inputs and the SHA-256 of its uncompressed text.
func ReadInputs(data []byte) ([]Input, string, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", InputsFileName, err)
	}
	h := sha256.New()
	sc := bufio.NewScanner(io.TeeReader(zr, h))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var ins []Input
	for n := 1; sc.Scan(); n++ {
		var in Input
		if err := json.Unmarshal(sc.Bytes(), &in); err != nil {
			return nil, "", fmt.Errorf("%s:%d: %w", InputsFileName, n, err)
		}
		ins = append(ins, in)
	}
	if err := sc.Err(); err != nil {
		return nil, "", fmt.Errorf("read %s: %w", InputsFileName, err)
	}
	return ins, hex.EncodeToString(h.Sum(nil)), nil
}

// DiffInputs says how the input list now differs from was, both in key
// order: the first input whose label, size, modification time or
// generation changed, and how many inputs were added or removed, naming
// the first of each. "" when they are equal.
func DiffInputs(was, now []Input) string {
	var changed []string
	var added, removed []string
	nChanged := 0
	i, j := 0, 0
	for i < len(was) || j < len(now) {
		switch {
		case j == len(now) || (i < len(was) && was[i].Key < now[j].Key):
			removed = append(removed, string(was[i].Key))
			i++
		case i == len(was) || now[j].Key < was[i].Key:
			added = append(added, string(now[j].Key))
			j++
		default:
			if d := diffInput(was[i], now[j]); d != "" {
				if nChanged == 0 {
					changed = append(changed, d)
				}
				nChanged++
			}
			i++
			j++
		}
	}
	var parts []string
	if nChanged > 0 {
		s := changed[0]
		if nChanged > 1 {
			s += fmt.Sprintf(" (and %d more changed)", nChanged-1)
		}
		parts = append(parts, s)
	}
	if len(added) > 0 {
		parts = append(parts, fmt.Sprintf("%s added, first %s", count(len(added)), added[0]))
	}
	if len(removed) > 0 {
		parts = append(parts, fmt.Sprintf("%s gone, first %s", count(len(removed)), removed[0]))
	}
	return strings.Join(parts, "; ")
}

// diffInput says how one input changed; "" if it did not.
func diffInput(was, now Input) string {
	switch {
	case was.Label != now.Label:
		return fmt.Sprintf("input %s: label %d, now %d", now.Key, was.Label, now.Label)
	case was.Size != now.Size:
		return fmt.Sprintf("input %s: %d bytes, now %d", now.Key, was.Size, now.Size)
	case was.Generation != now.Generation:
		return fmt.Sprintf("input %s: generation %d, now %d (rewritten)", now.Key, was.Generation, now.Generation)
	case was.MTime != now.MTime:
		return fmt.Sprintf("input %s: modified %s, now %s (rewritten)", now.Key, orNone(was.MTime), orNone(now.MTime))
	}
	return ""
}

// SamePlan reports whether inputs now have the keys and labels of was,
// in the same order: a run's plan would place them as it placed those,
// whatever their sizes, times or generations.
func SamePlan(was, now []Input) bool {
	if len(was) != len(now) {
		return false
	}
	for i := range was {
		if was[i].Key != now[i].Key || was[i].Label != now[i].Label {
			return false
		}
	}
	return true
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func count(n int) string {
	if n == 1 {
		return "1 input"
	}
	return fmt.Sprintf("%d inputs", n)
}
