package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"

	"github.com/prep-dev/prep/bench"
	"github.com/prep-dev/prep/cloudsrc/gcstest"
	"github.com/prep-dev/prep/formats/manifest"
)

// seedPhotos uploads testdata/images as gs://raw/photos/<class>/<file>.
func seedPhotos(t *testing.T) []gcstest.Object {
	t.Helper()
	var objs []gcstest.Object
	root := "../../testdata/images"
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		objs = append(objs, gcstest.Object{Bucket: "raw", Name: "photos/" + filepath.ToSlash(rel), Data: data})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// bucketFiles downloads every object under prefix with a real client.
func bucketFiles(t *testing.T, c *storage.Client, bucket, prefix string) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	out := map[string][]byte{}
	it := c.Bucket(bucket).Objects(ctx, &storage.Query{Prefix: prefix + "/"})
	for {
		a, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.Bucket(bucket).Object(a.Name).NewReader(ctx)
		if err != nil {
			t.Fatalf("read gs://%s/%s: %v", bucket, a.Name, err)
		}
		data, _ := io.ReadAll(r)
		r.Close()
		out[strings.TrimPrefix(a.Name, prefix+"/")] = data
	}
	return out
}

func sameSet(t *testing.T, what string, got, want map[string][]byte) {
	t.Helper()
	var g, w []string
	for k := range got {
		g = append(g, k)
	}
	for k := range want {
		w = append(w, k)
	}
	sort.Strings(g)
	sort.Strings(w)
	if strings.Join(g, " ") != strings.Join(w, " ") {
		t.Fatalf("%s: files %v, want %v", what, g, w)
	}
	for k, v := range want {
		g := got[k]
		if k == "manifest.json" {
			// The manifest records where the inputs were and what
			// identifies them (local times, Cloud Storage generations):
			// the runs compared read the same files from different places.
			g, v = sourceLine.ReplaceAll(g, nil), sourceLine.ReplaceAll(v, nil)
			g, v = inputsSumLine.ReplaceAll(g, nil), inputsSumLine.ReplaceAll(v, nil)
		}
		if k == manifest.InputsFileName {
			// The same inputs by key and label, in the same order.
			gi, _, gerr := manifest.ReadInputs(g)
			wi, _, werr := manifest.ReadInputs(v)
			if gerr != nil || werr != nil || !manifest.SamePlan(wi, gi) {
				t.Errorf("%s: %s lists other inputs (%v, %v): %v, want %v", what, k, gerr, werr, gi, wi)
			}
			continue
		}
		if !bytes.Equal(g, v) {
			t.Errorf("%s: %s differs", what, k)
		}
	}
}

// sourceLine is the manifest's source field, as Marshal writes it.
var sourceLine = regexp.MustCompile(`(?m)^  "source": ".*",\n`)

// inputsSumLine is the manifest's inputs_sha256 field.
var inputsSumLine = regexp.MustCompile(`(?m)^  "inputs_sha256": ".*",\n`)

// photoServer starts fake-gcs-server with the test photos under
// gs://raw/photos and an empty bucket "out", and returns it with a client
// straight to it (made before any proxy is put in front), with JSON reads
// as prep uses.
func photoServer(t *testing.T) (*gcstest.Server, *storage.Client) {
	t.Helper()
	srv := gcstest.NewServer(t, seedPhotos(t)...)
	srv.CreateBucket("out")
	direct, err := storage.NewClient(context.Background(), storage.WithJSONReads())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close() })
	return srv, direct
}

