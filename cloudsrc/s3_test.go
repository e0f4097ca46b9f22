package cloudsrc_test

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/cloudsrc/s3test"
)

// s3Inputs are inputs (gcs_test.go) in an S3 bucket; the list's absolute
// entry names s3://.
func s3Inputs() []s3test.Object {
	var objs []s3test.Object
	for _, o := range inputs {
		d := o.Data
		if o.Name == "lists/train.csv" {
			d = []byte(strings.ReplaceAll(string(d), "gs://", "s3://"))
		}
		objs = append(objs, s3test.Object{Bucket: o.Bucket, Name: o.Name, Data: d})
	}
	return objs
}

func TestS3List(t *testing.T) {
	s3test.NewServer(t, s3Inputs()...)
	ctx := context.Background()
	for _, tt := range []struct {
		uri  string
		keys []string
	}{
		{"s3://data/raw", []string{"cat/1.jpg", "cat/2.png", "dog/3.jpg"}},
		{"s3://data/raw/", []string{"cat/1.jpg", "cat/2.png", "dog/3.jpg"}},
		{"s3://data/raw/*/*.jpg", []string{"cat/1.jpg", "dog/3.jpg"}},
		{"s3://data/raw/c*/*", []string{"cat/1.jpg", "cat/2.png"}},
	} {
		src, err := cloudsrc.OpenSource(ctx, tt.uri)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := src.List(ctx)
		if err != nil {
			t.Fatalf("%s: %v", tt.uri, err)
		}
		var keys []string
		for _, o := range objs {
			if o.Hidden != strings.Contains("/"+o.Key, "/.") {
				t.Errorf("%s: %s: Hidden %v", tt.uri, o.Key, o.Hidden)
			}
			if o.Hidden {
				continue // listed for the caller to name; not an input
			}
			keys = append(keys, o.Key)
			if o.Generation == 0 || o.ModTime.IsZero() {
				t.Errorf("%s: %s listed with generation %d, time %v: want the ETag's and LastModified", tt.uri, o.Key, o.Generation, o.ModTime)
			}
		}
		if strings.Join(keys, " ") != strings.Join(tt.keys, " ") {
			t.Errorf("%s: keys %v, want %v", tt.uri, keys, tt.keys)
		}
	}
}

// TestS3Generation: an input rewritten with other bytes lists with another
// generation; the same bytes give the same one.
func TestS3Generation(t *testing.T) {
	srv := s3test.NewServer(t, s3test.Object{Bucket: "b", Name: "in/a", Data: []byte("one")})
	ctx := context.Background()
	gen := func() int64 {
		src, err := cloudsrc.OpenSource(ctx, "s3://b/in")
		if err != nil {
			t.Fatal(err)
		}
		objs, err := src.List(ctx)
		if err != nil || len(objs) != 1 {
			t.Fatalf("list: %v %v", objs, err)
		}
		return objs[0].Generation
	}
	g1 := gen()
	srv.Put(t, "b", "in/a", []byte("one"))
	if g2 := gen(); g2 != g1 {
		t.Errorf("the same bytes rewritten: generation %d, was %d", g2, g1)
	}
	srv.Put(t, "b", "in/a", []byte("two"))
	if g3 := gen(); g3 == g1 {
		t.Errorf("other bytes: generation %d unchanged", g3)
	}
}

