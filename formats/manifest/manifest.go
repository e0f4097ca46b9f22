// Package manifest is the on-disk contract between convert, which writes
// manifest.json beside the shards, and every reader of them.
package manifest

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/prep-dev/prep/formats"
)

// FileName is the manifest's name inside a shard directory.
const FileName = "manifest.json"

// FormatVersion is the newest version of the on-disk contract
// (docs/FORMAT.md) this prep reads and writes. A change that an existing
// reader would misread bumps it; readers refuse a version newer than they
// know. Manifests written before the field existed have version 1's
// layout. A run's manifest carries the oldest version whose readers read
// it right (WriteVersion): 3 only when it has an online recipe.
const FormatVersion = 3

// WriteVersion is the format version m is written with: 3 when it has an
// online recipe, which a version-2 reader would not apply, handing the
// model stored samples of another size; 2 otherwise, so that such
// datasets still open with older readers.
func WriteVersion(m *Manifest) int {
	if m.OnlineRecipe != "" {
		return 3
	}
	return 2
}

// Manifest describes a finished conversion. It holds nothing that depends
// on timing or scheduling, so equal runs write equal bytes.
//
// Inputs and InputsSHA256 identify the run's input list (InputsFileName):
// how many inputs (before copies), and the SHA-256 of its canonical text.
// Resume and merge compare them; older manifests have neither.
type Manifest struct {
	FormatVersion int               `json:"format_version"`
	DatasetID     string            `json:"dataset_id,omitempty"` // DatasetID of the whole run; absent in task parts, progress files and older manifests
	Version       string            `json:"version"`
	Format        string            `json:"format"`
	Recipe        string            `json:"recipe"`
	OnlineRecipe  string            `json:"online_recipe,omitempty"` // the ops after "|": the reader runs them every epoch (format version 3)
	Seed          uint64            `json:"seed"`
	Copies        int               `json:"copies"`
	Order         string            `json:"order"`            // "shuffle" or "sorted": how items are laid out (docs/FORMAT.md)
	Source        formats.Name      `json:"source,omitempty"` // SRC as convert was given it, local paths made absolute; resume and merge compare it
	Inputs        int               `json:"inputs,omitempty"`
	InputsSHA256  string            `json:"inputs_sha256,omitempty"`
	Options       map[string]string `json:"options,omitempty"`
	Classes       formats.Names     `json:"classes,omitempty"`
	Items         int               `json:"items"`           // inputs × copies in the whole plan
	ItemsPerShard int               `json:"items_per_shard"` // shard k holds plan positions [k*n, (k+1)*n)
	ShardCount    int               `json:"shard_count"`     // shards in the whole plan
	Task          *Task             `json:"task,omitempty"`  // set on a per-task part
	Samples       int               `json:"samples"`
	Bytes         int64             `json:"bytes"`
	Shards        []Shard           `json:"shards"`
	Skipped       []Skipped         `json:"skipped,omitempty"` // inputs that failed to convert
	Ignored       []Skipped         `json:"ignored,omitempty"` // files of types no handler takes
}

// Task identifies one part of a distributed conversion.
type Task struct {
	Index int `json:"index"`
	Count int `json:"count"`
	First int `json:"first_shard"`
	End   int `json:"end_shard"` // exclusive
}

// Shard is one shard file and the plan items it holds.
type Shard struct {
	Index int `json:"index"`
	formats.ShardInfo
	Skipped []Skipped `json:"skipped,omitempty"`
}

// Skipped is an input that produced no sample, and why. Its key, and
// the reason that may quote it, are kept exactly in JSON (formats.Name).
type Skipped struct {
	Key    string `json:"key"`
	Reason string `json:"reason"`
}

// skippedJSON is Skipped as JSON writes it.
type skippedJSON struct {
	Key    formats.Name `json:"key"`
	Reason formats.Name `json:"reason"`
}

// MarshalJSON writes s with its strings as formats.Name writes them.
func (s Skipped) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// The encoder that calls this escapes HTML itself, or not.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(skippedJSON{formats.Name(s.Key), formats.Name(s.Reason)}); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *Skipped) UnmarshalJSON(data []byte) error {
	var j skippedJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	s.Key, s.Reason = string(j.Key), string(j.Reason)
	return nil
}

