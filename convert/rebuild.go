package convert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/manifest"
)

// RebuildOptions configure Rebuild.
type RebuildOptions struct {
	Format  formats.ReadWriteFormat  // the run's shard format
	Handler func(key string) Handler // made from the manifest's recipe and options
	Items   int                      // items to re-convert
	Seed    uint64                   // picks them
	// Shard returns a local path of one of the run's shard files (by its
	// manifest name), fetching it first when the run is remote. Rebuild
	// asks for each shard once, in shard order, and is done with it
	// before it asks for the next.
	Shard   func(ctx context.Context, file string) (string, error)
	TempDir string // where rebuilt samples are written; "" = os.TempDir()
	// Inputs reads the run's input list (manifest.InputsFileName), to
	// name the inputs that changed when the source's list is not the
	// manifest's; nil or an error: only the count and hash are compared.
	Inputs func(ctx context.Context) ([]byte, error)
}

// Mismatch is a difference between a shard and what the recipe makes now
// from its input.
type Mismatch struct {
	Key     formats.Name `json:"key"`   // sample key, or the item's key when it has no sample (any bytes, kept exactly)
	Shard   string       `json:"shard"` // shard file, or "shard N" when the run wrote none
	Problem string       `json:"problem"`
}

// Rebuilt reports a Rebuild.
type Rebuilt struct {
	Items      int        `json:"items"`   // items re-converted
	Samples    int        `json:"samples"` // samples compared with the shards
	Skipped    int        `json:"skipped"` // items the run skipped that fail again, as they should
	Shards     int        `json:"shards"`  // shards read
	Mismatches []Mismatch `json:"mismatches"`
	// SourceChanged says how the source's inputs differ from the run's
	// where they kept their names and labels (rewritten, or copied with
	// new times): they are compared all the same, and mismatches may come
	// from them rather than from the shards. "" when the input list is
	// the run's.
	SourceChanged string `json:"source_changed,omitempty"`
}

// Rebuild re-converts opt.Items seeded-random items of the run m
// describes from its inputs l, and compares their samples with those in
// the shards: key, label, every field's dtype, shape and bytes, and for
// tar shards the augmentation parameters. It proves the shards are what
// the recipe makes from these inputs, and names every difference: a
// changed input, a damaged shard, another decoder. An error means the
// comparison could not be made (a changed listing, an unreadable shard).
func Rebuild(ctx context.Context, l *Listing, m *manifest.Manifest, opt RebuildOptions) (*Rebuilt, error) {
	if m.Task != nil {
		return nil, errTaskPart
	}
	// The input list, where the manifest records one, names what changed
	// better than checkRebuild's counts.
	changed, err := rebuildInputs(ctx, l, m, opt.Inputs)
	if err != nil {
		return nil, err
	}
	if err := checkRebuild(l, m); err != nil {
		return nil, err
	}
	order, err := ParseOrder(m.Order)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if opt.TempDir == "" {
		opt.TempDir = os.TempDir()
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x72656275696c64)) // "rebuild"
	positions := pickDistinct(rng, m.Items, opt.Items)
	lay := newLayout(order, len(l.Entries), m.Copies, m.ItemsPerShard, m.Seed)
	rb := &rebuild{opt: &opt, l: l, m: m, res: &Rebuilt{Mismatches: []Mismatch{}, SourceChanged: changed}}
	for len(positions) > 0 {
		shard := positions[0] / m.ItemsPerShard
		n := 1
		for n < len(positions) && positions[n]/m.ItemsPerShard == shard {
			n++
		}
		var items []rebuildItem
		for _, p := range positions[:n] {
			e, c := lay.item(p)
			items = append(items, rebuildItem{entry: l.Entries[e], copy: c})
		}
		positions = positions[n:]
		if err := rb.shard(ctx, shard, items); err != nil {
			return nil, err
		}
	}
	return rb.res, nil
}

