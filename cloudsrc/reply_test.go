package cloudsrc_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/cloudsrc/gcstest"
)

// TestGCSCutReply uploads through a proxy that resets the connection
// while the reply to every second upload request is read, after the server
// stored what it was sent: the request is sent again and every byte
// arrives, whether a file goes up in one request or in resumable chunks.
func TestGCSCutReply(t *testing.T) {
	srv := gcstest.NewServer(t)
	srv.CreateBucket("out")
	p := &gcstest.Proxy{CutReplyEvery: 2}
	srv.Use(t, p)
	ctx := context.Background()
	sink, err := fastOpener(t.TempDir()).OpenSink(ctx, "gs://out/run")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"a.h5":   data(40, 1000),
		"b.h5":   data(41, 2<<20+5), // resumable: the last chunk's reply is cut too
		"c.json": []byte(`{"ok": true}`),
	}
	publish(t, sink, files, []string{"a.h5", "b.h5", "c.json"})
	if err := sink.(io.Closer).Close(); err != nil {
		t.Fatalf("uploads whose reply was cut: %v", err)
	}
	if p.Cut() == 0 {
		t.Fatal("the proxy cut no reply: the retry went untested")
	}
	for name, want := range files {
		obj, err := srv.GetObject("out", "run/"+name)
		if err != nil || !bytes.Equal(obj.Content, want) {
			t.Errorf("%s: stored %d bytes (%v), want %d", name, len(obj.Content), err, len(want))
		}
	}
}

// TestPublishNewCutReply creates a name create-only through a proxy that
// cuts the reply of the first upload: the retry finds the object its first
// attempt stored (412) and, as it holds our bytes, reports success; an
// object with other bytes is still a lost race.
func TestPublishNewCutReply(t *testing.T) {
	for _, tt := range []struct {
		name    string
		before  []byte // already stored under final.json; nil: nothing
		wantErr bool
	}{
		{"own object", nil, false},
		{"another's object", []byte("another writer\n"), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := gcstest.NewServer(t)
			srv.CreateBucket("out")
			if tt.before != nil {
				srv.CreateObject(fakestorage.Object{
					ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "out", Name: "run/final.json"},
					Content:     tt.before,
				})
			}
			p := &gcstest.Proxy{CutReplyEvery: 2}
			srv.Use(t, p)
			ctx := context.Background()
			sink, err := fastOpener(t.TempDir()).OpenSink(ctx, "gs://out/run")
			if err != nil {
				t.Fatal(err)
			}
			defer sink.(io.Closer).Close()
			mine := []byte("writer 1\n")
			if err := os.WriteFile(filepath.Join(sink.Dir(), "part.tmp"), mine, 0o644); err != nil {
				t.Fatal(err)
			}
			err = sink.(cloudsrc.Creator).PublishNew(ctx, "part.tmp", "final.json")
			if got := err != nil; got != tt.wantErr {
				t.Fatalf("PublishNew: %v, want error %v", err, tt.wantErr)
			}
			want := mine
			if tt.before != nil {
				want = tt.before
			}
			obj, err := srv.GetObject("out", "run/final.json")
			if err != nil || !bytes.Equal(obj.Content, want) {
				t.Errorf("final.json holds %q (%v), want %q", obj.Content, err, want)
			}
			if tt.before == nil && p.Cut() != 1 {
				t.Errorf("%d replies cut, want 1", p.Cut())
			}
		})
	}
}

// TestGCSUploadReplyStall: an upload whose reply stalls after its headers
// is abandoned after Timeout, also when the request before it was answered
// with 503: the backoff pause that follows an error is not added to the
// next request's Timeout.
func TestGCSUploadReplyStall(t *testing.T) {
	srv := gcstest.NewServer(t)
	srv.CreateBucket("out")
	// Request 1 stalls, 2 is refused, 3 stalls: two attempts.
	p := &gcstest.Proxy{FailEvery: 2, StallReplyPath: "/upload/", Stall: time.Minute}
	srv.Use(t, p)
	o := fastOpener(t.TempDir())
	o.Timeout = 300 * time.Millisecond
	o.Attempts = 2
	o.Backoff.Max = 3 * time.Second
	sink, err := o.OpenSink(context.Background(), "gs://out/run")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	publish(t, sink, map[string][]byte{"a.h5": data(42, 1000)}, []string{"a.h5"})
	err = sink.(io.Closer).Close()
	d := time.Since(start)
	wantErr(t, err, "gs://out/run/a.h5: no progress within the timeout (--io-timeout) (gave up after 2 attempts: every try stalled; rerun with --resume later, or raise --io-timeout on a slow link)")
	if p.Failed() != 1 {
		t.Errorf("%d requests refused, want 1", p.Failed())
	}
	// Two Timeouts plus slack for a loaded machine, well below Max.
	if d > 2*o.Timeout+1500*time.Millisecond {
		t.Errorf("two stalled replies were abandoned after %s, want about %s", d, 2*o.Timeout)
	}
}