// Marshal encodes m as indented JSON with a trailing newline.
func Marshal(m *Manifest) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Parse decodes a manifest.
func Parse(data []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("parse manifest: %w", err)
	}
	// Before these fields existed, every manifest had version 1's layout
	// and its items in sorted order.
	if m.FormatVersion == 0 {
		m.FormatVersion = 1
	}
	if m.Order == "" {
		m.Order = "sorted"
	}
	if m.FormatVersion > FormatVersion {
		return nil, fmt.Errorf("manifest format version %d is newer than this prep reads (%d): upgrade prep", m.FormatVersion, FormatVersion)
	}
	if m.FormatVersion < 1 {
		return nil, fmt.Errorf("manifest format version %d is not a version prep writes (1 to %d): the manifest is damaged; rerun prep convert", m.FormatVersion, FormatVersion)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Validate checks the shard entries that readers open files by, so that
// every reader refuses the same manifests: a file must be a plain name
// in the manifest's folder, since "../x" or "/x" would have inspect,
// bench-read and feed-test open and hash files outside it, and only a
// shard without samples (every input skipped) may name no file. Parse
// calls it.
func (m *Manifest) Validate() error {
	const fix = "the manifest is damaged; rerun prep convert (--resume keeps the shards that check out)"
	if m.Items < 0 || m.ItemsPerShard < 0 || m.ShardCount < 0 || m.Samples < 0 || m.Bytes < 0 || m.Copies < 0 {
		return fmt.Errorf("negative count (items %d, items_per_shard %d, shard_count %d, samples %d, bytes %d, copies %d): %s",
			m.Items, m.ItemsPerShard, m.ShardCount, m.Samples, m.Bytes, m.Copies, fix)
	}
	index := make(map[int]bool, len(m.Shards))
	files := make(map[string]bool, len(m.Shards))
	for i, s := range m.Shards {
		switch {
		case s.File == "" && s.Count > 0:
			return fmt.Errorf("shard entry %d (index %d) holds %d samples but names no file: %s", i, s.Index, s.Count, fix)
		case s.File != "" && !plainName(s.File):
			return fmt.Errorf("shard entry %d (index %d): file %q is not a plain file name (no /, \\, . or ..) in the manifest's folder: %s", i, s.Index, s.File, fix)
		case s.Index < 0 || s.Count < 0 || s.Bytes < 0:
			return fmt.Errorf("shard entry %d: negative index, count or bytes (%d, %d, %d): %s", i, s.Index, s.Count, s.Bytes, fix)
		case index[s.Index]:
			return fmt.Errorf("shard entry %d: index %d listed twice: %s", i, s.Index, fix)
		case s.File != "" && files[s.File]:
			return fmt.Errorf("shard entry %d: file %s listed twice: %s", i, s.File, fix)
		}
		index[s.Index] = true
		if s.File != "" {
			files[s.File] = true
		}
		if err := checkDatasets(s); err != nil {
			return fmt.Errorf("shard entry %d (%s): %w: %s", i, s.File, err, fix)
		}
	}
	return nil
}

// checkDatasets refuses datasets that lie outside their shard or overlap:
// readers read them at their offsets.
func checkDatasets(s Shard) error {
	type span struct {
		name     string
		from, to int64
	}
	var spans []span
	for _, d := range s.Datasets {
		if d.Offset == -1 {
			continue // not contiguous: read through the library
		}
		if d.Offset < 0 || d.Size < 0 || d.Size > s.Bytes || d.Offset > s.Bytes-d.Size {
			return fmt.Errorf("dataset %s at offset %d, %d bytes, lies outside the %d-byte shard", d.Name, d.Offset, d.Size, s.Bytes)
		}
		spans = append(spans, span{d.Name, d.Offset, d.Offset + d.Size})
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	for i := 1; i < len(spans); i++ {
		if spans[i].from < spans[i-1].to {
			return fmt.Errorf("datasets %s and %s overlap", spans[i-1].name, spans[i].name)
		}
	}
	return nil
}

// plainName reports whether name names a file directly in a folder.
func plainName(name string) bool {
	return name != "." && name != ".." && !strings.ContainsAny(name, `/\`) && !filepath.IsAbs(name)
}

// Read loads dir/manifest.json.
func Read(dir string) (*Manifest, error) {
	path := filepath.Join(dir, FileName)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Write stores m as dir/manifest.json, atomically.
func Write(dir string, m *Manifest) error {
	data, err := Marshal(m)
	if err != nil {
		return err
	}
	return WriteFileAtomic(filepath.Join(dir, FileName), data)
}

// WriteFileAtomic writes data to path.tmp, syncs it and renames it to path.
func WriteFileAtomic(path string, data []byte) error {
	tmp := formats.TempName(path)
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// Totals recomputes what the shards determine: Samples, Bytes, Skipped
// and, for a manifest of the whole run (no task part, every planned shard
// present), DatasetID. Both the single-process writer and the merge of
// task parts end with it, so they give the same ID.
func (m *Manifest) Totals() {
	m.Samples, m.Bytes, m.Skipped = 0, 0, nil
	for _, s := range m.Shards {
		m.Samples += s.Count
		m.Bytes += s.Bytes
		m.Skipped = append(m.Skipped, s.Skipped...)
	}
	m.DatasetID = ""
	if m.Task == nil && m.complete() {
		m.DatasetID = DatasetID(m)
	}
}

// complete reports whether m lists every shard of its plan, in order.
func (m *Manifest) complete() bool {
	if len(m.Shards) != m.ShardCount {
		return false
	}
	for i, s := range m.Shards {
		if s.Index != i {
			return false
		}
	}
	return true
}

// DatasetID identifies what a run produced: the SHA-256, in lowercase hex,
// of a text naming the format version, recipe, seed and order and every
// shard's checksum in shard order (docs/FORMAT.md §2.5 spells it out).
// Equal inputs, recipe and seed give the same ID whatever --workers, task
// split or machine, and any changed shard byte changes it. Where the
// inputs came from (Source) and which prep wrote them (Version) are not
// part of it: they do not change the shards.
func DatasetID(m *Manifest) string {
	h := sha256.New()
	line := func(k, v string) { h.Write([]byte(k + "=" + v + "\n")) }
	h.Write([]byte("prep-dataset-id\n"))
	line("format_version", strconv.Itoa(m.FormatVersion))
	line("recipe", m.Recipe)
	if m.OnlineRecipe != "" {
		line("online_recipe", m.OnlineRecipe) // only when set: earlier IDs stay as they were
	}
	line("seed", strconv.FormatUint(m.Seed, 10))
	line("order", m.Order)
	for _, s := range m.Shards {
		line("shard", strconv.Itoa(s.Index)+":"+s.SHA256)
	}
	return hex.EncodeToString(h.Sum(nil))
}