// TestConvertGCS converts from and to a bucket on fake-gcs-server, through
// a proxy that fails and stalls requests, resumes from the remote
// manifest, and checks the objects equal a local run's files.
func TestConvertGCS(t *testing.T) {
	srv, direct := photoServer(t)
	flags := []string{"--recipe", demoRecipe, "--seed", "9", "--copies", "2", "--items-per-shard", "5"}

	local := t.TempDir()
	if _, stderr, code := prepRun(t, append([]string{"convert", "../../testdata/images", local}, flags...)...); code != 0 {
		t.Fatalf("local run: exit %d: %s", code, stderr)
	}
	want := readDir(t, local)

	if _, stderr, code := prepRun(t, append([]string{"convert", "gs://raw/photos", "gs://out/a"}, flags...)...); code != 0 {
		t.Fatalf("gs run: exit %d: %s", code, stderr)
	}
	sameSet(t, "gs://out/a", bucketFiles(t, direct, "out", "a"), want)

	// Faults: every 4th request fails with 503/429, every 15th stalls past
	// the per-request timeout; the output must not change.
	proxy := &gcstest.Proxy{FailEvery: 4, StallEvery: 15, Stall: 20 * time.Second}
	srv.Use(t, proxy)
	if _, stderr, code := prepRun(t, append([]string{"convert", "gs://raw/photos", "gs://out/b", "--io-timeout", "500ms"}, flags...)...); code != 0 {
		t.Fatalf("run through faults: exit %d: %s", code, stderr)
	}
	if proxy.Failed() == 0 || proxy.Stalled() == 0 {
		t.Fatalf("proxy injected %d failures and %d stalls", proxy.Failed(), proxy.Stalled())
	}
	sameSet(t, "gs://out/b", bucketFiles(t, direct, "out", "b"), want)

	// Resume from the remote manifest after a shard went missing, still
	// through the faults.
	if err := direct.Bucket("out").Object("a/shard-000001.h5").Delete(context.Background()); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := prepRun(t, append([]string{"convert", "gs://raw/photos", "gs://out/a", "--resume", "--io-timeout", "500ms"}, flags...)...)
	if code != 0 || !strings.Contains(stdout, "into 1 new shard in ") || !strings.Contains(stdout, " in 3 shards from the earlier run") {
		t.Fatalf("resume: exit %d: %s %s", code, stdout, stderr)
	}
	sameSet(t, "resumed gs://out/a", bucketFiles(t, direct, "out", "a"), want)
}