// TestGCSRetryAfter reads and lists through a proxy that answers 503 with
// Retry-After: 1: the one retry waits that second, not the few
// milliseconds of the backoff.
func TestGCSRetryAfter(t *testing.T) {
	srv := gcstest.NewServer(t, inputs...)
	p := &gcstest.Proxy{Unavailable: "/b/data/", RetryAfter: time.Second}
	srv.Use(t, p)
	o := fastOpener("")
	o.Attempts = 2
	ctx := context.Background()
	src, err := o.OpenSource(ctx, "gs://data/raw")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		call func() error
	}{
		{"read", func() error {
			r, err := src.Open(ctx, "cat/1.jpg")
			if err == nil {
				r.Close()
			}
			return err
		}},
		{"list", func() error { _, err := src.List(ctx); return err }},
	} {
		before, start := p.Refused(), time.Now()
		err := tt.call()
		d := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "503 Service Unavailable (gave up after 2 attempts") {
			t.Errorf("%s: %v, want 503 after 2 attempts", tt.name, err)
		}
		if n := p.Refused() - before; n != 2 {
			t.Errorf("%s: %d requests, want 2", tt.name, n)
		}
		if d < time.Second || d > 5*time.Second {
			t.Errorf("%s: gave up after %s, want the 1s Retry-After asked for", tt.name, d)
		}
	}
}

// TestGCSConnectionRefused: a server that refuses connections gives one
// short line naming the object and the cause, not the request's URL.
func TestGCSConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	t.Setenv("STORAGE_EMULATOR_HOST", "http://"+addr)
	o := fastOpener(t.TempDir())
	o.Attempts = 2
	ctx := context.Background()
	const gaveUp = " (gave up after 2 attempts: Cloud Storage kept failing; rerun with --resume later, or raise --io-attempts)"
	refused := "dial tcp " + addr + ": connect: connection refused"

	sink, err := o.OpenSink(ctx, "gs://out/run")
	if err != nil {
		t.Fatal(err)
	}
	publish(t, sink, map[string][]byte{"a.h5": data(43, 1000)}, []string{"a.h5"})
	wantErr(t, sink.(io.Closer).Close(), "gs://out/run/a.h5: "+refused+gaveUp)

	src, err := o.OpenSource(ctx, "gs://data/raw")
	if err != nil {
		t.Fatal(err)
	}
	_, err = src.Open(ctx, "cat/1.jpg")
	wantErr(t, err, "gs://data/raw/cat/1.jpg: "+refused+gaveUp)
}

// TestGCSSinkStaleStaging: opening a sink removes the staging folders that
// killed runs into the same destination left on this host (their pid is
// gone), and keeps those of live runs, of other destinations, and folders
// not named by prep.
func TestGCSSinkStaleStaging(t *testing.T) {
	gcstest.NewServer(t).CreateBucket("out")
	staging := t.TempDir()
	ctx := context.Background()
	o := fastOpener(staging)
	// The names prep gives: prep-staging-HASH-PID-RANDOM.
	name := func(dest string, pid int) string {
		s, err := o.OpenSink(ctx, dest)
		if err != nil {
			t.Fatal(err)
		}
		defer s.(io.Closer).Close()
		f := strings.Split(filepath.Base(s.Dir()), "-")
		if len(f) != 5 || f[3] != strconv.Itoa(os.Getpid()) {
			t.Fatalf("staging folder %s is not named prep-staging-HASH-PID-RANDOM", s.Dir())
		}
		return fmt.Sprintf("prep-staging-%s-%d-123", f[2], pid)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadPID, livePID := dead.Process.Pid, os.Getppid()
	folders := map[string]bool{ // name: kept
		name("gs://out/run", deadPID):   false,
		name("gs://out/run/", livePID):  true, // a live task's
		name("gs://out/other", deadPID): true, // another destination's
		"prep-staging-123456":           true, // an older prep's: no pid
	}
	for f := range folders {
		if err := os.MkdirAll(filepath.Join(staging, f, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(staging, f, "sub", "shard.h5"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := o.OpenSink(ctx, "gs://out/run")
	if err != nil {
		t.Fatal(err)
	}
	defer s.(io.Closer).Close()
	for f, kept := range folders {
		_, err := os.Stat(filepath.Join(staging, f))
		if got := err == nil; got != kept {
			t.Errorf("%s: kept %v, want %v (%v)", f, got, kept, err)
		}
	}
	if _, err := os.Stat(s.Dir()); err != nil {
		t.Errorf("the sink's own folder: %v", err)
	}
}
