package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prep-dev/prep/cloudsrc/s3test"
)

// photoS3 starts an S3 server holding the test photos under
// s3://raw/photos and an empty bucket "out".
func photoS3(t *testing.T) *s3test.Server {
	t.Helper()
	var objs []s3test.Object
	for _, o := range seedPhotos(t) {
		objs = append(objs, s3test.Object{Bucket: o.Bucket, Name: o.Name, Data: o.Data})
	}
	srv := s3test.NewServer(t, objs...)
	srv.CreateBucket("out")
	return srv
}

// TestConvertS3 converts a local folder to s3://, s3:// to a local folder
// and s3:// to s3:// through 503s, reset connections and a stalled read,
// resumes from the remote manifest after a shard went missing, splits a
// run into tasks merged by merge-manifest, and checks every result equal,
// byte for byte, to a local run; inspect, inspect --rebuild, bench-read
// and plan read the s3:// results and source.
func TestConvertS3(t *testing.T) {
	srv := photoS3(t)
	flags := []string{"--recipe", demoRecipe, "--seed", "9", "--copies", "2", "--items-per-shard", "5"}
	run := func(what string, args ...string) string {
		t.Helper()
		stdout, stderr, code := prepRun(t, append(args, flags...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s%s", what, code, stdout, stderr)
		}
		return stdout
	}

	local := t.TempDir()
	run("local run", "convert", "../../testdata/images", local)
	want := readDir(t, local)

	run("local to s3://", "convert", "../../testdata/images", "s3://out/up")
	sameSet(t, "s3://out/up", srv.Objects(t, "out", "up"), want)

	down := t.TempDir()
	run("s3:// to local", "convert", "s3://raw/photos", down)
	sameSet(t, "s3:// to local", readDir(t, down), want)

	run("s3:// to s3://", "convert", "s3://raw/photos", "s3://out/a")
	sameSet(t, "s3://out/a", srv.Objects(t, "out", "a"), want)

	// Faults: every 4th request answers 503 SlowDown or 500, every 5th
	// upload's reply is lost after the server stored it, and one photo's
	// read stalls halfway past --io-timeout.
	proxy := &s3test.Proxy{FailEvery: 4, CutReplyEvery: 5, StallPath: "photos/", StallOnce: true, Stall: 20 * time.Second}
	srv.Use(t, proxy)
	run("run through faults", "convert", "s3://raw/photos", "s3://out/b", "--io-timeout", "500ms")
	if proxy.Failed() == 0 || proxy.Cut() == 0 || proxy.Stalled() == 0 {
		t.Fatalf("proxy injected %d failures, %d lost replies, %d stalls", proxy.Failed(), proxy.Cut(), proxy.Stalled())
	}
	sameSet(t, "s3://out/b", srv.Objects(t, "out", "b"), want)

	// Resume from the remote manifest after a shard went missing, still
	// through the faults: the other shards are checked by the CRC32C S3
	// keeps, not downloaded.
	if _, err := srv.Backend.DeleteObject("out", "a/shard-000001.h5"); err != nil {
		t.Fatal(err)
	}
	stdout := run("resume", "convert", "s3://raw/photos", "s3://out/a", "--resume", "--io-timeout", "500ms")
	if !strings.Contains(stdout, "into 1 new shard in ") || !strings.Contains(stdout, " in 3 shards from the earlier run") {
		t.Fatalf("resume kept other shards than expected:\n%s", stdout)
	}
	sameSet(t, "resumed s3://out/a", srv.Objects(t, "out", "a"), want)

	// Two tasks into one s3:// folder, merged there.
	for _, i := range []string{"1", "0"} {
		cmd := exec.Command(prepBinary(t), append([]string{"convert", "s3://raw/photos", "s3://out/c", "--task-count", "2", "--no-merge"}, flags...)...)
		cmd.Env = append(os.Environ(), "AWS_BATCH_JOB_ARRAY_INDEX="+i)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("task %s: %v\n%s", i, err, out)
		}
	}
	if out, stderr, code := prepRun(t, "merge-manifest", "s3://out/c"); code != 0 || !strings.Contains(out, "merged") {
		t.Fatalf("merge-manifest s3://: exit %d: %s%s", code, out, stderr)
	}
	got := srv.Objects(t, "out", "c")
	for name := range got {
		if strings.HasPrefix(name, "manifest-task-") {
			delete(got, name)
		}
	}
	sameSet(t, "two tasks merged in s3://out/c", got, want)

	if out, stderr, code := prepRun(t, "inspect", "s3://out/a"); code != 0 || !strings.Contains(out, "shard-000001.h5") {
		t.Errorf("inspect s3://: exit %d:\n%s%s", code, out, stderr)
	}
	if out, stderr, code := prepRun(t, "inspect", "s3://out/a", "--rebuild", "6", "--staging", t.TempDir()); code != 0 || !strings.Contains(out, "0 mismatched") {
		t.Errorf("inspect s3:// --rebuild: exit %d:\n%s%s", code, out, stderr)
	}
	stdout, stderr, code := prepRun(t, "bench-read", "s3://out/a", "--json", "--staging", t.TempDir())
	var res struct {
		Download *struct {
			Verified bool `json:"sha256_verified"`
		} `json:"download"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &res) != nil || res.Download == nil || !res.Download.Verified {
		t.Errorf("bench-read s3://: exit %d: %s%s", code, stdout, stderr)
	}
	if out, stderr, code := prepRun(t, "plan", "s3://raw/photos", "--recipe", demoRecipe); code != 0 {
		t.Errorf("plan s3://: exit %d: %s%s", code, out, stderr)
	}
}

func TestS3CommandErrors(t *testing.T) {
	photoS3(t)
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"missing bucket", []string{"convert", "s3://nosuchbucket/photos", t.TempDir()}, `bucket "nosuchbucket" does not exist`},
		{"empty prefix", []string{"convert", "s3://raw/nothing-here", t.TempDir()}, "s3://raw/nothing-here"},
		{"missing dst bucket", []string{"convert", "s3://raw/photos", "s3://nosuchout/x"}, "nosuchout"},
		{"missing shards", []string{"bench-read", "s3://out/nothing"}, "s3://out/nothing/manifest.json: object does not exist"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := prepRun(t, tt.args...)
			if code != exitFailure || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q, want it to name %q", code, stderr, tt.want)
			}
			if strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("more than one line:\n%s", stderr)
			}
		})
	}
}

// TestTaskFromEnvAWSBatch: an AWS Batch array job gives each child its
// index in AWS_BATCH_JOB_ARRAY_INDEX and no count, as an Indexed Job.
func TestTaskFromEnvAWSBatch(t *testing.T) {
	checkTaskFromEnv(t, []taskEnvCase{
		{"with --task-count", map[string]string{"AWS_BATCH_JOB_ARRAY_INDEX": "5"}, -1, 8, 5, 8, ""},
		{"without --task-count", map[string]string{"AWS_BATCH_JOB_ARRAY_INDEX": "0"}, -1, 0, 0, 0, "AWS_BATCH_JOB_ARRAY_INDEX is set but no task count is: set --task-count"},
		{"past the count", map[string]string{"AWS_BATCH_JOB_ARRAY_INDEX": "8"}, -1, 8, 0, 0, "task index 8 is not below the task count 8"},
		{"two engines", map[string]string{"AWS_BATCH_JOB_ARRAY_INDEX": "1", "JOB_COMPLETION_INDEX": "2"}, -1, 4, 0, 0, "both JOB_COMPLETION_INDEX and AWS_BATCH_JOB_ARRAY_INDEX are set"},
	})
}
