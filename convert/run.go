package convert

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/manifest"
)

// Options configure a run.
type Options struct {
	Sink    cloudsrc.Sink
	Format  formats.ShardFormat
	Handler func(key string) Handler // the handler for a key, nil if none takes it

	Recipe  string // canonical recipe, recorded in shards and manifest
	Seed    uint64
	Copies  int               // augmented copies of each input (>= 1)
	Order   Order             // how items are laid out in shards; "" is OrderShuffle
	Options map[string]string // other settings that shape the output, recorded in the manifest
	Version string
	Source  string // where the inputs are (SRC), recorded in the manifest for prep inspect --rebuild

	ShardSize     int64 // target bytes per shard
	ItemsPerShard int   // items per shard; 0 = derived from ShardSize and the first sample
	Workers       int   // decode workers, and as many finishing (Stager); 0 = NumCPU
	IOWorkers     int   // concurrent fetches; 0 = DefaultIOWorkers

	TaskIndex, TaskCount int // this task's part of a distributed run

	Resume    bool // keep finished shards, redo the rest
	Overwrite bool // replace what an earlier run left in the destination
	Strict    bool // a bad input fails the run

	Progress func(Progress) // called from the sink after every input
}

// DefaultIOWorkers is how many fetches run at once unless Options say
// otherwise: remote storage needs many requests in flight to hide latency.
const DefaultIOWorkers = 64

// Progress is a snapshot of a running conversion.
type Progress struct {
	Items, TotalItems int // items (input × copy) done and planned in this task
	Samples           int
	Bytes             int64 // sample payload written
	Skipped           int
	Shards            int
}

// Summary reports a finished run.
type Summary struct {
	Items         int                `json:"items"`
	Samples       int                `json:"samples"`
	Bytes         int64              `json:"bytes"`
	ShardsWritten int                `json:"shards_written"`
	ShardsKept    int                `json:"shards_kept"`
	SamplesKept   int                `json:"samples_kept"` // in the kept shards: Samples counts them, SamplesPerSec not
	BytesKept     int64              `json:"bytes_kept"`
	Skipped       []manifest.Skipped `json:"skipped"`
	Ignored       []manifest.Skipped `json:"ignored"`
	Seconds       float64            `json:"seconds"`
	SamplesPerSec float64            `json:"samples_per_sec"`
	MBPerSec      float64            `json:"mb_per_sec"`
	Manifest      string             `json:"manifest"`
}

// Fatal marks an error that must stop the run rather than skip one input
// (a missing tool, a permission error on the whole bucket).
func Fatal(err error) error { return fatalError{err} }

type fatalError struct{ err error }

func (e fatalError) Error() string { return e.err.Error() }
func (e fatalError) Unwrap() error { return e.err }

// IsFatal reports whether err, or an error it wraps, was marked Fatal or
// says so itself through a Fatal() bool method.
func IsFatal(err error) bool {
	var fe fatalError
	if errors.As(err, &fe) {
		return true
	}
	var f interface{ Fatal() bool }
	return errors.As(err, &f) && f.Fatal()
}

// ShardName is the file name of global shard i.
func ShardName(i int, ext string) string { return fmt.Sprintf("shard-%06d%s", i, ext) }

// TaskManifestName is the manifest part a task of a distributed run writes.
func TaskManifestName(index int) string { return fmt.Sprintf("manifest-task-%05d.json", index) }

func progressName(o *Options) string {
	if o.TaskCount > 1 {
		return fmt.Sprintf(".prep-progress-task-%05d.json", o.TaskIndex)
	}
	return ".prep-progress.json"
}

func (o *Options) defaults() error {
	if o.Copies <= 0 {
		o.Copies = 1
	}
	order, err := ParseOrder(string(o.Order))
	if err != nil {
		return err
	}
	o.Order = order
	if o.Workers <= 0 {
		o.Workers = runtime.NumCPU()
	}
	if o.IOWorkers <= 0 {
		o.IOWorkers = DefaultIOWorkers
	}
	if o.ShardSize <= 0 {
		o.ShardSize = 256 << 20
	}
	if o.TaskCount <= 0 {
		o.TaskCount = 1
	}
	if o.TaskIndex < 0 || o.TaskIndex >= o.TaskCount {
		return fmt.Errorf("task index %d is outside 0..%d (--task-index/--task-count)", o.TaskIndex, o.TaskCount-1)
	}
	if o.Resume && o.Overwrite {
		return fmt.Errorf("--resume and --overwrite exclude each other")
	}
	if o.Sink == nil || o.Format == nil || o.Handler == nil {
		return fmt.Errorf("convert: Sink, Format and Handler are required")
	}
	return nil
}

