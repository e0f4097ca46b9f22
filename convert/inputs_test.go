package convert

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/formats/hdf5"
	"github.com/prep-dev/prep/formats/manifest"
)

// runInputs converts listing l (from src) into dst.
func runInputs(t *testing.T, l *Listing, src, dst string, mod func(*Options)) (*manifest.Manifest, *Summary, error) {
	t.Helper()
	sink, err := cloudsrc.NewLocalSink(dst)
	if err != nil {
		t.Fatal(err)
	}
	opt := Options{
		Sink: sink, Format: hdf5.Format{}, Handler: handlerFor(cropAug{}), Recipe: "crop4", Seed: 7,
		Copies: 2, ItemsPerShard: 5, Workers: 2, IOWorkers: 3, Version: "test", Source: src,
	}
	if mod != nil {
		mod(&opt)
	}
	return Run(context.Background(), l, opt)
}

func listDir(t *testing.T, src string) *Listing {
	t.Helper()
	l, err := ListSource(context.Background(), cloudsrc.Dir{Root: src}, func(k string) bool { return strings.HasSuffix(k, ".png") })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// listCSV lists src through an input list naming every file of classes
// a and b with the labels given by label.
func listCSV(t *testing.T, src string, label func(key string) string) *Listing {
	t.Helper()
	var b strings.Builder
	b.WriteString("path,label\n")
	for _, e := range listDir(t, src).Entries {
		b.WriteString(e.Key + "," + label(e.Key) + "\n")
	}
	l, err := ParseInputList("list.csv", []byte(b.String()), func(uri string) (cloudsrc.Source, string, error) {
		return cloudsrc.Dir{Root: src}, uri, nil
	}, func(k string) bool { return strings.HasSuffix(k, ".png") })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func classOf(key string) string { return key[:strings.IndexByte(key, '/')] }

// sourceWithUniqueNames writes a/000..003.png and b/100..103.png, so that
// a file can move between classes without meeting a namesake.
func sourceWithUniqueNames(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	writeImages(t, src, []string{"a", "b"}, 4)
	for i := range 4 {
		mustRename(t, filepath.Join(src, "b", fmt.Sprintf("%03d.png", i)), filepath.Join(src, "b", fmt.Sprintf("%03d.png", 100+i)))
	}
	return src
}

// TestResumeRefusesOtherInputs: --resume into the output of a run whose
// inputs were moved, renamed, swapped for another SRC or rewritten is
// refused, naming the input and the fix, and leaves the earlier run as it
// was; with nothing changed it keeps every shard.
func TestResumeRefusesOtherInputs(t *testing.T) {
	byClass := func(k string) string { return map[string]string{"a": "0", "b": "1"}[classOf(k)] }
	rewrite := func(t *testing.T, p string) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(time.Hour)
		if err := os.Chtimes(p, later, later); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		csv  bool // the first run reads an input list labelled by class
		// change alters the source the first run read and returns the
		// listing (and SRC) that the resume is given.
		change func(t *testing.T, src string) (*Listing, string)
		want   []string // in the error; none: the resume succeeds
	}{
		{"unchanged", false, func(t *testing.T, src string) (*Listing, string) { return listDir(t, src), src }, nil},
		{"moved to another class", false, func(t *testing.T, src string) (*Listing, string) {
			mustRename(t, filepath.Join(src, "a", "001.png"), filepath.Join(src, "b", "001.png"))
			return listDir(t, src), src
		}, []string{"1 input added, first b/001.png", "1 input gone, first a/001.png"}},
		{"renamed", false, func(t *testing.T, src string) (*Listing, string) {
			mustRename(t, filepath.Join(src, "a", "002.png"), filepath.Join(src, "a", "009.png"))
			return listDir(t, src), src
		}, []string{"1 input added, first a/009.png", "1 input gone, first a/002.png"}},
		{"another SRC, same files and sizes", false, func(t *testing.T, src string) (*Listing, string) {
			other := filepath.Join(t.TempDir(), "other")
			copyTree(t, src, other)
			return listDir(t, other), other
		}, []string{"source " + "SRC" + ", now "}},
		{"rewritten in place, same size", false, func(t *testing.T, src string) (*Listing, string) {
			rewrite(t, filepath.Join(src, "b", "102.png"))
			return listDir(t, src), src
		}, []string{"input b/102.png: modified ", "(rewritten)"}},
		{"input list unchanged", true, func(t *testing.T, src string) (*Listing, string) { return listCSV(t, src, byClass), src }, nil},
		{"label changed in an input list", true, func(t *testing.T, src string) (*Listing, string) {
			return listCSV(t, src, func(k string) string {
				if k == "a/003.png" {
					return "1"
				}
				return byClass(k)
			}), src
		}, []string{"input a/003.png: label 0, now 1"}},
		{"rewritten, in an input list", true, func(t *testing.T, src string) (*Listing, string) {
			rewrite(t, filepath.Join(src, "a", "000.png"))
			return listCSV(t, src, byClass), src
		}, []string{"input a/000.png: modified ", "(rewritten)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := sourceWithUniqueNames(t)
			dst := t.TempDir()
			first := listDir(t, src)
			if tt.csv {
				first = listCSV(t, src, byClass)
			}
			m0, _, err := runInputs(t, first, src, dst, nil)
			if err != nil {
				t.Fatal(err)
			}
			before := dirFiles(t, dst)
			l, src2 := tt.change(t, src)
			_, sum, err := runInputs(t, l, src2, dst, func(o *Options) { o.Resume = true })
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if sum.ShardsKept != len(m0.Shards) || sum.ShardsWritten != 0 {
					t.Errorf("kept %d and wrote %d shards, want all %d kept", sum.ShardsKept, sum.ShardsWritten, len(m0.Shards))
				}
				sameFiles(t, before, dirFiles(t, dst))
				return
			}
			if err == nil {
				t.Fatal("resume on other inputs succeeded")
			}
			for _, w := range tt.want {
				w = strings.ReplaceAll(w, "SRC", src)
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), "--overwrite") {
				t.Errorf("error %q names no fix", err)
			}
			sameFiles(t, before, dirFiles(t, dst))
		})
	}
}

