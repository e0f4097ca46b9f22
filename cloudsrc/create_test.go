package cloudsrc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/cloudsrc/gcstest"
	"github.com/prep-dev/prep/cloudsrc/s3test"
)

// TestPublishNew races several writers, each with its own Sink as separate
// processes would have, to create one name: exactly one must win, the
// others must get fs.ErrExist and leave the winner's bytes in place, and
// no staged file may be left behind.
func TestPublishNew(t *testing.T) {
	const writers = 8
	tests := []struct {
		name  string
		gcs   bool           // a bucket on fake-gcs-server, else a local folder
		proxy *gcstest.Proxy // faults in front of the GCS server
		s3    *s3test.Proxy  // non-nil: a bucket on gofakes3, with these faults
	}{
		{"local", false, nil, nil},
		{"gcs", true, nil, nil},
		{"gcs with 503s", true, &gcstest.Proxy{FailEvery: 3}, nil},
		{"s3", false, nil, &s3test.Proxy{}},
		{"s3 with 503s", false, nil, &s3test.Proxy{FailEvery: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			dst := filepath.Join(t.TempDir(), "out")
			if tt.gcs {
				srv := gcstest.NewServer(t)
				srv.CreateBucket("out")
				if tt.proxy != nil {
					srv.Use(t, tt.proxy)
				}
				dst = "gs://out/run"
			}
			if tt.s3 != nil {
				srv := s3test.NewServer(t)
				srv.CreateBucket("out")
				srv.Use(t, tt.s3)
				dst = "s3://out/run"
			}
			sinks := make([]cloudsrc.Sink, writers)
			for i := range sinks {
				s, err := fastOpener(t.TempDir()).OpenSink(ctx, dst)
				if err != nil {
					t.Fatal(err)
				}
				sinks[i] = s
			}
			errs := make([]error, writers)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i, s := range sinks {
				tmp := fmt.Sprintf("part-%d.tmp", i)
				if err := os.WriteFile(filepath.Join(s.Dir(), tmp), []byte(fmt.Sprintf("writer %d\n", i)), 0o644); err != nil {
					t.Fatal(err)
				}
				wg.Go(func() {
					<-start
					errs[i] = s.(cloudsrc.Creator).PublishNew(ctx, tmp, "final.json")
				})
			}
			close(start)
			wg.Wait()
			winner := -1
			for i, err := range errs {
				switch {
				case err == nil && winner >= 0:
					t.Errorf("writers %d and %d both created final.json", winner, i)
				case err == nil:
					winner = i
				case !errors.Is(err, fs.ErrExist):
					t.Errorf("writer %d: %v, want an error matching fs.ErrExist", i, err)
				}
			}
			if winner < 0 {
				t.Fatalf("no writer created final.json: %v", errs)
			}
			got, err := sinks[0].ReadFile(ctx, "final.json")
			if want := fmt.Sprintf("writer %d\n", winner); err != nil || !bytes.Equal(got, []byte(want)) {
				t.Errorf("final.json holds %q (%v), want the winner's %q", got, err, want)
			}
			names, err := sinks[0].List(ctx)
			if err != nil || len(names) != 1 {
				t.Errorf("destination holds %v (%v), want only final.json", names, err)
			}
			for i, s := range sinks {
				if left, _ := filepath.Glob(filepath.Join(s.Dir(), "part-*")); len(left) > 0 {
					t.Errorf("writer %d left %v staged", i, left)
				}
			}
			if tt.proxy != nil && tt.proxy.Failed() == 0 || tt.s3 != nil && tt.s3.FailEvery > 0 && tt.s3.Failed() == 0 {
				t.Errorf("the proxy failed no request: the retries went untested")
			}
		})
	}
}

// TestPublishNewMissing: a staged file that is not there is an error that
// is not mistaken for a lost race.
func TestPublishNewMissing(t *testing.T) {
	s, err := cloudsrc.NewLocalSink(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	err = s.PublishNew(context.Background(), "nothing.tmp", "final.json")
	if err == nil || errors.Is(err, fs.ErrExist) {
		t.Fatalf("PublishNew of a missing file: %v, want an error other than fs.ErrExist", err)
	}
	if _, serr := os.Stat(filepath.Join(s.Dir(), "final.json")); !errors.Is(serr, fs.ErrNotExist) {
		t.Errorf("final.json exists after a failed PublishNew")
	}
}
