package convert

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/formats/manifest"
)

// TestMergeWhenComplete runs three tasks one after another, each merging
// when it is done: the first two wait, the last writes manifest.json, and
// the folder then equals one process's output. A task run again finds it
// and agrees; a manifest.json of another run is refused.
func TestMergeWhenComplete(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeImages(t, src, []string{"a", "b"}, 9)
	one := t.TempDir()
	if _, _, err := convertDir(t, ctx, src, one, nil); err != nil {
		t.Fatal(err)
	}
	split := t.TempDir()
	sink, err := cloudsrc.NewLocalSink(split)
	if err != nil {
		t.Fatal(err)
	}
	task := func(i int, mod func(*Options)) *MergeResult {
		t.Helper()
		m, _, err := convertDir(t, ctx, src, split, func(o *Options) {
			o.TaskIndex, o.TaskCount, o.Resume = i, 3, true
			if mod != nil {
				mod(o)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		res, err := MergeWhenComplete(ctx, sink, m)
		if err != nil {
			t.Fatalf("task %d: %v", i, err)
		}
		return res
	}
	steps := []struct {
		task    int
		state   MergeState
		parts   int
		waiting []Pending
	}{
		{2, MergeWaiting, 1, []Pending{{0, notFinished}, {1, notFinished}}},
		{0, MergeWaiting, 2, []Pending{{1, notFinished}}},
		{1, MergeWritten, 3, nil},
		{0, MergeFound, 3, nil}, // a retried task
	}
	for _, s := range steps {
		res := task(s.task, nil)
		if res.State != s.state || res.Parts != s.parts || !reflect.DeepEqual(res.Waiting, s.waiting) || res.Tasks != 3 {
			t.Fatalf("task %d: %+v, want %s with %d parts, waiting for %v", s.task, res, s.state, s.parts, s.waiting)
		}
		if _, err := os.Stat(filepath.Join(split, manifest.FileName)); (err == nil) != (s.state != MergeWaiting) {
			t.Fatalf("task %d (%s): manifest.json present: %v", s.task, s.state, err == nil)
		}
	}
	got := dirFiles(t, split)
	for name := range got {
		if strings.HasPrefix(name, "manifest-task-") {
			delete(got, name)
		}
	}
	sameFiles(t, dirFiles(t, one), got)

	// A manifest.json that is not the merge of these parts is refused,
	// and left as it is.
	other := []byte(strings.Replace(string(got[manifest.FileName]), `"version": "test"`, `"version": "old"`, 1))
	if string(other) == string(got[manifest.FileName]) {
		t.Fatal("test broken: no version field to change")
	}
	if err := os.WriteFile(filepath.Join(split, manifest.FileName), other, 0o644); err != nil {
		t.Fatal(err)
	}
	m, _, err := convertDir(t, ctx, src, split, func(o *Options) { o.TaskIndex, o.TaskCount, o.Resume = 2, 3, true })
	if err != nil {
		t.Fatal(err)
	}
	_, err = MergeWhenComplete(ctx, sink, m)
	for _, want := range []string{"manifest.json is there already", "written by prep old, now test", "prep merge-manifest " + split} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("merge over another run's manifest.json: %v, want it to say %q", err, want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(split, manifest.FileName)); string(b) != string(other) {
		t.Error("the refused manifest.json was changed")
	}
	if left, _ := filepath.Glob(filepath.Join(split, "*.tmp")); len(left) > 0 {
		t.Errorf("left %v", left)
	}
}

// TestMergeWaitsForOtherRuns: parts an earlier run left under the names of
// other tasks are not merged with this run's; the task says how they
// differ and leaves manifest.json to the task that replaces them.
func TestMergeWaitsForOtherRuns(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeImages(t, src, []string{"a"}, 8)
	tests := []struct {
		name   string
		mod    func(*Options) // the earlier run's tasks 1 and 2
		reason string
	}{
		{"other seed", func(o *Options) { o.Seed = 8 }, "its part is of another run: seed 8, now 7"},
		{"other task count", func(o *Options) { o.TaskCount = 4 }, "its part is of a run of 4 tasks, now 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := t.TempDir()
			for _, i := range []int{1, 2} {
				if _, _, err := convertDir(t, ctx, src, dst, func(o *Options) {
					o.TaskIndex, o.TaskCount, o.Overwrite = i, 3, true
					tt.mod(o)
				}); err != nil {
					t.Fatal(err)
				}
			}
			m, _, err := convertDir(t, ctx, src, dst, func(o *Options) { o.TaskIndex, o.TaskCount, o.Overwrite = 0, 3, true })
			if err != nil {
				t.Fatal(err)
			}
			sink, _ := cloudsrc.NewLocalSink(dst)
			res, err := MergeWhenComplete(ctx, sink, m)
			if err != nil {
				t.Fatal(err)
			}
			want := []Pending{{1, tt.reason}, {2, tt.reason}}
			if res.State != MergeWaiting || res.Parts != 1 || !reflect.DeepEqual(res.Waiting, want) {
				t.Fatalf("%+v, want waiting for %v", res, want)
			}
			if w := res.WaitingFor(); w != fmt.Sprintf("1 (%s), 2 (%s)", tt.reason, tt.reason) {
				t.Errorf("WaitingFor() = %q", w)
			}
			if _, err := os.Stat(filepath.Join(dst, manifest.FileName)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("manifest.json written from parts of two runs")
			}
		})
	}
}

// plainSink is a destination that cannot create a file only if absent.
type plainSink struct{ cloudsrc.Sink }

// linklessSink is a destination whose file system has no hard links.
type linklessSink struct{ cloudsrc.Sink }

func (linklessSink) PublishNew(context.Context, string, string) error {
	return fmt.Errorf("create manifest.json: %w", errors.ErrUnsupported)
}

// TestMergeCannotCreate: a destination where manifest.json cannot be
// created only if absent is an error that names --no-merge.
func TestMergeCannotCreate(t *testing.T) {
	ctx := context.Background()
	src, dst := t.TempDir(), t.TempDir()
	writeImages(t, src, []string{"a"}, 4)
	m, _, err := convertDir(t, ctx, src, dst, func(o *Options) { o.TaskIndex, o.TaskCount = 0, 1 })
	if err != nil {
		t.Fatal(err)
	}
	// A run of one task, as a part: every part is there.
	m.Task = &manifest.Task{Index: 0, Count: 1, First: 0, End: m.ShardCount}
	os.Remove(filepath.Join(dst, manifest.FileName))
	local, _ := cloudsrc.NewLocalSink(dst)
	for _, sink := range []cloudsrc.Sink{plainSink{local}, linklessSink{local}} {
		if _, err := MergeWhenComplete(ctx, sink, m); err == nil || !strings.Contains(err.Error(), "pass --no-merge") {
			t.Errorf("%T: err = %v, want one naming --no-merge", sink, err)
		}
	}
}
