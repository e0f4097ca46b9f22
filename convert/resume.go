package convert

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/formats/manifest"
)

// resume keeps the finished shards of an earlier run with the same plan.
func (r *run) resume(ctx context.Context, prior *manifest.Manifest) error {
	r.keep = map[int]manifest.Shard{}
	r.shards = map[int]manifest.Shard{}
	if prior == nil {
		return nil
	}
	want := r.header()
	if diff := sameRun(prior, want); diff != "" {
		if sameSource(string(prior.Source), string(want.Source)) && (prior.Inputs != want.Inputs || prior.InputsSHA256 != want.InputsSHA256) {
			// Name the inputs that changed, from the list the earlier
			// run left beside its manifest.
			data, _ := r.opt.Sink.ReadFile(ctx, manifest.InputsFileName)
			diff = inputsChange(prior, PriorInputs(data, prior), r.l)
		}
		return fmt.Errorf("--resume: the earlier run in %s differs (%s): its shards are not this run's; rerun with its SRC and settings, or pass --overwrite to start again",
			r.opt.Sink.URI(), diff)
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
	case a.OnlineRecipe != b.OnlineRecipe:
		return fmt.Sprintf("online recipe %q, now %q", a.OnlineRecipe, b.OnlineRecipe)
	case a.Recipe != b.Recipe:
		return fmt.Sprintf("recipe %q, now %q", a.Recipe, b.Recipe)
	case a.Seed != b.Seed:
		return fmt.Sprintf("seed %d, now %d", a.Seed, b.Seed)
	case a.Copies != b.Copies:
		return fmt.Sprintf("copies %d, now %d", a.Copies, b.Copies)
	case a.Order != b.Order:
		return fmt.Sprintf("order %s, now %s", a.Order, b.Order)
	case !sameSource(string(a.Source), string(b.Source)):
		return fmt.Sprintf("source %s, now %s", a.Source, b.Source)
	case a.Inputs != b.Inputs || a.InputsSHA256 != b.InputsSHA256:
		return inputsSumDiff(a.Inputs, a.InputsSHA256, b.Inputs, b.InputsSHA256)
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

// FileSHA256 hashes a file.
func FileSHA256(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	return hashReader(f)
}