// Run converts the listed inputs (this task's share of them) into shards
// and writes the manifest.
func Run(ctx context.Context, l *Listing, opt Options) (*manifest.Manifest, *Summary, error) {
	start := time.Now()
	if err := opt.defaults(); err != nil {
		return nil, nil, err
	}
	if len(l.Entries) == 0 {
		return nil, nil, fmt.Errorf("no convertible inputs found (%d files of unsupported types)", len(l.Ignored))
	}
	if len(l.Entries) > math.MaxInt32 {
		return nil, nil, fmt.Errorf("%d inputs: split them into runs of at most %d", len(l.Entries), math.MaxInt32)
	}
	r := &run{opt: opt, l: l, items: len(l.Entries) * opt.Copies}
	unlock, err := lock(ctx, opt.Sink, LockName(opt.TaskIndex, opt.TaskCount))
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	prior, err := r.prepareDestination(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := r.plan(ctx, prior); err != nil {
		return nil, nil, err
	}
	if err := r.resume(ctx, prior); err != nil {
		return nil, nil, err
	}
	err = r.pipeline(ctx)
	if werr := opt.Sink.Wait(); err == nil && werr != nil {
		err = werr
	}
	if err != nil {
		return nil, nil, err
	}
	m := r.manifest()
	name := manifest.FileName
	if opt.TaskCount > 1 {
		name = TaskManifestName(opt.TaskIndex)
	}
	if err := r.publishJSON(ctx, name, m); err != nil {
		return nil, nil, err
	}
	if err := opt.Sink.Wait(); err != nil {
		return nil, nil, err
	}
	r.removeFile(ctx, progressName(&r.opt))
	s := &Summary{
		Items:         r.hi - r.lo,
		ShardsWritten: r.written,
		ShardsKept:    r.kept,
		Samples:       m.Samples, // the manifest's totals, in shard order
		Bytes:         m.Bytes,
		Skipped:       append([]manifest.Skipped{}, m.Skipped...), // [] in JSON, not null
		Ignored:       append([]manifest.Skipped{}, l.Ignored...),
		Seconds:       time.Since(start).Seconds(),
		Manifest:      opt.Sink.URI() + "/" + name,
	}
	for _, k := range r.keep {
		s.SamplesKept += k.Count
		s.BytesKept += k.Bytes
	}
	if s.Seconds > 0 {
		s.SamplesPerSec = float64(r.newSamples) / s.Seconds
		s.MBPerSec = float64(r.newBytes) / 1e6 / s.Seconds
	}
	return m, s, nil
}

type run struct {
	opt      Options
	l        *Listing
	items    int
	layout   *layout // position -> item
	perShard int
	nShards  int
	first    int // this task's shards: [first, end)
	end      int
	lo, hi   int // this task's plan positions: [lo, hi)
	keep     map[int]manifest.Shard
	shards   map[int]manifest.Shard
	written  int
	kept     int

	newSamples int
	newBytes   int64
}

// ours reports whether a destination file is one prep writes: a shard
// ("shard-000012.h5"), a manifest, a task's manifest part, a progress file,
// or one of those under its temporary name. Anything else, even a
// "shard-notes.txt" or a "backup.tmp", is the user's and is never removed.
func ours(name string) bool {
	return formats.IsPrepFile(name) || formats.IsTemp(name) || isLockFile(name)
}

// prepareDestination refuses a destination holding an earlier run unless
// --resume or --overwrite says what to do with it, and returns the earlier
// manifest (final or in progress) for --resume.
func (r *run) prepareDestination(ctx context.Context) (*manifest.Manifest, error) {
	names, err := r.opt.Sink.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list destination %s: %w", r.opt.Sink.URI(), err)
	}
	var foreign, prev []string
	for _, n := range names {
		switch {
		case !ours(n):
			foreign = append(foreign, n)
		case isLockFile(n):
			// This run's lock, another task's, or one a killed run was
			// creating: lock has checked them.
		case formats.IsTemp(n):
			// Removed below, with or without --overwrite.
		case r.opt.TaskCount == 1 || n == r.manifestName() || n == progressName(&r.opt):
			prev = append(prev, n)
		}
		// Other tasks of a distributed run write beside this one; only
		// this task's own manifest part and progress mark an earlier run.
	}
	if len(foreign) > 0 && !r.opt.Resume && !r.opt.Overwrite {
		return nil, fmt.Errorf("destination %s holds other files (%s): choose an empty folder, or pass --overwrite to write beside them",
			r.opt.Sink.URI(), strings.Join(first(foreign, 3), ", "))
	}
	if len(prev) > 0 && !r.opt.Resume && !r.opt.Overwrite {
		return nil, fmt.Errorf("destination %s already holds shards from an earlier run: pass --resume to finish it or --overwrite to replace it", r.opt.Sink.URI())
	}
	// Unfinished files of a killed run are never kept.
	entries, _ := os.ReadDir(r.opt.Sink.Dir())
	for _, e := range entries {
		if formats.IsTemp(e.Name()) && (r.opt.TaskCount == 1 || r.ownsTemp(e.Name())) {
			os.Remove(filepath.Join(r.opt.Sink.Dir(), e.Name()))
		}
	}
	if r.opt.Overwrite && r.opt.TaskCount == 1 {
		// Replace the earlier run whole, so no stale shard outlives it;
		// a task of a distributed run rewrites only its own shards. A
		// file already gone (another process cleaning up) is no error.
		for _, n := range prev {
			if err := r.opt.Sink.Remove(ctx, n); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("--overwrite: remove %s/%s: %w (remove it by hand, or choose another destination)", r.opt.Sink.URI(), n, err)
			}
		}
	}
	if !r.opt.Resume {
		return nil, nil
	}
	for _, name := range []string{progressName(&r.opt), r.manifestName()} {
		data, err := r.opt.Sink.ReadFile(ctx, name)
		if err != nil {
			continue
		}
		m, err := manifest.Parse(data)
		if err != nil {
			return nil, fmt.Errorf("--resume: %s/%s: %w (remove it, or use --overwrite)", r.opt.Sink.URI(), name, err)
		}
		return m, nil
	}
	return nil, nil
}

