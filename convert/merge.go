package convert

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/formats/manifest"
)

// Merge joins the manifest parts of a distributed run into the manifest
// one process would have written. It fails when the parts disagree on the
// plan, or when their shard ranges leave a gap or overlap.
func Merge(parts []*manifest.Manifest) (*manifest.Manifest, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("no manifest parts (%s) found: did the tasks finish?", TaskManifestName(0))
	}
	sort.Slice(parts, func(i, j int) bool { return taskFirst(parts[i]) < taskFirst(parts[j]) })
	base := *parts[0]
	if base.Task == nil {
		return nil, fmt.Errorf("part without task information: is this a single-process manifest?")
	}
	count := base.Task.Count
	if len(parts) != count {
		return nil, fmt.Errorf("found %d manifest parts of %d tasks: missing tasks %s", len(parts), count, missingTasks(parts, count))
	}
	next := 0
	var shards []manifest.Shard
	for _, p := range parts {
		if p.Task == nil {
			return nil, fmt.Errorf("part without task information among task parts")
		}
		if diff := sameRun(&base, p); diff != "" {
			return nil, fmt.Errorf("the parts of task %d and task %d are of two different runs (from task %d to task %d: %s): rerun the tasks of the wrong one with the same SRC and settings as the others and --overwrite, then merge",
				base.Task.Index, p.Task.Index, base.Task.Index, p.Task.Index, diff)
		}
		if p.Task.Count != count || p.ShardCount != base.ShardCount {
			return nil, fmt.Errorf("task %d planned %d tasks / %d shards, task %d %d / %d", p.Task.Index, p.Task.Count, p.ShardCount, base.Task.Index, count, base.ShardCount)
		}
		switch {
		case p.Task.First > next:
			return nil, fmt.Errorf("gap: no task wrote shards %d..%d", next, p.Task.First-1)
		case p.Task.First < next:
			return nil, fmt.Errorf("overlap: task %d wrote shards from %d, already covered up to %d", p.Task.Index, p.Task.First, next-1)
		}
		want := p.Task.First
		for _, s := range p.Shards {
			if s.Index != want {
				return nil, fmt.Errorf("task %d: shard %d missing from its manifest part", p.Task.Index, want)
			}
			want++
		}
		if want != p.Task.End {
			return nil, fmt.Errorf("task %d: shards %d..%d missing from its manifest part", p.Task.Index, want, p.Task.End-1)
		}
		shards = append(shards, p.Shards...)
		next = p.Task.End
	}
	if next != base.ShardCount {
		return nil, fmt.Errorf("gap: no task wrote shards %d..%d", next, base.ShardCount-1)
	}
	base.Task = nil
	base.Shards = shards
	base.Totals()
	return &base, nil
}

func taskFirst(m *manifest.Manifest) int {
	if m.Task == nil {
		return -1
	}
	return m.Task.First
}

func missingTasks(parts []*manifest.Manifest, count int) string {
	have := map[int]bool{}
	for _, p := range parts {
		if p.Task != nil {
			have[p.Task.Index] = true
		}
	}
	var miss []string
	for i := 0; i < count; i++ {
		if !have[i] {
			miss = append(miss, fmt.Sprint(i))
		}
	}
	return strings.Join(miss, ", ")
}

// MergeSink reads every manifest part in a destination, merges them and
// writes manifest.json there, replacing any.
func MergeSink(ctx context.Context, sink cloudsrc.Sink) (*manifest.Manifest, error) {
	names, err := sink.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", sink.URI(), err)
	}
	var parts []*manifest.Manifest
	for _, n := range names {
		if !strings.HasPrefix(n, "manifest-task-") || !strings.HasSuffix(n, ".json") {
			continue
		}
		m, err := readPart(ctx, sink, n)
		if err != nil {
			return nil, err
		}
		parts = append(parts, m)
	}
	m, err := Merge(parts)
	if err != nil {
		return nil, fmt.Errorf("merge manifests in %s: %w", sink.URI(), err)
	}
	data, err := manifest.Marshal(m)
	if err != nil {
		return nil, err
	}
	if err := manifest.WriteFileAtomic(sink.Dir()+"/"+manifest.FileName, data); err != nil {
		return nil, destErr(sink, manifest.FileName, err)
	}
	if err := sink.Publish(ctx, manifest.FileName); err != nil {
		return nil, err
	}
	return m, sink.Wait()
}

// readPart reads and parses one manifest part; one that is gone matches
// fs.ErrNotExist.
func readPart(ctx context.Context, sink cloudsrc.Sink, name string) (*manifest.Manifest, error) {
	data, err := sink.ReadFile(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("read %s/%s: %w", sink.URI(), name, err)
	}
	m, err := manifest.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", sink.URI(), name, err)
	}
	return m, nil
}