func TestGCSErrors(t *testing.T) {
	gcstest.NewServer(t, seedPhotos(t)...)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"missing bucket", []string{"convert", "gs://nosuchbucket/photos", t.TempDir()}, "nosuchbucket"},
		{"empty prefix", []string{"convert", "gs://raw/nothing-here", t.TempDir()}, "gs://raw/nothing-here"},
		{"missing dst bucket", []string{"convert", "gs://raw/photos", "gs://nosuchout/x"}, "nosuchout"},
		{"missing list", []string{"convert", "gs://raw/list.csv", t.TempDir()}, "list.csv"},
	}
	for _, tt := range tests {
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

// TestBenchReadGCS stages shards from a bucket, checks them against the
// manifest, benchmarks them and leaves nothing in the staging folder; a
// damaged object is named.
func TestBenchReadGCS(t *testing.T) {
	local, m := convertedShards(t)
	var objs []gcstest.Object
	for name, data := range readDir(t, local) {
		objs = append(objs, gcstest.Object{Bucket: "shards", Name: "run1/" + name, Data: data})
	}
	bad := readDir(t, local)
	first := m.Shards[0].File
	damaged := bytes.Clone(bad[first])
	damaged[len(damaged)/2] ^= 0xff
	for name, data := range bad {
		if name == first {
			data = damaged
		}
		objs = append(objs, gcstest.Object{Bucket: "shards", Name: "damaged/" + name, Data: data})
	}
	gcstest.NewServer(t, objs...)
	staging := t.TempDir()

	stdout, stderr, code := prepRun(t, "bench-read", "gs://shards/run1", "--json", "--staging", staging)
	if code != 0 {
		t.Fatalf("bench-read gs://: exit %d: %s", code, stderr)
	}
	var res struct {
		Download *bench.Fetched `json:"download"`
		bench.ReadResult
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("--json: %v\n%s", err, stdout)
	}
	var files int64
	for _, s := range m.Shards {
		files += s.Bytes
	}
	if d := res.Download; d == nil || !d.Verified || d.Files != len(m.Shards)+1 || d.Bytes < files || d.MBps <= 0 {
		t.Errorf("download report %+v, want %d files (shards + manifest), ≥ %d bytes, verified", d, len(m.Shards)+1, files)
	}
	if res.Samples != m.Samples || len(res.Shards) != len(m.Shards) || res.Raw.Bytes != files {
		t.Errorf("read %d samples in %d shards (%d bytes), want %d in %d (%d)", res.Samples, len(res.Shards), res.Raw.Bytes, m.Samples, len(m.Shards), files)
	}

	// One shard, text output.
	stdout, stderr, code = prepRun(t, "bench-read", "gs://shards/run1/"+first, "--staging", staging)
	if code != 0 || !strings.Contains(stdout, "sha256 verified") || !strings.Contains(stdout, first) {
		t.Errorf("bench-read one gs:// shard: exit %d\n%s\n%s", code, stdout, stderr)
	}

	for _, tc := range []struct{ uri, want string }{
		{"gs://shards/damaged", "gs://shards/damaged/" + first + ": sha256"},
		{"gs://shards/nothing", "gs://shards/nothing/manifest.json: object does not exist"},
		{"gs://nosuchbucket/x", "nosuchbucket"},
	} {
		_, stderr, code := prepRun(t, "bench-read", tc.uri, "--staging", staging)
		if code != exitFailure || !strings.Contains(stderr, tc.want) {
			t.Errorf("bench-read %s: exit %d, stderr %q; want %q", tc.uri, code, stderr, tc.want)
		}
	}
	if left, _ := os.ReadDir(staging); len(left) != 0 {
		t.Errorf("staging folder not cleaned up: %v", left)
	}
}

// taskEnvCase is one case of taskFromEnv: the engines' variables and the
// flags given, and the task it must make of them.
type taskEnvCase struct {
	name         string
	env          map[string]string
	index, count int // the flags; -1 and 0 when not given
	wantIndex    int
	wantCount    int
	wantErr      string // "" when it must succeed
}

func checkTaskFromEnv(t *testing.T, tests []taskEnvCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, v := range taskVars {
				t.Setenv(v, tt.env[v])
			}
			i, c, err := taskFromEnv(tt.index, tt.count)
			if tt.wantErr != "" {
				var ue usageError
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.As(err, &ue) {
					t.Fatalf("got %d/%d, %v; want the usage error %q", i, c, err, tt.wantErr)
				}
				return
			}
			if err != nil || i != tt.wantIndex || c != tt.wantCount {
				t.Fatalf("got %d/%d, %v; want %d/%d", i, c, err, tt.wantIndex, tt.wantCount)
			}
		})
	}
}