func (r *run) manifestName() string {
	if r.opt.TaskCount > 1 {
		return TaskManifestName(r.opt.TaskIndex)
	}
	return manifest.FileName
}

// ownsTemp reports whether a temp file belongs to one of this task's shards;
// other tasks may be writing beside it.
func (r *run) ownsTemp(name string) bool {
	var i int
	if _, err := fmt.Sscanf(name, "shard-%06d", &i); err != nil {
		return false
	}
	return r.end > 0 && i >= r.first && i < r.end
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}

// plan fixes the number of items per shard and this task's share.
func (r *run) plan(ctx context.Context, prior *manifest.Manifest) error {
	switch {
	case r.opt.ItemsPerShard > 0:
		r.perShard = r.opt.ItemsPerShard
	case prior != nil && prior.ItemsPerShard > 0:
		r.perShard = prior.ItemsPerShard
	default:
		n, err := r.probe(ctx)
		if err != nil {
			return err
		}
		r.perShard = n
		// The probe's sample is garbage now, but a collection would come
		// only after the pipeline has allocated as much again: for one
		// large sample (a 2 GB .npz member) that doubled the peak.
		runtime.GC()
	}
	r.nShards = (r.items + r.perShard - 1) / r.perShard
	r.layout = newLayout(r.opt.Order, len(r.l.Entries), r.opt.Copies, r.perShard, r.opt.Seed)
	r.first, r.end = TaskShards(r.nShards, r.opt.TaskIndex, r.opt.TaskCount)
	r.lo = min(r.first*r.perShard, r.items)
	r.hi = min(r.end*r.perShard, r.items)
	return nil
}

