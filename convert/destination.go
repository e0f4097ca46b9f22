package convert

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/manifest"
)

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

func (r *run) manifestName() string {
	if r.opt.TaskCount > 1 {
		return TaskManifestName(r.opt.TaskIndex)
	}
	return manifest.FileName
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
