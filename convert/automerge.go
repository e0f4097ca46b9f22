package convert

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/manifest"
)

// MergeState says what a task's automatic merge did.
type MergeState string

const (
	// MergeWritten: this task found every part and wrote manifest.json.
	MergeWritten MergeState = "written"
	// MergeFound: another task had written manifest.json, and it holds
	// the bytes this task would have written.
	MergeFound MergeState = "found"
	// MergeWaiting: some parts are missing, or are of another run; the
	// last of those tasks to finish writes manifest.json.
	MergeWaiting MergeState = "waiting"
)

// MergeResult reports a task's automatic merge.
type MergeResult struct {
	State    MergeState `json:"state"`
	Manifest string     `json:"manifest"` // where manifest.json is, or will be
	Tasks    int        `json:"tasks"`
	Parts    int        `json:"parts"` // parts of this run found
	Waiting  []Pending  `json:"waiting,omitempty"`
	Shards   int        `json:"shards"` // in the merged manifest; 0 while waiting
	Samples  int        `json:"samples"`
}

// Pending is a task whose part is not yet one of this run.
type Pending struct {
	Task   int    `json:"task"`
	Reason string `json:"reason"`
}

// notFinished is the reason of a task whose part is not there.
const notFinished = "not finished"

// MergeWhenComplete is the merge step of a distributed run, for engines
// that have no step after all tasks (Cloud Batch, Slurm): every task calls
// it once it has published its own part, own. When the parts of all tasks
// are there and agree with own, it merges them as Merge does and creates
// manifest.json only if it does not exist (cloudsrc.Creator), so exactly
// one task writes it; a task that finds it written checks that it holds
// the same bytes.
//
// Some task always finds every part: each task publishes its part before
// it lists the parts, so of any two tasks the one that lists later sees
// the other's; the task that lists last sees them all. When several see
// them all, the create-only write picks one.
func MergeWhenComplete(ctx context.Context, sink cloudsrc.Sink, own *manifest.Manifest) (*MergeResult, error) {
	if own.Task == nil {
		return nil, errors.New("automatic merge: the manifest is not a task's part")
	}
	creator, ok := sink.(cloudsrc.Creator)
	if !ok {
		return nil, fmt.Errorf("%s cannot create a file only where none exists: pass --no-merge, and run prep merge-manifest once all tasks are done", sink.URI())
	}
	res := &MergeResult{Manifest: sink.URI() + "/" + manifest.FileName, Tasks: own.Task.Count}
	parts, pending, err := runParts(ctx, sink, own)
	if err != nil {
		return nil, err
	}
	res.Parts = own.Task.Count - len(pending)
	if len(pending) > 0 {
		res.State, res.Waiting = MergeWaiting, pending
		return res, nil
	}
	m, err := Merge(parts)
	if err != nil {
		return nil, fmt.Errorf("merge manifests in %s: %w", sink.URI(), err)
	}
	res.Shards, res.Samples = len(m.Shards), m.Samples
	data, err := manifest.Marshal(m)
	if err != nil {
		return nil, err
	}
	// Staged under this task's own temporary name: no other task writes
	// it, and a run that finds it left by a crash knows it as prep's.
	tmp := formats.TempName(TaskManifestName(own.Task.Index))
	if err := writeSynced(filepath.Join(sink.Dir(), tmp), data); err != nil {
		return nil, destErr(sink, tmp, err)
	}
	err = creator.PublishNew(ctx, tmp, manifest.FileName)
	if err == nil {
		res.State = MergeWritten
		return res, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("%w; or pass --no-merge, and run prep merge-manifest once all tasks are done", destErr(sink, manifest.FileName, err))
	}
	found, err := sink.ReadFile(ctx, manifest.FileName)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", res.Manifest, err)
	}
	if !bytes.Equal(found, data) {
		return nil, fmt.Errorf("%s is there already and is not the merge of the task parts (%s): it is from another run; remove it, or run prep merge-manifest %s to replace it",
			res.Manifest, manifestDiff(found, m), sink.URI())
	}
	res.State = MergeFound
	return res, nil
}