// TaskShards splits n shards into count contiguous runs and returns task
// index's run [first, end).
func TaskShards(n, index, count int) (first, end int) {
	return n * index / count, n * (index + 1) / count
}

// probe derives how many items fill a shard (ItemsPerShard).
func (r *run) probe(ctx context.Context) (int, error) {
	return ItemsPerShard(ctx, r.l, r.opt.Handler, r.opt.Seed, r.opt.ShardSize)
}

// ItemsPerShard converts the first convertible input to learn a sample's
// size and derives how many items fill a shard of shardSize bytes, as a
// run without --items-per-shard does; every task of a distributed run
// probes the same input, so all agree on the shard boundaries.
func ItemsPerShard(ctx context.Context, l *Listing, handler func(key string) Handler, seed uint64, shardSize int64) (int, error) {
	var lastErr error
	for i := 0; i < len(l.Entries) && i < 32; i++ {
		e := l.Entries[i]
		in, err := fetch(ctx, e)
		if err != nil {
			if IsFatal(err) {
				return 0, err
			}
			lastErr = fmt.Errorf("%s: %w", e.Key, err)
			continue
		}
		samples, err := handler(e.Key).Samples(ctx, in, 0, NewRand(seed, e.Key, 0))
		if err != nil {
			if IsFatal(err) {
				return 0, err
			}
			lastErr = fmt.Errorf("%s: %w", e.Key, err)
			continue
		}
		var size int64
		for i := range samples {
			size += samples[i].Bytes()
		}
		if size == 0 {
			continue
		}
		return int(max(1, shardSize/size)), nil
	}
	if lastErr != nil {
		return 0, fmt.Errorf("none of the first inputs could be converted (fix or remove them); last error: %w", lastErr)
	}
	return 1024, nil
}

// resume keeps the finished shards of an earlier run with the same plan.
func (r *run) resume(ctx context.Context, prior *manifest.Manifest) error {
	r.keep = map[int]manifest.Shard{}
	r.shards = map[int]manifest.Shard{}
	if prior == nil {
		return nil
	}
	want := r.header()
	if diff := sameRun(prior, want); diff != "" {
		return fmt.Errorf("--resume: the earlier run in %s differs (%s): rerun with its settings, or use --overwrite", r.opt.Sink.URI(), diff)
	}
	present, err := r.destFiles(ctx)
	if err != nil {
		return err
	}
	for _, s := range prior.Shards {
		if s.Index < r.first || s.Index >= r.end {
			continue
		}
		if s.File != "" {
			f, ok := present[s.File]
			if !ok {
				continue
			}
			if ok, err := r.verify(s, f); err != nil || !ok {
				continue
			}
		}
		r.keep[s.Index] = s
		r.shards[s.Index] = s
		r.kept++
	}
	return nil
}

// destFiles lists the destination by name; a remote sink also gives each
// file's size and CRC32C.
func (r *run) destFiles(ctx context.Context) (map[string]*cloudsrc.FileInfo, error) {
	present := map[string]*cloudsrc.FileInfo{}
	if fl, ok := r.opt.Sink.(interface {
		Files(context.Context) ([]cloudsrc.FileInfo, error)
	}); ok {
		files, err := fl.Files(ctx)
		for i := range files {
			present[files[i].Name] = &files[i]
		}
		return present, err
	}
	names, err := r.opt.Sink.List(ctx)
	for _, n := range names {
		present[n] = nil
	}
	return present, err
}

// verify checks a kept shard against the manifest: a local one by its
// sha256, a remote one (f, as listed) by the size and CRC32C that Cloud
// Storage keeps, without downloading it. A remote shard whose manifest
// records no CRC32C (an older prep) cannot be checked and is redone.
func (r *run) verify(s manifest.Shard, f *cloudsrc.FileInfo) (bool, error) {
	if f != nil {
		return s.CRC32C != "" && s.CRC32C == fmt.Sprintf("%08x", f.CRC32C) && f.Size == s.Bytes, nil
	}
	// A shard listed but gone by now fails here, and is redone.
	sum, size, err := FileSHA256(filepath.Join(r.opt.Sink.Dir(), s.File))
	if err != nil {
		return false, err
	}
	return sum == s.SHA256 && size == s.Bytes, nil
}

