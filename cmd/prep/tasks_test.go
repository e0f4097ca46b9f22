package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/storage"

	"github.com/prep-dev/prep/cloudsrc/gcstest"
	"github.com/prep-dev/prep/convert"
	"github.com/prep-dev/prep/formats/manifest"
)

func TestTaskFromSlurm(t *testing.T) {
	slurm := func(id, min, max, count string) map[string]string {
		return map[string]string{"SLURM_ARRAY_TASK_ID": id, "SLURM_ARRAY_TASK_MIN": min, "SLURM_ARRAY_TASK_MAX": max, "SLURM_ARRAY_TASK_COUNT": count}
	}
	checkTaskFromEnv(t, []taskEnvCase{
		{"array from 0", slurm("3", "0", "15", "16"), -1, 0, 3, 16, ""},
		{"array from 1", slurm("1", "1", "16", "16"), -1, 0, 0, 16, ""},
		{"last of an array from 1", slurm("16", "1", "16", "16"), -1, 0, 15, 16, ""},
		{"array from 100", slurm("103", "100", "107", "8"), -1, 0, 3, 8, ""},
		{"no MIN or MAX", map[string]string{"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "4"}, -1, 0, 2, 4, ""},
		{"flags win", slurm("5", "1", "16", "16"), 7, 9, 7, 9, ""},
		{"--task-count over the variable", slurm("5", "1", "16", "16"), -1, 20, 4, 20, ""},
		{"a step", slurm("4", "0", "30", "16"), -1, 0, 0, 0, "the job array's ids 0..30 (SLURM_ARRAY_TASK_MIN..SLURM_ARRAY_TASK_MAX) are not its 16 tasks (SLURM_ARRAY_TASK_COUNT) in a row: submit it with contiguous ids, e.g. --array=0-15"},
		{"a list", slurm("9", "1", "9", "3"), -1, 0, 0, 0, "are not its 3 tasks"},
		{"id below MIN", slurm("0", "1", "16", "16"), -1, 0, 0, 0, "SLURM_ARRAY_TASK_ID=0 is below SLURM_ARRAY_TASK_MIN=1"},
		{"bad MIN", slurm("1", "one", "16", "16"), -1, 0, 0, 0, `SLURM_ARRAY_TASK_MIN="one" is not a task id`},
		{"not a number", slurm("x", "0", "15", "16"), -1, 0, 0, 0, `SLURM_ARRAY_TASK_ID="x" is not a task number`},
		{"Slurm and Batch", map[string]string{"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "2", "BATCH_TASK_INDEX": "1", "BATCH_TASK_COUNT": "2"}, -1, 0, 0, 0, "both BATCH_TASK_INDEX and SLURM_ARRAY_TASK_ID are set"},
	})
}

// TestNoMerge: with --no-merge no task writes manifest.json, even the
// last; merge-manifest does.
func TestNoMerge(t *testing.T) {
	dst := t.TempDir()
	for _, i := range []string{"1", "0"} {
		stdout, stderr, code := prepRun(t, "convert", "../../testdata/images", dst, "--recipe", demoRecipe, "--items-per-shard", "3",
			"--task-index", i, "--task-count", "2", "--no-merge", "--json")
		if code != 0 {
			t.Fatalf("task %s: exit %d: %s", i, code, stderr)
		}
		if strings.Contains(stdout, `"merge"`) {
			t.Errorf("task %s with --no-merge reports a merge:\n%s", i, stdout)
		}
	}
	if _, err := os.Stat(filepath.Join(dst, manifest.FileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("manifest.json after tasks run with --no-merge: %v", err)
	}
	if out, stderr, code := prepRun(t, "merge-manifest", dst); code != 0 || !strings.Contains(out, "merged 3 shards") {
		t.Fatalf("merge-manifest: exit %d: %s%s", code, out, stderr)
	}
}

// taskOutput is what convert --json prints, as far as these tests read it.
type taskOutput struct {
	ShardsWritten int                  `json:"shards_written"`
	ShardsKept    int                  `json:"shards_kept"`
	Merge         *convert.MergeResult `json:"merge"`
}

// TestManyTasksMerge runs a distributed conversion the way a batch engine
// does: five tasks as concurrent processes of the real binary, started
// at random moments, with no merge step. One task is killed (SIGKILL) in
// the middle of a shard and run again with --resume, as an engine retries
// it. The last task to finish must write manifest.json, once, and the
// destination must then equal one process's output byte for byte. Then
// all tasks run again at the same instant, so that every one of them
// finds all parts and tries to create manifest.json: exactly one may.
func TestManyTasksMerge(t *testing.T) {
	const tasks = 5
	flags := []string{"--recipe", demoRecipe, "--seed", "13", "--copies", "6", "--items-per-shard", "4", "--json"}
	// 8 photos × 6 copies = 48 items in 12 shards; tasks own shards
	// [0,2) [2,4) [4,7) [7,9) [9,12). The victim, task 4, is killed while
	// it writes its second or third shard.
	const victim, shards = 4, 12
	victimShards := [2]int{9, 12}

	one := t.TempDir()
	if _, stderr, code := prepRun(t, append([]string{"convert", "../../testdata/images", one}, flags...)...); code != 0 {
		t.Fatalf("one process: exit %d: %s", code, stderr)
	}
	want := readDir(t, one)

	for _, dest := range []struct {
		name   string
		remote bool // a bucket on fake-gcs-server, else a local folder
	}{{"local", false}, {"gcs", true}} {
		remote := dest.remote
		t.Run(dest.name, func(t *testing.T) {
			d := &distRun{t: t, flags: flags, tasks: tasks, dst: t.TempDir()}
			if remote {
				d.startGCS()
			}
			seed := uint64(time.Now().UnixNano())
			t.Logf("start delays from seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 0))

			// Phase 1: the tasks at random moments, the victim killed.
			var wg sync.WaitGroup
			outs := make([]taskOutput, tasks)
			for i := range tasks {
				if i == victim {
					continue
				}
				delay := time.Duration(rng.IntN(300)) * time.Millisecond
				wg.Go(func() {
					time.Sleep(delay)
					outs[i] = d.run(i, nil)
				})
			}
			kerr := d.killMidShard(victim, victimShards)
			wg.Wait()
			if kerr != nil {
				t.Fatal(kerr)
			}
			for i, o := range outs {
				if i != victim && (o.Merge == nil || o.Merge.State != convert.MergeWaiting) {
					t.Errorf("task %d, with task %d's part missing: merge %+v, want %s", i, victim, o.Merge, convert.MergeWaiting)
				}
			}
			if names := d.names(); names[manifest.FileName] {
				t.Fatalf("manifest.json written while task %d's part was missing", victim)
			}
			// The engine retries the killed task.
			out := d.run(victim, []string{"--resume"})
			if out.Merge == nil || out.Merge.State != convert.MergeWritten || out.Merge.Parts != tasks || out.Merge.Shards != shards {
				t.Fatalf("rerun of task %d: merge %+v, want it to write manifest.json of %d shards", victim, out.Merge, shards)
			}
			// A local shard is final before the progress file names it; an
			// upload may still have been under way at the kill.
			if out.ShardsKept != 1 && !(remote && out.ShardsKept == 0) {
				t.Errorf("rerun of task %d kept %d shards, want the one it finished before the kill", victim, out.ShardsKept)
			}
			t.Logf("rerun of task %d: %d shards kept, %d written", victim, out.ShardsKept, out.ShardsWritten)
			d.sameAs(want)
			if got := d.creates.Load(); remote && got != 1 {
				t.Errorf("Cloud Storage created manifest.json %d times, want 1", got)
			}

			// Phase 2: every task finds every part, all at once.
			if err := d.remove(manifest.FileName); err != nil {
				t.Fatal(err)
			}
			d.creates.Store(0)
			d.refused.Store(0)
			states := map[convert.MergeState]int{}
			var mu sync.Mutex
			start := make(chan struct{})
			for i := range tasks {
				wg.Go(func() {
					<-start
					o := d.run(i, []string{"--resume"})
					mu.Lock()
					defer mu.Unlock()
					if o.Merge != nil {
						states[o.Merge.State]++
					}
				})
			}
			close(start)
			wg.Wait()
			if states[convert.MergeWritten] != 1 || states[convert.MergeFound] != tasks-1 {
				t.Errorf("tasks finishing together: merges %v, want 1 %s and %d %s", states, convert.MergeWritten, tasks-1, convert.MergeFound)
			}
			if remote && (d.creates.Load() != 1 || d.refused.Load() != tasks-1) {
				t.Errorf("Cloud Storage: %d creates of manifest.json succeeded and %d were refused (412), want 1 and %d", d.creates.Load(), d.refused.Load(), tasks-1)
			}
			d.sameAs(want)
		})
	}
}

// distRun is one destination that the tasks of a distributed run write.
type distRun struct {
	t       *testing.T
	flags   []string
	tasks   int
	dst     string // a folder, or gs://out/shards
	remote  func() map[string][]byte
	has     func(name string) bool // a lighter look than remote
	del     func(name string) error
	staging string
	// creates and refused count the create-only writes of manifest.json that Cloud
	// Storage answered 200 and 412, as the server sent them.
	creates, refused atomic.Int64
}

// startGCS points the run at a bucket on fake-gcs-server, behind a proxy
// that counts the conditional writes.
func (d *distRun) startGCS() {
	t := d.t
	srv := gcstest.NewServer(t)
	srv.CreateBucket("out")
	client, err := storage.NewClient(context.Background(), storage.WithJSONReads()) // straight to the server
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	srv.Use(t, &gcstest.Proxy{OnResponse: func(r *http.Response) {
		q := r.Request.URL.Query() // a small upload names its object here
		if q.Get("ifGenerationMatch") != "0" || q.Get("name") != "shards/"+manifest.FileName {
			return
		}
		switch r.StatusCode {
		case http.StatusOK:
			d.creates.Add(1)
		case http.StatusPreconditionFailed:
			d.refused.Add(1)
		}
	}})
	d.dst = "gs://out/shards"
	d.staging = t.TempDir()
	d.remote = func() map[string][]byte { return bucketFiles(t, client, "out", "shards") }
	d.has = func(name string) bool {
		_, err := client.Bucket("out").Object("shards/" + name).Attrs(context.Background())
		return err == nil
	}
	d.del = func(name string) error {
		return client.Bucket("out").Object("shards/" + name).Delete(context.Background())
	}
}

// cmd is task i's process.
func (d *distRun) cmd(i int, extra []string) *exec.Cmd {
	args := append([]string{"convert", "../../testdata/images", d.dst}, d.flags...)
	cmd := exec.Command(prepBinary(d.t), append(args, extra...)...)
	cmd.Env = append(os.Environ(), "BATCH_TASK_INDEX="+fmt.Sprint(i), "BATCH_TASK_COUNT="+fmt.Sprint(d.tasks))
	if d.staging != "" {
		// Each task its own staging folder, as on its own machine.
		cmd.Env = append(cmd.Env, "PREP_STAGING="+filepath.Join(d.staging, fmt.Sprint(i)))
	}
	return cmd
}

// run runs task i to the end and returns its summary.
func (d *distRun) run(i int, extra []string) taskOutput {
	cmd := d.cmd(i, extra)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		d.t.Errorf("task %d: %v\n%s", i, err, stderr.String())
		return taskOutput{}
	}
	var out taskOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		d.t.Errorf("task %d: %v in its --json output:\n%s", i, err, stdout.String())
	}
	return out
}

// killMidShard starts task i, which owns shards [own[0], own[1]), and
// kills it (SIGKILL, no chance to clean up) while it writes one after its
// first: that one is under its temporary name in the folder the task
// writes into, and, at a local destination, the first is recorded in the
// task's progress file, so a rerun with --resume keeps it. It returns why
// it could not, rather than end the test while other tasks run.
func (d *distRun) killMidShard(i int, own [2]int) error {
	// The victim decodes on one worker, so a shard takes it a while.
	cmd := d.cmd(i, []string{"--workers", "1"})
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	dir := d.dst
	if d.staging != "" {
		dir = filepath.Join(d.staging, fmt.Sprint(i), "prep-staging-*")
	}
	var temps []string
	for s := own[0] + 1; s < own[1]; s++ {
		temps = append(temps, filepath.Join(dir, convert.ShardName(s, ".h5")+".tmp"))
	}
	writing := func() bool {
		return slices.ContainsFunc(temps, func(p string) bool { m, _ := filepath.Glob(p); return len(m) > 0 })
	}
	progress := fmt.Sprintf(".prep-progress-task-%05d.json", i)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for {
		// An upload can take longer than the shards left to write: on
		// Cloud Storage the progress file is not waited for.
		if writing() && (d.remote != nil || d.exists(progress)) {
			break
		}
		select {
		case err := <-exited:
			return fmt.Errorf("task %d ended (%v) before it was caught writing a shard after its first: nothing was killed mid-shard\n%s", i, err, stderr.String())
		case <-time.After(time.Millisecond):
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	err := <-exited
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		return fmt.Errorf("task %d: %v, want it killed by SIGKILL mid-shard\n%s", i, err, stderr.String())
	}
	if d.exists(convert.TaskManifestName(i)) {
		return fmt.Errorf("task %d wrote its manifest part before it was killed", i)
	}
	return nil
}

// names lists the destination.
func (d *distRun) names() map[string]bool {
	out := map[string]bool{}
	if d.remote != nil {
		for n := range d.remote() {
			out[n] = true
		}
		return out
	}
	entries, err := os.ReadDir(d.dst)
	if err != nil {
		d.t.Fatal(err)
	}
	for _, e := range entries {
		out[e.Name()] = true
	}
	return out
}

func (d *distRun) exists(name string) bool {
	if d.has != nil {
		return d.has(name)
	}
	_, err := os.Stat(filepath.Join(d.dst, name))
	return err == nil
}

func (d *distRun) remove(name string) error {
	if d.del != nil {
		return d.del(name)
	}
	return os.Remove(filepath.Join(d.dst, name))
}

// sameAs checks that the destination, less the tasks' manifest parts,
// holds exactly the files of want, byte for byte.
func (d *distRun) sameAs(want map[string][]byte) {
	d.t.Helper()
	var got map[string][]byte
	if d.remote != nil {
		got = d.remote()
	} else {
		got = readDir(d.t, d.dst)
	}
	for name := range got {
		if strings.HasPrefix(name, "manifest-task-") {
			delete(got, name)
		}
	}
	sameSet(d.t, "tasks vs one process", got, want)
}