// runParts returns the parts of own's run, one per task in task order,
// and the tasks whose part is missing or of another run: an earlier run
// into the same destination left it, and that task will replace it. It
// reads the parts only once all are listed, so most tasks list and stop.
func runParts(ctx context.Context, sink cloudsrc.Sink, own *manifest.Manifest) ([]*manifest.Manifest, []Pending, error) {
	names, err := sink.List(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list %s: %w", sink.URI(), err)
	}
	listed := map[string]bool{}
	for _, n := range names {
		listed[n] = true
	}
	var pending []Pending
	for i := range own.Task.Count {
		if i != own.Task.Index && !listed[TaskManifestName(i)] {
			pending = append(pending, Pending{i, notFinished})
		}
	}
	if len(pending) > 0 {
		return nil, pending, nil
	}
	parts := make([]*manifest.Manifest, own.Task.Count)
	for i := range parts {
		if i == own.Task.Index {
			parts[i] = own
			continue
		}
		p, err := readPart(ctx, sink, TaskManifestName(i))
		switch {
		case errors.Is(err, fs.ErrNotExist): // removed since the listing
			pending = append(pending, Pending{i, notFinished})
		case err != nil:
			return nil, nil, err
		default:
			if why := otherRun(p, own, i); why != "" {
				pending = append(pending, Pending{i, why})
			}
			parts[i] = p
		}
	}
	return parts, pending, nil
}

// otherRun says how part p, found under task i's name, is not a part of
// own's run; "" if it is.
func otherRun(p, own *manifest.Manifest, i int) string {
	switch {
	case p.Task == nil || p.Task.Index != i:
		return fmt.Sprintf("the file is not task %d's part", i)
	case p.Task.Count != own.Task.Count:
		return fmt.Sprintf("its part is of a run of %d tasks, now %d", p.Task.Count, own.Task.Count)
	}
	if diff := sameRun(p, own); diff != "" {
		return "its part is of another run: " + diff
	}
	if p.ShardCount != own.ShardCount {
		return fmt.Sprintf("its part is of another run: %d shards, now %d", p.ShardCount, own.ShardCount)
	}
	return ""
}

// manifestDiff says briefly how the manifest found differs from want.
func manifestDiff(found []byte, want *manifest.Manifest) string {
	f, err := manifest.Parse(found)
	if err != nil {
		return "it does not parse: " + err.Error()
	}
	if diff := sameRun(f, want); diff != "" {
		return diff
	}
	if len(f.Shards) != len(want.Shards) {
		return fmt.Sprintf("%d shards, now %d", len(f.Shards), len(want.Shards))
	}
	for i, s := range f.Shards {
		if w := want.Shards[i]; s.File != w.File || s.SHA256 != w.SHA256 {
			return fmt.Sprintf("shard %s has sha256 %s, now %s", w.File, short(s.SHA256), short(w.SHA256))
		}
	}
	if f.Version != want.Version {
		return fmt.Sprintf("written by prep %s, now %s", f.Version, want.Version)
	}
	return "same shards, other fields differ"
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}

// writeSynced writes data to a new file at path and syncs it, so a link
// to it never names a file whose bytes a crash could lose.
func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// WaitingFor names the pending tasks briefly, for a message: "1, 3 (its part
// is of another run: seed 5, now 7)".
func (r *MergeResult) WaitingFor() string {
	var b strings.Builder
	for i, p := range r.Waiting {
		if i == 8 {
			fmt.Fprintf(&b, " and %d more", len(r.Waiting)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, p.Task)
		if p.Reason != notFinished {
			fmt.Fprintf(&b, " (%s)", p.Reason)
		}
	}
	return b.String()
}