func sameRun(a, b *manifest.Manifest) string {
	switch {
	case a.Format != b.Format:
		return fmt.Sprintf("format %s, now %s", a.Format, b.Format)
	case a.Recipe != b.Recipe:
		return fmt.Sprintf("recipe %q, now %q", a.Recipe, b.Recipe)
	case a.Seed != b.Seed:
		return fmt.Sprintf("seed %d, now %d", a.Seed, b.Seed)
	case a.Copies != b.Copies:
		return fmt.Sprintf("copies %d, now %d", a.Copies, b.Copies)
	case a.Order != b.Order:
		return fmt.Sprintf("order %s, now %s", a.Order, b.Order)
	case a.Items != b.Items:
		return fmt.Sprintf("%d items, now %d: the inputs changed", a.Items, b.Items)
	case a.ItemsPerShard != b.ItemsPerShard:
		return fmt.Sprintf("%d items per shard, now %d", a.ItemsPerShard, b.ItemsPerShard)
	case strings.Join(a.Classes, "\x00") != strings.Join(b.Classes, "\x00"):
		return "the class list changed"
	}
	for k, v := range b.Options {
		if a.Options[k] != v {
			return fmt.Sprintf("%s %q, now %q", k, a.Options[k], v)
		}
	}
	return ""
}

func (r *run) header() *manifest.Manifest {
	return &manifest.Manifest{
		FormatVersion: manifest.FormatVersion,
		Version:       r.opt.Version,
		Format:        r.opt.Format.Name(),
		Recipe:        r.opt.Recipe,
		Seed:          r.opt.Seed,
		Copies:        r.opt.Copies,
		Order:         string(r.opt.Order),
		Source:        r.opt.Source,
		Options:       r.opt.Options,
		Classes:       r.l.Classes,
		Items:         r.items,
		ItemsPerShard: r.perShard,
		ShardCount:    r.nShards,
	}
}

// manifest assembles this task's manifest from the shards in index order.
func (r *run) manifest() *manifest.Manifest {
	m := r.header()
	if r.opt.TaskCount > 1 {
		m.Task = &manifest.Task{Index: r.opt.TaskIndex, Count: r.opt.TaskCount, First: r.first, End: r.end}
	}
	idx := make([]int, 0, len(r.shards))
	for i := range r.shards {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	m.Shards = make([]manifest.Shard, 0, len(idx))
	for _, i := range idx {
		m.Shards = append(m.Shards, r.shards[i])
	}
	m.Totals()
	m.Ignored = r.l.Ignored
	return m
}

func (r *run) publishJSON(ctx context.Context, name string, m *manifest.Manifest) error {
	data, err := manifest.Marshal(m)
	if err != nil {
		return err
	}
	if err := manifest.WriteFileAtomic(filepath.Join(r.opt.Sink.Dir(), name), data); err != nil {
		return destErr(r.opt.Sink, name, err)
	}
	return r.opt.Sink.Publish(ctx, name)
}

func (r *run) removeFile(ctx context.Context, name string) {
	os.Remove(filepath.Join(r.opt.Sink.Dir(), name))
	r.opt.Sink.Remove(ctx, name)
}

// destErr names the destination and, for a full disk, the fix.
func destErr(s cloudsrc.Sink, name string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), "no space left") {
		return fmt.Errorf("write %s/%s: the disk is full: free space or choose another destination, then rerun with --resume: %w", s.URI(), name, err)
	}
	return fmt.Errorf("write %s/%s: %w", s.URI(), name, err)
}

// FileSHA256 hashes a file.
func FileSHA256(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	return hashReader(f)
}

// fetch reads one input whole.
func fetch(ctx context.Context, e Entry) (*Input, error) {
	rc, err := e.Src.Open(ctx, e.Key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var size int64
	if st, ok := rc.(interface{ Stat() (os.FileInfo, error) }); ok {
		if fi, err := st.Stat(); err == nil {
			size = fi.Size()
		}
	}
	data, err := readAll(rc, size)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return &Input{Key: e.Key, Source: e.Src.URI(e.Key), Label: e.Label, Data: data, Path: e.Src.LocalPath(e.Key)}, nil
}