var errTaskPart = errors.New("the manifest is one task's part: rebuild from the merged manifest.json (prep merge-manifest)")

// checkRebuild refuses a listing whose plan is not the run's: positions
// would then name other inputs, and every comparison would fail.
func checkRebuild(l *Listing, m *manifest.Manifest) error {
	switch {
	case m.Task != nil:
		return errTaskPart
	case m.ItemsPerShard <= 0 || m.Copies <= 0:
		return fmt.Errorf("the manifest plans %d items per shard and %d copies: it is damaged", m.ItemsPerShard, m.Copies)
	case len(l.Entries)*m.Copies != m.Items:
		return fmt.Errorf("the source lists %d inputs (%d items with %d copies), the run planned %d items: inputs were added or removed since it ran",
			len(l.Entries), len(l.Entries)*m.Copies, m.Copies, m.Items)
	case !slices.Equal(l.Classes, m.Classes):
		return errors.New("the source's classes differ from the run's: class folders were added, removed or renamed since it ran")
	}
	return nil
}

// SourceChanged is Rebuild's error when the source lists other inputs
// than the run did (added, removed, renamed, relabelled): the shards were
// made from other inputs, so comparing bytes would prove nothing.
type SourceChanged struct{ Change string }

func (e *SourceChanged) Error() string {
	return fmt.Sprintf("the source changed since the run (%s): the shards were made from other inputs, so their bytes cannot be checked against these; pass --src with the inputs the run read, or convert again",
		e.Change)
}

// rebuildInputs compares the source's input list with the run's. Inputs
// added, removed, renamed or relabelled change the plan: every position
// would name another input, so that is an error (*SourceChanged). Inputs
// rewritten or copied (other sizes, times or generations) keep it: they
// are compared, and how they changed is returned for the report.
func rebuildInputs(ctx context.Context, l *Listing, m *manifest.Manifest, read func(context.Context) ([]byte, error)) (string, error) {
	if m.InputsSHA256 == "" { // an older manifest: checkRebuild compared counts
		return "", nil
	}
	var prior []manifest.Input
	if read != nil {
		if data, err := read(ctx); err == nil {
			prior = PriorInputs(data, m)
		}
	}
	n, sum := InputsSum(l)
	if n == m.Inputs && sum == m.InputsSHA256 {
		return "", nil
	}
	if prior == nil {
		return "", &SourceChanged{inputsSumDiff(m.Inputs, m.InputsSHA256, n, sum) + "; " + manifest.InputsFileName + " beside the manifest, which would name them, is missing or not the run's"}
	}
	now := InputList(l)
	diff := manifest.DiffInputs(prior, now)
	if manifest.SamePlan(prior, now) {
		return diff, nil
	}
	return "", &SourceChanged{diff}
}

type rebuild struct {
	opt *RebuildOptions
	l   *Listing
	m   *manifest.Manifest
	res *Rebuilt
}

// rebuildItem is one item to re-convert and what it gave.
type rebuildItem struct {
	entry   Entry
	copy    int
	samples []formats.Sample
	err     error
}

func (it *rebuildItem) key(copies int) string { return CopyKey(it.entry.Key, it.copy, copies) }

// shard re-converts items of shard index and compares them with it.
func (rb *rebuild) shard(ctx context.Context, index int, items []rebuildItem) error {
	sh, name := rb.entry(index)
	skipped := map[string]string{}
	for _, s := range sh.Skipped {
		skipped[s.Key] = s.Reason
	}
	want, err := rb.convertItems(ctx, items, skipped, name)
	if err != nil {
		return err
	}
	if sh.File == "" {
		for _, k := range slices.Sorted(maps.Keys(want)) {
			rb.mismatch(k, name, "the run wrote no shard file here, but the sample converts now")
		}
		return nil
	}
	path, err := rb.opt.Shard(ctx, sh.File)
	if err != nil {
		return fmt.Errorf("shard %s: %w", sh.File, err)
	}
	rb.res.Shards++
	stored, keys, err := shardSamples(rb.opt.Format, path, sh.Datasets, want)
	if err != nil {
		return fmt.Errorf("read %s: %w", sh.File, err)
	}
	if err := rb.compare(name, stored, want); err != nil {
		return err
	}
	rb.extras(name, keys, items, want)
	return nil
}