// TestInputsRecorded: the manifest records the input list's count and
// hash, and the list beside it hashes to that; equal runs write equal
// bytes whatever the workers, and the dataset ID does not depend on the
// inputs' times.
func TestInputsRecorded(t *testing.T) {
	src := sourceWithUniqueNames(t)
	one, two := t.TempDir(), t.TempDir()
	m1, _, err := runInputs(t, listDir(t, src), src, one, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := runInputs(t, listDir(t, src), src, two, func(o *Options) { o.Workers = 1 }); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, dirFiles(t, one), dirFiles(t, two))
	data, err := os.ReadFile(filepath.Join(one, manifest.InputsFileName))
	if err != nil {
		t.Fatal(err)
	}
	ins, sum, err := manifest.ReadInputs(data)
	if err != nil {
		t.Fatal(err)
	}
	if m1.Inputs != 8 || len(ins) != 8 || sum != m1.InputsSHA256 {
		t.Fatalf("manifest records %d inputs, sha256 %s; the list holds %d, sha256 %s", m1.Inputs, m1.InputsSHA256, len(ins), sum)
	}
	fi, _ := os.Stat(filepath.Join(src, "b", "101.png"))
	if in := ins[5]; in.Key != "b/101.png" || in.Label != 1 || in.Size != fi.Size() || in.MTime != fi.ModTime().UTC().Format(time.RFC3339Nano) {
		t.Errorf("input 5 recorded as %+v", in)
	}

	// A copy with other times: another input list, the same shards and ID.
	other := filepath.Join(t.TempDir(), "other")
	copyTree(t, src, other)
	three := t.TempDir()
	m3, _, err := runInputs(t, listDir(t, other), other, three, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m3.InputsSHA256 == m1.InputsSHA256 || m3.DatasetID != m1.DatasetID {
		t.Errorf("copy: inputs_sha256 %s (first %s), dataset_id %s (first %s): want other inputs, the same ID", m3.InputsSHA256, m1.InputsSHA256, m3.DatasetID, m1.DatasetID)
	}
}

// TestMergeRefusesTwoRuns: task parts of two runs over other inputs of the
// same count are not merged, by merge-manifest or the automatic merge.
func TestMergeRefusesTwoRuns(t *testing.T) {
	ctx := context.Background()
	src := sourceWithUniqueNames(t)
	dst := t.TempDir()
	task := func(i int) func(*Options) {
		return func(o *Options) { o.TaskIndex, o.TaskCount, o.Overwrite = i, 2, true }
	}
	if _, _, err := runInputs(t, listDir(t, src), src, dst, task(1)); err != nil {
		t.Fatal(err)
	}
	mustRename(t, filepath.Join(src, "a", "001.png"), filepath.Join(src, "b", "001.png"))
	m0, _, err := runInputs(t, listDir(t, src), src, dst, task(0))
	if err != nil {
		t.Fatal(err)
	}
	sink, _ := cloudsrc.NewLocalSink(dst)
	_, err = MergeSink(ctx, sink)
	if err == nil || !strings.Contains(err.Error(), "two different runs") || !strings.Contains(err.Error(), "the input list differs") {
		t.Fatalf("merge-manifest of two runs' parts: err = %v", err)
	}
	res, err := MergeWhenComplete(ctx, sink, m0)
	if err != nil {
		t.Fatal(err)
	}
	if res.State != MergeWaiting || len(res.Waiting) != 1 || !strings.Contains(res.Waiting[0].Reason, "the input list differs") {
		t.Fatalf("automatic merge: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(dst, manifest.FileName)); err == nil {
		t.Error("manifest.json written from parts of two runs")
	}
}

// TestRebuildSourceChanged: a rebuild from a source whose inputs were
// added, removed or renamed says the source changed, naming the input;
// one whose inputs were copied (other times) or rewritten is compared byte
// for byte, and the change is named beside the result.
func TestRebuildSourceChanged(t *testing.T) {
	ctx := context.Background()
	src := sourceWithUniqueNames(t)
	dst := t.TempDir()
	m, _, err := runInputs(t, listDir(t, src), src, dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	opt := RebuildOptions{
		Format: hdf5.Format{}, Handler: handlerFor(cropAug{}), Items: 4, Seed: 1,
		Shard:  func(_ context.Context, f string) (string, error) { return filepath.Join(dst, f), nil },
		Inputs: func(context.Context) ([]byte, error) { return os.ReadFile(filepath.Join(dst, manifest.InputsFileName)) },
	}

	copied := filepath.Join(t.TempDir(), "copy")
	copyTree(t, src, copied)
	res, err := Rebuild(ctx, listDir(t, copied), m, opt)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Mismatches) != 0 || !strings.Contains(res.SourceChanged, "(rewritten)") {
		t.Errorf("copy: %+v, want no mismatch and the change named", res)
	}

	mustRename(t, filepath.Join(src, "a", "001.png"), filepath.Join(src, "b", "001.png"))
	_, err = Rebuild(ctx, listDir(t, src), m, opt)
	var sc *SourceChanged
	if !errors.As(err, &sc) || !strings.Contains(err.Error(), "the source changed since the run (1 input added, first b/001.png; 1 input gone, first a/001.png)") {
		t.Fatalf("moved input: err = %v", err)
	}
	// Without the list beside the manifest the change is told by its hash.
	opt.Inputs = nil
	_, err = Rebuild(ctx, listDir(t, src), m, opt)
	if !errors.As(err, &sc) || !strings.Contains(err.Error(), "the input list differs") {
		t.Fatalf("moved input, no list: err = %v", err)
	}
}

// TestDiffInputs names what changed between two input lists.
func TestDiffInputs(t *testing.T) {
	a := []manifest.Input{{Key: "a/1", Size: 3}, {Key: "a/2", Size: 4}, {Key: "b/1", Label: 1, Size: 5, Generation: 7}}
	tests := []struct {
		name string
		now  []manifest.Input
		want string
	}{
		{"same", a, ""},
		{"size", []manifest.Input{a[0], {Key: "a/2", Size: 5}, a[2]}, "input a/2: 4 bytes, now 5"},
		{"generation", []manifest.Input{a[0], a[1], {Key: "b/1", Label: 1, Size: 5, Generation: 8}}, "input b/1: generation 7, now 8 (rewritten)"},
		{"two labels", []manifest.Input{{Key: "a/1", Label: 1, Size: 3}, {Key: "a/2", Label: 1, Size: 4}, a[2]}, "input a/1: label 0, now 1 (and 1 more changed)"},
		{"added and gone", []manifest.Input{a[0], {Key: "a/3"}, {Key: "a/4"}, a[2]}, "2 inputs added, first a/3; 1 input gone, first a/2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := manifest.DiffInputs(a, tt.now); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func mustRename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies the files under src to dst; the copies get new times.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		if err := os.WriteFile(out, data, 0o644); err != nil {
			return err
		}
		later := fi.ModTime().Add(time.Minute) // a different time even on coarse clocks
		return os.Chtimes(out, later, later)
	})
	if err != nil {
		t.Fatal(err)
	}
}
