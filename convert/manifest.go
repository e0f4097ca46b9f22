package convert

import (
	"context"
	"path/filepath"
	"sort"

	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/manifest"
)

func (r *run) header() *manifest.Manifest {
	m := &manifest.Manifest{
		Version:       r.opt.Version,
		Format:        r.opt.Format.Name(),
		Recipe:        r.opt.Recipe,
		OnlineRecipe:  r.opt.OnlineRecipe,
		Seed:          r.opt.Seed,
		Copies:        r.opt.Copies,
		Order:         string(r.opt.Order),
		Source:        formats.Name(r.opt.Source),
		Inputs:        r.inputs,
		InputsSHA256:  r.inputsSum,
		Options:       r.opt.Options,
		Classes:       r.l.Classes,
		Items:         r.items,
		ItemsPerShard: r.perShard,
		ShardCount:    r.nShards,
	}
	m.FormatVersion = manifest.WriteVersion(m)
	return m
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