// convertItems re-converts items and sets what the run did with each
// against what the rebuild does: both skip it, or both give samples,
// which it returns by key for the comparison.
func (rb *rebuild) convertItems(ctx context.Context, items []rebuildItem, skipped map[string]string, name string) (map[string]*formats.Sample, error) {
	want := map[string]*formats.Sample{}
	for i := range items {
		it := &items[i]
		rb.res.Items++
		if err := rb.convert(ctx, it); err != nil {
			return nil, err
		}
		key := it.key(rb.m.Copies)
		reason, wasSkipped := skipped[key]
		wasSkipped = wasSkipped && !refused(reason)
		switch {
		case it.err != nil && wasSkipped:
			rb.res.Skipped++
		case it.err != nil:
			rb.mismatch(key, name, fmt.Sprintf("does not convert now (%v), but the run converted it", it.err))
		case wasSkipped:
			rb.mismatch(key, name, fmt.Sprintf("the run skipped it (%s), but it converts now: the input changed", reason))
		}
		if it.err != nil || wasSkipped {
			continue
		}
		for j := range it.samples {
			s := &it.samples[j]
			if reason, ok := skipped[s.Key]; ok && refused(reason) {
				rb.res.Skipped++ // the shard's writer refused it beside the shard's first sample
				continue
			}
			want[s.Key] = s
		}
	}
	return want, nil
}

// compare compares the rebuilt samples with those read from the shard.
func (rb *rebuild) compare(name string, stored *readSamples, want map[string]*formats.Sample) error {
	norms, err := rb.normalize(want)
	if err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		got, ok := stored.samples[k]
		if bad := stored.bad[k]; bad != nil {
			rb.mismatch(k, name, fmt.Sprintf("the shard's copy does not decode: %v", bad))
			continue
		}
		if !ok {
			rb.mismatch(k, name, "missing from the shard, which the rebuild says must hold it")
			continue
		}
		rb.res.Samples++
		if p := diffSamples(got, norms[k]); p != "" {
			rb.mismatch(k, name, p)
		}
	}
	return nil
}

// extras names samples the shard holds of the rebuilt items that the
// rebuild does not make (a video that lost frames).
func (rb *rebuild) extras(name string, keys []string, items []rebuildItem, want map[string]*formats.Sample) {
	for i := range items {
		if items[i].err != nil {
			continue
		}
		for _, k := range keys {
			if _, ok := want[k]; !ok && ofItem(k, items[i].entry.Key, items[i].copy, rb.m.Copies) {
				rb.mismatch(k, name, "the shard holds this sample of the item, the rebuild does not make it")
			}
		}
	}
}

// refused reports whether a skip reason is a shard writer's refusal of a
// sample unlike the shard's first (FORMAT.md §4.4): it depends on the
// other samples of the shard, so one sample rebuilt alone cannot repeat it.
func refused(reason string) bool {
	return strings.Contains(reason, formats.ErrIncompatible.Error())
}

// entry is shard index's manifest entry and a name for messages.
func (rb *rebuild) entry(index int) (manifest.Shard, string) {
	for _, s := range rb.m.Shards {
		if s.Index == index {
			if s.File == "" {
				return s, fmt.Sprintf("shard %d (no file)", index)
			}
			return s, s.File
		}
	}
	return manifest.Shard{Index: index}, fmt.Sprintf("shard %d (not in the manifest)", index)
}

func (rb *rebuild) mismatch(key, shard, problem string) {
	rb.res.Mismatches = append(rb.res.Mismatches, Mismatch{Key: formats.Name(key), Shard: shard, Problem: problem})
}

