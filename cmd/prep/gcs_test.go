package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"

	"github.com/prep-dev/prep/bench"
	"github.com/prep-dev/prep/cloudsrc/gcstest"
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
		if !bytes.Equal(got[k], v) {
			t.Errorf("%s: %s differs", what, k)
		}
	}
}

// TestConvertGCS converts from and to a bucket on fake-gcs-server, through
// a proxy that fails and stalls requests, resumes from the remote
// manifest, and checks the objects equal a local run's files.
func TestConvertGCS(t *testing.T) {
	srv := gcstest.NewServer(t, seedPhotos(t)...)
	srv.CreateBucket("out")
	// A client straight to the server (made before any proxy is put in
	// front), with JSON reads as prep uses.
	direct, err := storage.NewClient(context.Background(), storage.WithJSONReads())
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
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
	if code != 0 || !strings.Contains(stdout, "1 new shards (3 kept)") {
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
