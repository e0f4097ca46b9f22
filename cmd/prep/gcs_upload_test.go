package main

import (
	"strings"
	"testing"
	"time"

	"github.com/prep-dev/prep/cloudsrc/gcstest"
)

// TestConvertGCSUnavailableDestination uploads to a destination that
// answers every upload with 503: the run stops within seconds, naming the
// 503 and --io-attempts rather than a stall and --io-timeout, after
// --io-attempts requests per file uploaded.
func TestConvertGCSUnavailableDestination(t *testing.T) {
	srv, _ := photoServer(t)
	p := &gcstest.Proxy{Unavailable: "/upload/storage/v1/b/out/"}
	srv.Use(t, p)
	prepBinary(t) // built before the clock starts
	start := time.Now()
	_, stderr, code := prepRun(t, "convert", "gs://raw/photos", "gs://out/x", "--io-timeout", "2s", "--io-attempts", "2")
	elapsed := time.Since(start)
	oneLine(t, stderr, code, "gs://out/x/", ": 503 Service Unavailable (gave up after 2 attempts")
	if strings.Contains(stderr, "--io-timeout") {
		t.Errorf("a destination that answers 503 is reported as a stall: %s", stderr)
	}
	// The run stops at the first failed upload; a few more may have been
	// under way (4 at once), each tried 2 times.
	if n := p.Refused(); n < 2 || n > 2*5 {
		t.Errorf("%d upload requests, want 2 to 10 (--io-attempts 2, at most 5 files)", n)
	}
	if elapsed > 8*time.Second {
		t.Errorf("gave up after %s", elapsed)
	}
	t.Logf("%d upload requests, %s: %s", p.Refused(), elapsed.Round(10*time.Millisecond), strings.TrimSpace(stderr))
}

// TestConvertGCSUploadStall holds every upload unanswered: reads and
// listings go through, but --io-timeout abandons each upload attempt and
// the run stops naming that flag.
func TestConvertGCSUploadStall(t *testing.T) {
	srv, _ := photoServer(t)
	p := &gcstest.Proxy{StallPath: "/upload/", Stall: time.Minute}
	srv.Use(t, p)
	prepBinary(t) // built before the clock starts
	start := time.Now()
	_, stderr, code := prepRun(t, "convert", "gs://raw/photos", "gs://out/x", "--io-timeout", "300ms", "--io-attempts", "2")
	elapsed := time.Since(start)
	oneLine(t, stderr, code, "gs://out/x/", ": no progress within the timeout (--io-timeout) (gave up after 2 attempts")
	if n := p.Stalled(); n < 2 || n > 2*5 {
		t.Errorf("%d upload requests, want 2 to 10 (--io-attempts 2, at most 5 files)", n)
	}
	if elapsed > 8*time.Second {
		t.Errorf("gave up after %s", elapsed)
	}
	t.Logf("%d upload requests, %s: %s", p.Stalled(), elapsed.Round(10*time.Millisecond), strings.TrimSpace(stderr))
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