// convert fetches and converts one item as the run did. Only a fatal
// error (a missing tool, a refused bucket) is returned; others are the
// item's.
func (rb *rebuild) convert(ctx context.Context, it *rebuildItem) error {
	in, err := Fetch(ctx, it.entry)
	if err == nil {
		it.samples, err = ConvertItem(ctx, rb.opt.Handler(it.entry.Key), it.entry, in, it.copy, rb.m.Copies, rb.m.Seed)
	}
	if err != nil && (IsFatal(err) || ctx.Err() != nil) {
		return fmt.Errorf("%s: %w", it.entry.Src.URI(it.entry.Key), err)
	}
	it.err = err
	return nil
}

// normalize passes rebuilt samples through the run's writer and reader,
// so that they compare with stored ones in the form the format keeps (a
// grey image comes back (H,W,1) from a PNG, an npz field by its member
// name). They go through one temporary shard, written and synced once;
// a sample the writer will not put beside the others (another dtype:
// itself a mismatch) goes through a shard of its own.
func (rb *rebuild) normalize(want map[string]*formats.Sample) (map[string]formats.Sample, error) {
	keys := slices.Sorted(maps.Keys(want))
	out := make(map[string]formats.Sample, len(keys))
	for len(keys) > 0 {
		var alone []string
		got, err := rb.roundTrip(keys, want, &alone)
		if err != nil {
			return nil, err
		}
		maps.Copy(out, got)
		keys = alone
	}
	return out, nil
}

// roundTrip writes the samples of keys to a temporary shard and reads
// them back. Those the writer refuses as incompatible with the shard's
// first go to alone, for the next shard.
func (rb *rebuild) roundTrip(keys []string, want map[string]*formats.Sample, alone *[]string) (map[string]formats.Sample, error) {
	f := rb.opt.Format
	path := filepath.Join(rb.opt.TempDir, fmt.Sprintf(".prep-rebuild-%d%s", os.Getpid(), f.Ext()))
	w, err := f.Create(path, formats.ShardMeta{Version: rb.m.Version, Recipe: rb.m.Recipe, Seed: rb.m.Seed, Classes: rb.m.Classes})
	if err != nil {
		return nil, fmt.Errorf("rebuild: %w (set TMPDIR to a writable folder)", err)
	}
	defer os.Remove(path)
	if ex, ok := w.(formats.Expecter); ok {
		ex.Expect(len(keys))
	}
	for i, k := range keys {
		err := w.Add(want[k])
		if i > 0 && errors.Is(err, formats.ErrIncompatible) {
			*alone = append(*alone, k)
			continue
		}
		if err != nil {
			w.Abort()
			return nil, fmt.Errorf("rebuild: sample %s: %w", k, err)
		}
	}
	info, err := w.Close()
	if err != nil {
		return nil, fmt.Errorf("rebuild: %w", err)
	}
	got, _, err := shardSamples(f, path, info.Datasets, want)
	if err != nil {
		return nil, fmt.Errorf("rebuild: read back: %w", err)
	}
	for k, bad := range got.bad {
		return nil, fmt.Errorf("rebuild: read back %s: %w", k, bad)
	}
	for _, k := range keys {
		if _, ok := got.samples[k]; !ok && !slices.Contains(*alone, k) {
			return nil, fmt.Errorf("rebuild: %s did not read back from its own shard", k)
		}
	}
	return got.samples, nil
}

// ofItem reports whether sample key k belongs to copy c of input key:
// the key itself, or a frame (#f) or row (#r) of it (FORMAT.md §4.1).
func ofItem(k, key string, c, copies int) bool {
	// CopyKey("", c, copies) is the copy's suffix, "" for a single copy.
	var ok bool
	if k, ok = strings.CutSuffix(k, CopyKey("", c, copies)); !ok {
		return false
	}
	if k == key {
		return true
	}
	rest, ok := strings.CutPrefix(k, key+"#")
	if !ok || len(rest) < 2 || (rest[0] != 'f' && rest[0] != 'r') {
		return false
	}
	_, err := strconv.ParseUint(rest[1:], 10, 64)
	return err == nil
}

