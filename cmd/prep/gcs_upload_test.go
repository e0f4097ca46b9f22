package main

import (
	"strings"
	"testing"
	"time"

	"github.com/prep-dev/prep/cloudsrc/gcstest"
)

// TestConvertGCSUploadFailures uploads to a destination that fails every
// upload: the run stops within seconds (not after minutes of retries),
// naming what went wrong and the flag that bounds it, after --io-attempts
// requests per file. A 503 is the server's answer, not a stall.
func TestConvertGCSUploadFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		proxy   *gcstest.Proxy
		timeout string
		want    string
		notWant string
		count   func(*gcstest.Proxy) int64
	}{
		{"503", &gcstest.Proxy{Unavailable: "/upload/storage/v1/b/out/"}, "2s",
			": 503 Service Unavailable (gave up after 2 attempts", "--io-timeout", (*gcstest.Proxy).Refused},
		{"stall", &gcstest.Proxy{StallPath: "/upload/", Stall: time.Minute}, "300ms",
			": no progress within the timeout (--io-timeout) (gave up after 2 attempts", "", (*gcstest.Proxy).Stalled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := photoServer(t)
			srv.Use(t, tc.proxy)
			prepBinary(t) // built before the clock starts
			start := time.Now()
			_, stderr, code := prepRun(t, "convert", "gs://raw/photos", "gs://out/x", "--io-timeout", tc.timeout, "--io-attempts", "2")
			elapsed := time.Since(start)
			oneLine(t, stderr, code, "gs://out/x/", tc.want)
			if tc.notWant != "" && strings.Contains(stderr, tc.notWant) {
				t.Errorf("stderr names %s: %s", tc.notWant, stderr)
			}
			// The run stops at the first failed upload; a few more may
			// have been under way (4 at once), each tried 2 times.
			n := tc.count(tc.proxy)
			if n < 2 || n > 2*5 {
				t.Errorf("%d upload requests, want 2 to 10 (--io-attempts 2, at most 5 files)", n)
			}
			// Not a speed target: the old code retried for minutes.
			if elapsed > 30*time.Second {
				t.Errorf("gave up after %s", elapsed)
			}
			t.Logf("%d upload requests, %s: %s", n, elapsed.Round(10*time.Millisecond), strings.TrimSpace(stderr))
		})
	}
}

// TestBenchReadGCSFlags checks that bench-read takes the gs:// transfer
// flags its errors advise.
func TestBenchReadGCSFlags(t *testing.T) {
	local, m := convertedShards(t)
	var objs []gcstest.Object
	for name, data := range readDir(t, local) {
		objs = append(objs, gcstest.Object{Bucket: "shards", Name: "run1/" + name, Data: data})
	}
	srv := gcstest.NewServer(t, objs...)
	staging := t.TempDir()
	first := m.Shards[0].File

	p := &gcstest.Proxy{Unavailable: first}
	srv.Use(t, p)
	_, stderr, code := prepRun(t, "bench-read", "gs://shards/run1", "--staging", staging, "--io-attempts", "2")
	oneLine(t, stderr, code, "gs://shards/run1/"+first+": 503 Service Unavailable (gave up after 2 attempts", "raise --io-attempts")
	if n := p.Refused(); n != 2 {
		t.Errorf("the failing shard was requested %d times, want 2 (--io-attempts)", n)
	}

	// Every download stalls half-way for longer than the object may take.
	srv.Use(t, &gcstest.Proxy{StallEvery: 1, Stall: time.Minute})
	_, stderr, code = prepRun(t, "bench-read", "gs://shards/run1/"+first, "--staging", staging, "--object-timeout", "500ms")
	oneLine(t, stderr, code, "gs://shards/run1/", "not read within 500ms (--object-timeout)")

	_, stderr, code = prepRun(t, "bench-read", "gs://shards/run1", "--io-timeout", "-1s")
	if code == 0 || !strings.Contains(stderr, "must not be negative") {
		t.Errorf("--io-timeout -1s: exit %d, stderr %q", code, stderr)
	}
}

// TestConvertGCSCutReplies converts to a bucket through a proxy that
// resets the connection while the reply to every third upload is read,
// after the server stored it, the destination lock's create-only upload
// first: each is sent again, the lock is found to be this run's own, and
// the objects equal a local run's files.
func TestConvertGCSCutReplies(t *testing.T) {
	srv, direct := photoServer(t)
	flags := []string{"--recipe", demoRecipe, "--seed", "9", "--copies", "2", "--items-per-shard", "5"}
	local := t.TempDir()
	if _, stderr, code := prepRun(t, append([]string{"convert", "../../testdata/images", local}, flags...)...); code != 0 {
		t.Fatalf("local run: exit %d: %s", code, stderr)
	}
	proxy := &gcstest.Proxy{CutReplyEvery: 3}
	srv.Use(t, proxy)
	if _, stderr, code := prepRun(t, append([]string{"convert", "gs://raw/photos", "gs://out/cut", "--io-timeout", "2s"}, flags...)...); code != 0 {
		t.Fatalf("run through cut replies: exit %d: %s", code, stderr)
	}
	if proxy.Cut() < 2 {
		t.Fatalf("proxy cut %d replies, want several", proxy.Cut())
	}
	sameSet(t, "gs://out/cut", bucketFiles(t, direct, "out", "cut"), readDir(t, local))
}