func TestTaskFromEnv(t *testing.T) {
	checkTaskFromEnv(t, []taskEnvCase{
		{"nothing", nil, -1, 0, 0, 1, ""},
		{"Cloud Run", map[string]string{"CLOUD_RUN_TASK_INDEX": "2", "CLOUD_RUN_TASK_COUNT": "5"}, -1, 0, 2, 5, ""},
		{"Cloud Batch", map[string]string{"BATCH_TASK_INDEX": "0", "BATCH_TASK_COUNT": "3"}, -1, 0, 0, 3, ""},
		{"Indexed Job with --task-count", map[string]string{"JOB_COMPLETION_INDEX": "7"}, -1, 8, 7, 8, ""},
		{"Indexed Job without --task-count", map[string]string{"JOB_COMPLETION_INDEX": "0"}, -1, 0, 0, 0, "JOB_COMPLETION_INDEX is set but no task count is: set --task-count"},
		{"flags win", map[string]string{"BATCH_TASK_INDEX": "1", "BATCH_TASK_COUNT": "3"}, 4, 6, 4, 6, ""},
		{"--task-index over the variable", map[string]string{"BATCH_TASK_INDEX": "1", "BATCH_TASK_COUNT": "3"}, 2, 0, 2, 3, ""},
		{"--task-count over the variable", map[string]string{"CLOUD_RUN_TASK_INDEX": "1", "CLOUD_RUN_TASK_COUNT": "3"}, -1, 2, 1, 2, ""},
		{"flags alone", nil, 1, 2, 1, 2, ""},
		{"index past count", nil, 2, 2, 0, 0, "task index 2 is not below the task count 2"},
		{"two engines", map[string]string{"BATCH_TASK_INDEX": "1", "BATCH_TASK_COUNT": "3", "JOB_COMPLETION_INDEX": "2"}, -1, 0, 0, 0, "both BATCH_TASK_INDEX and JOB_COMPLETION_INDEX are set"},
		{"two engines, both flags", map[string]string{"BATCH_TASK_INDEX": "1", "JOB_COMPLETION_INDEX": "2"}, 0, 4, 0, 4, ""},
		{"not a number", map[string]string{"CLOUD_RUN_TASK_INDEX": "x"}, -1, 0, 0, 0, `CLOUD_RUN_TASK_INDEX="x" is not a task number`},
		{"negative", map[string]string{"BATCH_TASK_COUNT": "-3"}, -1, 0, 0, 0, `BATCH_TASK_COUNT="-3" is not a task number`},
	})
	// The CLI: exit 2, one line naming the flag.
	t.Setenv("JOB_COMPLETION_INDEX", "0")
	_, stderr, code := prepRun(t, "convert", "../../testdata/images", t.TempDir())
	if code != exitUsage || !strings.Contains(stderr, "--task-count") {
		t.Fatalf("JOB_COMPLETION_INDEX=0 alone: exit %d, %q; want exit %d naming --task-count", code, stderr, exitUsage)
	}
}

// oneLine fails the test when a run's error is not one line naming all of
// want.
func oneLine(t *testing.T, stderr string, code int, want ...string) {
	t.Helper()
	if code != exitFailure {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, exitFailure, stderr)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr %q does not name %q", stderr, w)
		}
	}
	if strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
		t.Errorf("more than one line:\n%s", stderr)
	}
}

// listOf writes an input list of the photos' gs:// URIs (CSV, or JSONL
// when the name says so) into bucket raw, plus the extra rows.
func listOf(photos []gcstest.Object, name string, extra ...string) gcstest.Object {
	var b strings.Builder
	if strings.HasSuffix(name, ".csv") {
		b.WriteString("uri,label\n")
	}
	for _, o := range photos {
		uri, label := "gs://raw/"+o.Name, strings.Split(o.Name, "/")[1]
		if strings.HasSuffix(name, ".jsonl") {
			fmt.Fprintf(&b, "{\"uri\": %q, \"label\": %q}\n", uri, label)
		} else {
			fmt.Fprintf(&b, "%s,%s\n", uri, label)
		}
	}
	for _, e := range extra {
		b.WriteString(e + "\n")
	}
	return gcstest.Object{Bucket: "raw", Name: name, Data: []byte(b.String())}
}