// diffSamples says how stored differs from rebuilt, or "".
func diffSamples(stored, rebuilt formats.Sample) string {
	var p []string
	if stored.Label != rebuilt.Label {
		p = append(p, fmt.Sprintf("label %d in the shard, %d rebuilt", stored.Label, rebuilt.Label))
	}
	if stored.Rate != rebuilt.Rate {
		p = append(p, fmt.Sprintf("audio rate %d Hz in the shard, %d rebuilt", stored.Rate, rebuilt.Rate))
	}
	byName := map[string]formats.Tensor{}
	for _, f := range stored.Fields {
		byName[f.Name] = f.Tensor
	}
	for _, f := range rebuilt.Fields {
		t, ok := byName[f.Name]
		delete(byName, f.Name)
		if !ok {
			p = append(p, fmt.Sprintf("field %s is missing from the shard", f.Name))
			continue
		}
		if d := diffTensor(t, f.Tensor); d != "" {
			p = append(p, f.Name+": "+d)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		p = append(p, fmt.Sprintf("the shard has a field %s the rebuild does not make", name))
	}
	if a, b := paramsJSON(stored.Params), paramsJSON(rebuilt.Params); a != b {
		p = append(p, fmt.Sprintf("augmentation parameters %s in the shard, %s rebuilt", a, b))
	}
	return strings.Join(p, "; ")
}

// diffTensor says how two tensors differ, or "".
func diffTensor(stored, rebuilt formats.Tensor) string {
	if stored.DType != rebuilt.DType || !slices.Equal(stored.Shape, rebuilt.Shape) {
		return fmt.Sprintf("%s%v in the shard, %s%v rebuilt", stored.DType, stored.Shape, rebuilt.DType, rebuilt.Shape)
	}
	if bytes.Equal(stored.Data, rebuilt.Data) {
		return ""
	}
	if len(stored.Data) != len(rebuilt.Data) {
		return fmt.Sprintf("%d bytes in the shard, %d rebuilt", len(stored.Data), len(rebuilt.Data))
	}
	first, n := -1, 0
	for i := range stored.Data {
		if stored.Data[i] != rebuilt.Data[i] {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	return fmt.Sprintf("%d of %d bytes differ, the first at byte %d (shard %#02x, rebuilt %#02x)",
		n, len(stored.Data), first, stored.Data[first], rebuilt.Data[first])
}

// paramsJSON is params as sorted JSON; HDF5 shards keep none, so there
// both sides are empty.
func paramsJSON(params map[string]any) string {
	if len(params) == 0 {
		return "{}"
	}
	b, err := json.Marshal(params)
	if err != nil {
		return fmt.Sprint(params)
	}
	return string(b)
}

// readSamples are samples read from a shard by key, and those of them
// whose stored bytes do not decode (a tar member's PNG with a bad CRC).
type readSamples struct {
	samples map[string]formats.Sample
	bad     map[string]error
}

// shardSamples reads from a shard file, with its format's reader, the
// samples whose keys want holds, and lists every key the shard holds, in
// order. datasets is the shard's manifest record of its layout.
func shardSamples[V any](f formats.ShardOpener, path string, datasets []formats.DatasetInfo, want map[string]V) (*readSamples, []string, error) {
	r, err := f.Open(path, datasets)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	out := &readSamples{samples: map[string]formats.Sample{}, bad: map[string]error{}}
	var keys []string
	for s, err := range r.Samples() {
		if s == nil {
			return nil, nil, err
		}
		keys = append(keys, s.Key)
		if _, ok := want[s.Key]; !ok {
			continue
		}
		if err != nil {
			out.bad[s.Key] = err
			continue
		}
		out.samples[s.Key] = *s
	}
	return out, keys, nil
}