// TestS3Read reads objects through 503s, 500s and a reply that stalls
// halfway: every byte arrives, the stalled read resumed where it stopped.
func TestS3Read(t *testing.T) {
	srv := s3test.NewServer(t, s3Inputs()...)
	p := &s3test.Proxy{FailEvery: 2, StallPath: "dog/3.jpg", StallOnce: true, Stall: time.Minute}
	srv.Use(t, p)
	ctx := context.Background()
	src, err := fastOpener(t.TempDir()).OpenSource(ctx, "s3://data/raw")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range inputs[:3] {
		key := strings.TrimPrefix(o.Name, "raw/")
		r, err := src.Open(ctx, key)
		if err != nil {
			t.Fatalf("open %s: %v", key, err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, o.Data) {
			t.Errorf("%s: read %d bytes (%v), want %d", key, len(got), err, len(o.Data))
		}
	}
	if p.Failed() == 0 || p.Stalled() == 0 {
		t.Errorf("faults injected: %d failed, %d stalled; want both", p.Failed(), p.Stalled())
	}
}

// TestS3InputList resolves an input list's relative and s3:// entries.
func TestS3InputList(t *testing.T) {
	s3test.NewServer(t, s3Inputs()...)
	ctx := context.Background()
	o := &cloudsrc.Opener{}
	r, err := o.OpenURI(ctx, "s3://data/lists/train.csv")
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	for entry, want := range map[string][]byte{"../raw/cat/1.jpg": inputs[0].Data, "s3://data/raw/dog/3.jpg": inputs[2].Data} {
		src, key, err := o.Resolve(ctx, "s3://data/lists", entry)
		if err != nil {
			t.Fatalf("%s: %v", entry, err)
		}
		rc, err := src.Open(ctx, key)
		if err != nil {
			t.Fatalf("%s: %v", entry, err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, want %d", entry, len(got), len(want))
		}
	}
}

// TestS3Sink uploads small files and one of several parts through 503s,
// bodies changed in transit and replies cut after the server stored the
// request: every object arrives intact, and Files reports each one's size
// and the CRC32C S3 keeps, which --resume checks a shard by.
func TestS3Sink(t *testing.T) {
	for name, p := range map[string]*s3test.Proxy{
		"clean":      {},
		"503s":       {FailEvery: 3},
		"corrupted":  {CorruptEvery: 2},
		"reply lost": {CutReplyEvery: 2},
	} {
		t.Run(name, func(t *testing.T) {
			srv := s3test.NewServer(t)
			srv.CreateBucket("out")
			srv.Use(t, p)
			ctx := context.Background()
			o := fastOpener(t.TempDir())
			o.Timeout = 10 * time.Second
			sink, err := o.OpenSink(ctx, "s3://out/run")
			if err != nil {
				t.Fatal(err)
			}
			files := map[string][]byte{
				"a.h5":   data(40, 1000),
				"b.h5":   data(41, 11<<20+5), // three parts of 5 MiB (S3's least)
				"c.json": []byte(`{"ok": true}`),
				"empty":  nil,
			}
			publish(t, sink, files, []string{"a.h5", "b.h5", "c.json", "empty"})
			if err := sink.(io.Closer).Close(); err != nil {
				t.Fatalf("uploads: %v", err)
			}
			got := srv.Objects(t, "out", "run")
			for name, want := range files {
				if !bytes.Equal(got[name], want) {
					t.Errorf("%s: stored %d bytes, want %d", name, len(got[name]), len(want))
				}
			}
			fl, ok := sink.(interface {
				Files(context.Context) ([]cloudsrc.FileInfo, error)
			})
			if !ok {
				t.Fatal("S3Sink lists no FileInfo: --resume could not check shards")
			}
			infos, err := fl.Files(ctx)
			if err != nil || len(infos) != len(files) {
				t.Fatalf("Files: %v (%v), want %d", infos, err, len(files))
			}
			for _, fi := range infos {
				want := files[fi.Name]
				if fi.Size != int64(len(want)) || fi.CRC32C != crc32.Checksum(want, crc32.MakeTable(crc32.Castagnoli)) {
					t.Errorf("%s: listed %d bytes, CRC32C %08x; want %d bytes and its CRC32C", fi.Name, fi.Size, fi.CRC32C, len(want))
				}
			}
			if b, err := sink.ReadFile(ctx, "c.json"); err != nil || !bytes.Equal(b, files["c.json"]) {
				t.Errorf("ReadFile c.json: %q, %v", b, err)
			}
			if err := sink.Remove(ctx, "a.h5"); err != nil {
				t.Fatal(err)
			}
			if _, err := sink.ReadFile(ctx, "a.h5"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a.h5 after Remove: %v, want fs.ErrNotExist", err)
			}
			if p.FailEvery > 0 && p.Failed() == 0 || p.CorruptEvery > 0 && p.Corrupted() == 0 || p.CutReplyEvery > 0 && p.Cut() == 0 {
				t.Error("no fault was injected: the retry went untested")
			}
			if left, _ := os.ReadDir(sink.Dir()); len(left) > 0 {
				t.Errorf("staging folder left %d files", len(left))
			}
		})
	}
}

// TestS3Errors: each failure names the object and the fix; only a missing
// object is not fatal to a run.
func TestS3Errors(t *testing.T) {
	srv := s3test.NewServer(t, s3Inputs()...)
	ctx := context.Background()
	open := func(uri string) error {
		o := fastOpener(t.TempDir())
		o.Attempts = 3
		src, err := o.OpenSource(ctx, uri)
		if err != nil {
			return err
		}
		if _, err := src.List(ctx); err != nil {
			return err
		}
		r, err := src.Open(ctx, "cat/1.jpg")
		if err == nil {
			r.Close()
		}
		return err
	}
	for _, tt := range []struct {
		name  string
		uri   string
		proxy *s3test.Proxy
		want  string
		fatal bool
	}{
		{"missing bucket", "s3://nope/raw", nil, `bucket "nope" does not exist`, true},
		{"missing object", "s3://data/raw2", nil, "object does not exist", false},
		{"forbidden", "s3://data/raw", &s3test.Proxy{Forbid: "/data"}, "allow s3:ListBucket and s3:GetObject on bucket data", true},
		{"always 503", "s3://data/raw", &s3test.Proxy{FailEvery: 1}, "gave up after 3 attempts", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.proxy != nil {
				srv.Use(t, tt.proxy)
			}
			err := open(tt.uri)
			var ce *cloudsrc.Error
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want a cloudsrc.Error saying %q", err, tt.want)
			}
			if ce.Fatal() != tt.fatal {
				t.Errorf("Fatal() = %v, want %v", ce.Fatal(), tt.fatal)
			}
			if !tt.fatal && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%v does not match fs.ErrNotExist", err)
			}
		})
	}
	// A destination asks for the permissions that write.
	srv.Use(t, &s3test.Proxy{Forbid: "/out"})
	srv.CreateBucket("out")
	sink, err := fastOpener(t.TempDir()).OpenSink(ctx, "s3://out/run")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sink.Dir(), "x"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	sink.Publish(ctx, "x")
	if err := sink.Wait(); err == nil || !strings.Contains(err.Error(), "s3:PutObject") {
		t.Errorf("upload refused: %v, want the permissions the destination needs", err)
	}
}