// TestConvertGCSInputList converts CSV and JSONL lists of gs:// URIs and
// compares them with a local run over a local list of the same files
// under the same names: the shards and manifests must be byte-identical.
// A stale list naming a missing object skips it, listed with its reason.
func TestConvertGCSInputList(t *testing.T) {
	photos := seedPhotos(t)
	local := t.TempDir()
	var csv strings.Builder
	csv.WriteString("path,label\n")
	for _, o := range photos {
		p := filepath.Join(local, filepath.FromSlash(o.Name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, o.Data, 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&csv, "%s,%s\n", o.Name, strings.Split(o.Name, "/")[1])
	}
	os.WriteFile(filepath.Join(local, "list.csv"), []byte(csv.String()), 0o644)
	objs := append(photos, listOf(photos, "list.csv"), listOf(photos, "list.jsonl"),
		listOf(photos[:2], "stale.csv", "gs://raw/photos/gone.jpg,space"))
	srv := gcstest.NewServer(t, objs...)
	srv.CreateBucket("out")
	direct, err := storage.NewClient(context.Background(), storage.WithJSONReads())
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	flags := []string{"--recipe", demoRecipe, "--seed", "5", "--items-per-shard", "3"}

	out := t.TempDir()
	if _, stderr, code := prepRun(t, append([]string{"convert", filepath.Join(local, "list.csv"), out}, flags...)...); code != 0 {
		t.Fatalf("local list: exit %d: %s", code, stderr)
	}
	want := readDir(t, out)
	for _, list := range []string{"list.csv", "list.jsonl"} {
		dst := "gs://out/" + list
		if _, stderr, code := prepRun(t, append([]string{"convert", "gs://raw/" + list, dst}, flags...)...); code != 0 {
			t.Fatalf("%s: exit %d: %s", list, code, stderr)
		}
		sameSet(t, dst, bucketFiles(t, direct, "out", list), want)
	}

	// 1 of 3 inputs is a loss over the default --max-skipped, and the
	// only input of its class: both must be allowed.
	stdout, stderr, code := prepRun(t, append([]string{"convert", "gs://raw/stale.csv", "gs://out/stale", "--max-skipped", "50%", "--keep-empty-classes"}, flags...)...)
	if code != 0 || !strings.Contains(stdout, "skipped 1 input (") || !strings.Contains(stdout, "photos/gone.jpg: gs://raw/photos/gone.jpg: object does not exist") ||
		!strings.Contains(stderr, `warning: every input of class "space" (index 1) failed to convert`) {
		t.Errorf("stale list: exit %d, want the missing object skipped and named:\n%s%s", code, stdout, stderr)
	}
}

// TestConvertGCSFatal checks that the failures which would leave inputs
// out stop the run with one line naming the object and the fix.
func TestConvertGCSFatal(t *testing.T) {
	photos := seedPhotos(t)
	secret := gcstest.Object{Bucket: "secret", Name: "x.jpg", Data: photos[0].Data}
	objs := append(photos, secret, listOf(photos, "mixed.csv", "gs://secret/x.jpg,space"))
	srv := gcstest.NewServer(t, objs...)
	srv.CreateBucket("out")
	// Each case gets a proxy of its own: a run's last requests may still
	// be in the proxy's handlers when the next case starts.
	use := func(p *gcstest.Proxy) *gcstest.Proxy { srv.Use(t, p); return p }

	// An input in a bucket the account may not read.
	use(&gcstest.Proxy{Forbid: "/b/secret/"})
	_, stderr, code := prepRun(t, "convert", "gs://raw/mixed.csv", t.TempDir(), "--items-per-shard", "4")
	oneLine(t, stderr, code, "gs://secret/x.jpg: permission denied (403)", "roles/storage.objectViewer on bucket secret")

	// An object that answers 503 to every request: tried --io-attempts
	// times, then the run stops.
	p := use(&gcstest.Proxy{Unavailable: "astronaut.jpg"})
	_, stderr, code = prepRun(t, "convert", "gs://raw/photos", t.TempDir(), "--io-attempts", "3")
	oneLine(t, stderr, code, "gs://raw/photos/space/astronaut.jpg: 503 Service Unavailable (gave up after 3 attempts")
	if n := p.Refused(); n != 3 {
		t.Errorf("the failing object was requested %d times, want 3 (--io-attempts)", n)
	}

	// The destination refuses uploads, or listing.
	for _, forbid := range []string{"/upload/storage/v1/b/out/", "/b/out/"} {
		use(&gcstest.Proxy{Forbid: forbid})
		_, stderr, code = prepRun(t, "convert", "gs://raw/photos", "gs://out/x")
		oneLine(t, stderr, code, "gs://out/x", "permission denied (403): the destination needs roles/storage.objectAdmin")
	}
	use(&gcstest.Proxy{Unauthorized: "/b/out/"})
	_, stderr, code = prepRun(t, "convert", "gs://raw/photos", "gs://out/x")
	oneLine(t, stderr, code, "gs://out/x", "not authenticated (401)", "gcloud auth application-default login")
}

// TestConvertGCSObjectTimeout stalls every download for longer than
// --object-timeout: the run stops naming the object and the flag.
func TestConvertGCSObjectTimeout(t *testing.T) {
	srv := gcstest.NewServer(t, seedPhotos(t)...)
	// Request 1 lists the photos; request 2, the first download, stalls
	// half-way for longer than the object may take.
	srv.Use(t, &gcstest.Proxy{StallEvery: 2, Stall: time.Minute})
	_, stderr, code := prepRun(t, "convert", "gs://raw/photos", t.TempDir(), "--object-timeout", "500ms")
	oneLine(t, stderr, code, "gs://raw/photos/", "not read within 500ms (--object-timeout)")
}

// TestConvertGCSUploadsAndResume checks that manifest.json is created
// after every shard; that a run interrupted right after its first shard
// upload, then resumed, equals a clean run; and that --resume redoes a
// remote shard whose bytes changed but whose size did not, by its CRC32C.
func TestConvertGCSUploadsAndResume(t *testing.T) {
	srv, direct := photoServer(t)
	flags := []string{"--recipe", demoRecipe, "--seed", "9", "--copies", "2", "--items-per-shard", "5", "--workers", "1"}
	if _, stderr, code := prepRun(t, append([]string{"convert", "gs://raw/photos", "gs://out/clean"}, flags...)...); code != 0 {
		t.Fatalf("clean run: exit %d: %s", code, stderr)
	}
	want := bucketFiles(t, direct, "out", "clean")
	m, err := srv.GetObject("out", "clean/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	for name := range want {
		o, _ := srv.GetObject("out", "clean/"+name)
		if strings.HasPrefix(name, "shard-") && o.Generation >= m.Generation {
			t.Errorf("%s was created after (or with) manifest.json", name)
		}
	}

	// Interrupt the run while the server answers its first shard upload.
	cmd := exec.Command(prepBinary(t), append([]string{"convert", "gs://raw/photos", "gs://out/cut"}, flags...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// The proxy's handlers run on the server's goroutines: they get the
	// process through a channel, which also orders them after Start.
	started := make(chan *os.Process, 1)
	var once sync.Once
	srv.Use(t, &gcstest.Proxy{OnResponse: func(*http.Response) {
		if _, err := srv.GetObject("out", "cut/shard-000000.h5"); err == nil {
			once.Do(func() { (<-started).Signal(os.Interrupt) })
		}
	}})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started <- cmd.Process
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Fatalf("interrupted run: exit %d, want %d: %s", code, exitInterrupted, stderr.String())
	}
	if _, err := srv.GetObject("out", "cut/manifest.json"); err == nil {
		t.Fatal("an interrupted run left manifest.json")
	}
	if _, stderr, code := prepRun(t, append([]string{"convert", "gs://raw/photos", "gs://out/cut", "--resume"}, flags...)...); code != 0 {
		t.Fatalf("resume: exit %d: %s", code, stderr)
	}
	sameSet(t, "resumed gs://out/cut", bucketFiles(t, direct, "out", "cut"), want)

	// Same size, other bytes: --resume must not keep it.
	bad := bytes.Clone(want["shard-000001.h5"])
	bad[len(bad)/2] ^= 0xff
	w := direct.Bucket("out").Object("clean/shard-000001.h5").NewWriter(context.Background())
	w.Write(bad)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	stdout, stderrS, code := prepRun(t, append([]string{"convert", "gs://raw/photos", "gs://out/clean", "--resume"}, flags...)...)
	if code != 0 || !strings.Contains(stdout, "into 1 new shard in ") || !strings.Contains(stdout, " in 3 shards from the earlier run") {
		t.Fatalf("resume over a changed shard: exit %d: %s %s", code, stdout, stderrS)
	}
	sameSet(t, "resumed gs://out/clean", bucketFiles(t, direct, "out", "clean"), want)
}
