package cloudsrc_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/googleapis/gax-go/v2"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/cloudsrc/gcstest"
	"github.com/prep-dev/prep/internal/testenv"
)

// data returns n deterministic bytes derived from seed.
func data(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

var inputs = []gcstest.Object{
	{Bucket: "data", Name: "raw/cat/1.jpg", Data: data(1, 1000)},
	{Bucket: "data", Name: "raw/cat/2.png", Data: data(2, 2000)},
	{Bucket: "data", Name: "raw/dog/3.jpg", Data: data(3, 3<<20)},
	{Bucket: "data", Name: "raw/.cache/4.jpg", Data: data(4, 10)},
	{Bucket: "data", Name: "raw2/5.jpg", Data: data(5, 10)},
	{Bucket: "data", Name: "lists/train.csv", Data: []byte("path,label\n../raw/cat/1.jpg,cat\ngs://data/raw/dog/3.jpg,dog\n")},
}

// fastOpener retries quickly, for tests.
func fastOpener(staging string) *cloudsrc.Opener {
	return &cloudsrc.Opener{
		Timeout:   500 * time.Millisecond,
		Attempts:  20,
		ChunkSize: 1 << 20,
		Backoff:   gax.Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond, Multiplier: 2},
		Staging:   staging,
	}
}

func TestGCSList(t *testing.T) {
	gcstest.NewServer(t, inputs...)
	ctx := context.Background()
	tests := []struct {
		uri  string
		keys []string
	}{
		{"gs://data/raw", []string{"cat/1.jpg", "cat/2.png", "dog/3.jpg"}},
		{"gs://data/raw/", []string{"cat/1.jpg", "cat/2.png", "dog/3.jpg"}},
		{"gs://data/raw/*/*.jpg", []string{"cat/1.jpg", "dog/3.jpg"}},
		{"gs://data/raw/c*/*", []string{"cat/1.jpg", "cat/2.png"}},
		{"gs://data/raw/cat/?.png", []string{"2.png"}},
		{"gs://data", []string{"lists/train.csv", "raw/cat/1.jpg", "raw/cat/2.png", "raw/dog/3.jpg", "raw2/5.jpg"}},
		{"gs://data/none", nil},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			src, err := fastOpener("").OpenSource(ctx, tt.uri)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := src.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, o := range objs {
				if o.Hidden != strings.Contains("/"+o.Key, "/.") {
					t.Errorf("%s: Hidden %v", o.Key, o.Hidden)
				}
				if o.Hidden {
					continue // listed for the caller to name; not an input
				}
				keys = append(keys, o.Key)
				want := find(t, src.URI(o.Key))
				if o.Size != int64(len(want)) {
					t.Errorf("%s: size %d, want %d", o.Key, o.Size, len(want))
				}
				if o.Generation == 0 {
					t.Errorf("%s: no generation listed", o.Key)
				}
			}
			if !reflect.DeepEqual(keys, tt.keys) {
				t.Errorf("keys %q, want %q", keys, tt.keys)
			}
		})
	}
}

// TestGCSListGeneration: an object rewritten with the same size lists
// with another generation, and a local file rewritten so with another
// modification time: that is how a run tells it from the one it read.
func TestGCSListGeneration(t *testing.T) {
	srv := gcstest.NewServer(t, inputs...)
	ctx := context.Background()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "cat"), 0o755)
	os.WriteFile(filepath.Join(dir, "cat", "1.jpg"), data(1, 1000), 0o644)
	tests := []struct {
		uri     string
		rewrite func()
	}{
		{"gs://data/raw/cat", func() {
			srv.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "data", Name: "raw/cat/1.jpg"}, Content: data(9, 1000)})
		}},
		{dir + "/cat", func() {
			os.WriteFile(filepath.Join(dir, "cat", "1.jpg"), data(9, 1000), 0o644)
			later := time.Now().Add(time.Hour)
			os.Chtimes(filepath.Join(dir, "cat", "1.jpg"), later, later)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			list := func() cloudsrc.Object {
				src, err := fastOpener("").OpenSource(ctx, tt.uri)
				if err != nil {
					t.Fatal(err)
				}
				objs, err := src.List(ctx)
				if err != nil || len(objs) == 0 || objs[0].Key != "1.jpg" {
					t.Fatalf("list %s: %v, %v", tt.uri, objs, err)
				}
				return objs[0]
			}
			was := list()
			tt.rewrite()
			now := list()
			if now.Size != was.Size || now.Generation == was.Generation && now.ModTime.Equal(was.ModTime) {
				t.Errorf("rewritten: listed %+v, then %+v: want the same size, another generation or time", was, now)
			}
		})
	}
}

// find returns the seeded bytes of a gs:// URI.
func find(t *testing.T, uri string) []byte {
	for _, o := range inputs {
		if "gs://"+o.Bucket+"/"+o.Name == uri {
			return o.Data
		}
	}
	t.Fatalf("%s is not a seeded object", uri)
	return nil
}

func TestGCSOpen(t *testing.T) {
	gcstest.NewServer(t, inputs...)
	ctx := context.Background()
	src, err := cloudsrc.OpenSource(ctx, "gs://data/raw")
	if err != nil {
		t.Fatal(err)
	}
	if got := src.LocalPath("cat/1.jpg"); got != "" {
		t.Errorf("LocalPath = %q, want \"\"", got)
	}
	for _, key := range []string{"cat/1.jpg", "cat/2.png", "dog/3.jpg"} {
		want := find(t, src.URI(key))
		rc, err := src.Open(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := rc.(interface{ Stat() (fs.FileInfo, error) }).Stat()
		if err != nil || fi.Size() != int64(len(want)) {
			t.Errorf("%s: Stat size %d, %v; want %d", key, fi.Size(), err, len(want))
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: read %d bytes (%v), want the %d seeded", key, len(got), err, len(want))
		}
	}
	rc, err := cloudsrc.OpenURI(ctx, "gs://data/lists/train.csv")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if want := find(t, "gs://data/lists/train.csv"); !bytes.Equal(got, want) {
		t.Errorf("OpenURI read %q, want %q", got, want)
	}
}

func TestResolve(t *testing.T) {
	gcstest.NewServer(t, inputs...)
	ctx := context.Background()
	o := fastOpener("")
	tests := []struct{ base, uri, want string }{
		{"gs://data/lists", "../raw/cat/1.jpg", "gs://data/raw/cat/1.jpg"},
		{"gs://data/lists", "gs://data/raw/dog/3.jpg", "gs://data/raw/dog/3.jpg"},
		{"/tmp/lists", "gs://data/raw/cat/2.png", "gs://data/raw/cat/2.png"},
	}
	for _, tt := range tests {
		src, key, err := o.Resolve(ctx, tt.base, tt.uri)
		if err != nil {
			t.Fatal(err)
		}
		if got := src.URI(key); got != tt.want {
			t.Errorf("Resolve(%s, %s) names %s, want %s", tt.base, tt.uri, got, tt.want)
			continue
		}
		rc, err := src.Open(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if !bytes.Equal(got, find(t, tt.want)) {
			t.Errorf("Resolve(%s, %s): wrong bytes", tt.base, tt.uri)
		}
	}
	src, key, err := o.Resolve(ctx, "/tmp/lists", "a/b.jpg")
	if err != nil || src.LocalPath(key) != "/tmp/lists/a/b.jpg" {
		t.Errorf("local Resolve gives %q, %v", src.LocalPath(key), err)
	}
}

// crc32c returns the object CRC32C as GCS stores it: base64 of the
// big-endian checksum.
func crc32c(b []byte) string {
	var s [4]byte
	binary.BigEndian.PutUint32(s[:], crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	return base64.StdEncoding.EncodeToString(s[:])
}

// publish writes files into the sink's staging folder and publishes them.
func publish(t *testing.T, sink cloudsrc.Sink, files map[string][]byte, order []string) {
	t.Helper()
	ctx := context.Background()
	for _, name := range order {
		if err := os.WriteFile(filepath.Join(sink.Dir(), name), files[name], 0o644); err != nil {
			t.Fatal(err)
		}
		if err := sink.Publish(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
}

func TestGCSSink(t *testing.T) {
	srv := gcstest.NewServer(t)
	srv.CreateBucket("out")
	staging := t.TempDir()
	ctx := context.Background()
	// No faults here: a timeout that a loaded 2-core machine under -race
	// can pass on a 5 MiB upload (500 ms did, 20 times in a row) tests
	// nothing but the machine.
	o := fastOpener(staging)
	o.Timeout = 10 * time.Second
	sink, err := o.OpenSink(ctx, "gs://out/run1")
	if err != nil {
		t.Fatal(err)
	}
	if sink.URI() != "gs://out/run1" || !strings.HasPrefix(sink.Dir(), staging) {
		t.Fatalf("URI %s, Dir %s", sink.URI(), sink.Dir())
	}
	files := map[string][]byte{
		"shard-00000.h5": data(10, 5<<20+7), // larger than one 1 MiB chunk: a resumable upload
		"shard-00001.h5": data(11, 100_000),
		"empty.bin":      nil,
		"manifest.json":  []byte(`{"shards": 2}`),
	}
	publish(t, sink, files, []string{"shard-00000.h5", "shard-00001.h5", "empty.bin", "manifest.json"})
	// Publishing a name again while its first upload may still run: the
	// later content wins.
	files["manifest.json"] = []byte(`{"shards": 2, "done": true}`)
	publish(t, sink, files, []string{"manifest.json"})
	if err := sink.Wait(); err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		obj, err := srv.GetObject("out", "run1/"+name)
		if err != nil {
			t.Fatalf("%s not uploaded: %v", name, err)
		}
		if !bytes.Equal(obj.Content, want) {
			t.Errorf("%s: uploaded %d bytes, want %d", name, len(obj.Content), len(want))
		}
		if obj.Crc32c != crc32c(want) {
			t.Errorf("%s: stored CRC32C %s, want %s", name, obj.Crc32c, crc32c(want))
		}
	}
	if left, _ := os.ReadDir(sink.Dir()); len(left) != 0 {
		t.Errorf("staging folder still holds %d files after the uploads", len(left))
	}
	names, err := sink.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"empty.bin", "manifest.json", "shard-00000.h5", "shard-00001.h5"}; !reflect.DeepEqual(names, want) {
		t.Errorf("List = %q, want %q", names, want)
	}
	got, err := sink.ReadFile(ctx, "manifest.json")
	if err != nil || !bytes.Equal(got, files["manifest.json"]) {
		t.Errorf("ReadFile manifest.json = %q, %v", got, err)
	}
	if err := sink.Remove(ctx, "empty.bin"); err != nil {
		t.Fatal(err)
	}
	if _, err := sink.ReadFile(ctx, "empty.bin"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile of a removed file: %v, want fs.ErrNotExist", err)
	}
	if err := sink.Remove(ctx, "empty.bin"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Remove of a missing file: %v, want fs.ErrNotExist", err)
	}
	if err := sink.(io.Closer).Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sink.Dir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("staging folder %s left after Close: %v", sink.Dir(), err)
	}
}

// TestGCSFaults reads and writes through a proxy that fails every third
// request with 503 or 429, stalls every fifth past the timeout (downloads
// after half their body) and changes a byte in every second upload request: every
// byte still arrives intact.
func TestGCSFaults(t *testing.T) {
	objs := []gcstest.Object{}
	for i := range 12 {
		objs = append(objs, gcstest.Object{Bucket: "in", Name: fmt.Sprintf("x/%02d.bin", i), Data: data(uint64(100+i), 1000+i*300_000)})
	}
	srv := gcstest.NewServer(t, objs...)
	srv.CreateBucket("out")
	p := &gcstest.Proxy{FailEvery: 3, StallEvery: 5, Stall: 5 * time.Second, CorruptEvery: 2}
	srv.Use(t, p)
	ctx := context.Background()
	o := fastOpener(t.TempDir())

	src, err := o.OpenSource(ctx, "gs://in/x")
	if err != nil {
		t.Fatal(err)
	}
	list, err := src.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(objs) {
		t.Fatalf("listed %d objects, want %d", len(list), len(objs))
	}
	for i, ob := range list {
		rc, err := src.Open(ctx, ob.Key)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, objs[i].Data) {
			t.Errorf("%s: read %d bytes that differ from the %d stored", ob.Key, len(got), len(objs[i].Data))
		}
	}

	sink, err := o.OpenSink(ctx, "gs://out/y")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	var order []string
	for i := range 6 {
		name := fmt.Sprintf("shard-%05d.h5", i)
		files[name] = data(uint64(200+i), 1000+i*400_000)
		order = append(order, name)
	}
	files["big.h5"] = data(300, 3<<20+5) // four chunks, resumable
	order = append(order, "big.h5")
	publish(t, sink, files, order)
	if err := sink.(io.Closer).Close(); err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		obj, err := srv.GetObject("out", "y/"+name)
		if err != nil {
			t.Fatalf("%s not uploaded: %v", name, err)
		}
		if !bytes.Equal(obj.Content, want) {
			t.Errorf("%s: uploaded %d bytes that differ from the %d sent", name, len(obj.Content), len(want))
		}
	}
	if p.Failed() == 0 || p.Stalled() == 0 || p.Corrupted() == 0 {
		t.Errorf("the proxy injected %d failures, %d stalls and %d corrupted uploads; want some of each", p.Failed(), p.Stalled(), p.Corrupted())
	}
	t.Logf("survived %d failed, %d stalled and %d corrupted requests", p.Failed(), p.Stalled(), p.Corrupted())
}

func TestGCSErrors(t *testing.T) {
	srv := gcstest.NewServer(t, inputs...)
	ctx := context.Background()
	o := fastOpener(t.TempDir())
	o.Attempts = 2

	src, _ := o.OpenSource(ctx, "gs://nobucket/raw")
	_, err := src.List(ctx)
	wantErr(t, err, `gs://nobucket/raw: bucket "nobucket" does not exist (check the name in gs://nobucket/...)`)

	_, err = src.Open(ctx, "a.jpg")
	wantErr(t, err, `gs://nobucket/raw/a.jpg: bucket "nobucket" does not exist (check the name in gs://nobucket/...)`)

	src, _ = o.OpenSource(ctx, "gs://data/raw")
	_, err = src.Open(ctx, "cat/missing.jpg")
	wantErr(t, err, `gs://data/raw/cat/missing.jpg: object does not exist`)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing object: %v does not match fs.ErrNotExist", err)
	}

	sink, err := o.OpenSink(ctx, "gs://nobucket/out")
	if err != nil {
		t.Fatal(err)
	}
	publish(t, sink, map[string][]byte{"a.h5": []byte("x")}, []string{"a.h5"})
	wantErr(t, sink.Wait(), `gs://nobucket/out/a.h5: bucket "nobucket" does not exist (check the name in gs://nobucket/...)`)
	sink.(io.Closer).Close()

	srv.Use(t, &gcstest.Proxy{Forbid: "/b/data/"})
	src, _ = o.OpenSource(ctx, "gs://data/raw")
	_, err = src.Open(ctx, "cat/1.jpg")
	wantErr(t, err, `gs://data/raw/cat/1.jpg: permission denied (403): grant the service account roles/storage.objectViewer on bucket data, or run "gcloud auth application-default login", or set GOOGLE_APPLICATION_CREDENTIALS to a service account key file`)
}

func wantErr(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Errorf("no error, want %q", want)
		return
	}
	if err.Error() != want {
		t.Errorf("error\n %q\nwant\n %q", err, want)
	}
}

// TestNoCredentials runs the real client with no emulator and no
// credentials anywhere it looks.
func TestNoCredentials(t *testing.T) {
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("CLOUDSDK_CONFIG", t.TempDir())
	_, err := cloudsrc.OpenSource(context.Background(), "gs://b/raw")
	if err == nil {
		testenv.SkipHardware(t, "a GCE metadata server gives this machine credentials")
	}
	wantErr(t, err, `gs://b/raw: no Google Cloud credentials found: run "gcloud auth application-default login", or set GOOGLE_APPLICATION_CREDENTIALS to a service account key file`)
}

// fatal reports whether err says it must stop a run, as convert.IsFatal
// asks it.
func fatal(err error) bool {
	var f interface{ Fatal() bool }
	return errors.As(err, &f) && f.Fatal()
}

// TestGCSRetryBudget checks that an object that always answers 503 is
// requested exactly Attempts times (8 by default, as the README says): one
// retry layer, not the library's inside this package's.
func TestGCSRetryBudget(t *testing.T) {
	srv := gcstest.NewServer(t, inputs...)
	p := &gcstest.Proxy{Unavailable: "raw/cat/1.jpg"}
	srv.Use(t, p)
	ctx := context.Background()
	for _, tt := range []struct {
		attempts, want int
	}{{0, 8}, {3, 3}} {
		o := fastOpener("")
		o.Attempts = tt.attempts
		before := p.Refused()
		src, _ := o.OpenSource(ctx, "gs://data/raw")
		_, err := src.Open(ctx, "cat/1.jpg")
		if got := p.Refused() - before; got != int64(tt.want) {
			t.Errorf("Attempts %d: %d requests, want %d", tt.attempts, got, tt.want)
		}
		wantErr(t, err, fmt.Sprintf("gs://data/raw/cat/1.jpg: 503 Service Unavailable (gave up after %d attempts: Cloud Storage kept failing; rerun with --resume later, or raise --io-attempts)", tt.want))
		if !fatal(err) {
			t.Errorf("exhausted retries are not fatal: %v", err)
		}
	}
}

// TestGCSUploadRetryBudget uploads to a destination that answers every
// request with 503: each file is requested exactly Attempts times, one
// retry layer again (the library's, bounded by Attempts), and the error
// names the server's answer, not a stall.
func TestGCSUploadRetryBudget(t *testing.T) {
	srv := gcstest.NewServer(t)
	srv.CreateBucket("out")
	p := &gcstest.Proxy{Unavailable: "/b/out/"}
	srv.Use(t, p)
	ctx := context.Background()
	for _, tt := range []struct {
		attempts, want int
		size           int
	}{{0, 8, 1000}, {3, 3, 1000}, {3, 3, 3<<20 + 5}} { // the last in resumable chunks
		o := fastOpener(t.TempDir())
		o.Attempts = tt.attempts
		sink, err := o.OpenSink(ctx, "gs://out/run")
		if err != nil {
			t.Fatal(err)
		}
		before, start := p.Refused(), time.Now()
		publish(t, sink, map[string][]byte{"a.h5": data(30, tt.size)}, []string{"a.h5"})
		err = sink.Wait()
		sink.(io.Closer).Close()
		if got := p.Refused() - before; got != int64(tt.want) {
			t.Errorf("Attempts %d, %d bytes: %d requests, want %d", tt.attempts, tt.size, got, tt.want)
		}
		wantErr(t, err, fmt.Sprintf("gs://out/run/a.h5: 503 Service Unavailable (gave up after %d attempts: Cloud Storage kept failing; rerun with --resume later, or raise --io-attempts)", tt.want))
		if !fatal(err) {
			t.Errorf("exhausted retries are not fatal: %v", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Attempts %d: gave up after %s", tt.attempts, d)
		}
	}
}

// TestGCSUploadStall uploads through a proxy that holds every request
// unanswered: each attempt is abandoned after Timeout and the upload
// started over, Attempts times in all.
func TestGCSUploadStall(t *testing.T) {
	srv := gcstest.NewServer(t)
	srv.CreateBucket("out")
	p := &gcstest.Proxy{StallEvery: 1, Stall: time.Minute}
	srv.Use(t, p)
	ctx := context.Background()
	for _, size := range []int{1000, 3<<20 + 5} {
		o := fastOpener(t.TempDir())
		o.Timeout = 300 * time.Millisecond
		o.Attempts = 2
		sink, err := o.OpenSink(ctx, "gs://out/run")
		if err != nil {
			t.Fatal(err)
		}
		before, start := p.Stalled(), time.Now()
		publish(t, sink, map[string][]byte{"a.h5": data(31, size)}, []string{"a.h5"})
		err = sink.Wait()
		sink.(io.Closer).Close()
		if got := p.Stalled() - before; got != 2 {
			t.Errorf("%d bytes: %d requests, want 2", size, got)
		}
		wantErr(t, err, "gs://out/run/a.h5: no progress within the timeout (--io-timeout) (gave up after 2 attempts: every try stalled; rerun with --resume later, or raise --io-timeout on a slow link)")
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%d bytes: gave up after %s", size, d)
		}
	}
}

// TestGCSObjectTimeout reads through a proxy that stalls every download
// half-way for longer than the object's whole deadline.
func TestGCSObjectTimeout(t *testing.T) {
	srv := gcstest.NewServer(t, inputs...)
	srv.Use(t, &gcstest.Proxy{StallEvery: 1, Stall: time.Minute})
	ctx := context.Background()
	o := fastOpener("")
	o.Timeout = time.Minute // the per-request watchdog never fires
	o.ObjectTimeout = 300 * time.Millisecond
	src, _ := o.OpenSource(ctx, "gs://data/raw")
	rc, err := src.Open(ctx, "dog/3.jpg")
	if err == nil {
		_, err = io.ReadAll(rc)
		rc.Close()
	}
	wantErr(t, err, "gs://data/raw/dog/3.jpg: not read within 300ms (--object-timeout), retries included: raise --object-timeout for large objects or a slow link, then rerun with --resume")
	if !fatal(err) {
		t.Errorf("an object past its deadline is not fatal: %v", err)
	}
}

// TestGCSDestinationErrors checks that refusals at the destination ask for
// the role that writes there, and that only a missing object is not fatal.
func TestGCSDestinationErrors(t *testing.T) {
	const login = `run "gcloud auth application-default login", or set GOOGLE_APPLICATION_CREDENTIALS to a service account key file`
	const admin = `permission denied (403): the destination needs roles/storage.objectAdmin (prep lists, writes and deletes there): grant it to the service account on bucket out, or ` + login
	tests := []struct {
		name  string
		proxy *gcstest.Proxy
		op    func(context.Context, cloudsrc.Sink) error
		want  string
	}{
		{"403 on list", &gcstest.Proxy{Forbid: "/b/out/"},
			func(ctx context.Context, s cloudsrc.Sink) error { _, err := s.List(ctx); return err },
			"gs://out/run: " + admin},
		{"403 on upload", &gcstest.Proxy{Forbid: "/upload/storage/v1/b/out/"},
			func(ctx context.Context, s cloudsrc.Sink) error {
				os.WriteFile(filepath.Join(s.Dir(), "a.h5"), []byte("x"), 0o644)
				s.Publish(ctx, "a.h5")
				return s.Wait()
			},
			"gs://out/run/a.h5: " + admin},
		{"403 on reading the manifest", &gcstest.Proxy{Forbid: "/b/out/"},
			func(ctx context.Context, s cloudsrc.Sink) error {
				_, err := s.ReadFile(ctx, "manifest.json")
				return err
			},
			"gs://out/run/manifest.json: " + admin},
		{"401", &gcstest.Proxy{Unauthorized: "/b/out/"},
			func(ctx context.Context, s cloudsrc.Sink) error { _, err := s.List(ctx); return err },
			"gs://out/run: not authenticated (401): " + login},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := gcstest.NewServer(t)
			srv.CreateBucket("out")
			srv.Use(t, tt.proxy)
			ctx := context.Background()
			sink, err := fastOpener(t.TempDir()).OpenSink(ctx, "gs://out/run")
			if err != nil {
				t.Fatal(err)
			}
			defer sink.(io.Closer).Close()
			err = tt.op(ctx, sink)
			wantErr(t, err, tt.want)
			if !fatal(err) {
				t.Errorf("not fatal: %v", err)
			}
		})
	}

	// A missing object is the one failure a run skips.
	gcstest.NewServer(t, inputs...)
	src, _ := fastOpener("").OpenSource(context.Background(), "gs://data/raw")
	if _, err := src.Open(context.Background(), "cat/gone.jpg"); err == nil || fatal(err) {
		t.Errorf("missing object: %v, want a non-fatal error", err)
	}
}

// TestGCSSinkFiles lists the destination with the CRC32C Cloud Storage
// keeps, equal to the local file's.
func TestGCSSinkFiles(t *testing.T) {
	srv := gcstest.NewServer(t)
	srv.CreateBucket("out")
	ctx := context.Background()
	sink, err := fastOpener(t.TempDir()).OpenSink(ctx, "gs://out/run")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.(io.Closer).Close()
	files := map[string][]byte{"a.h5": data(20, 3000), "b.h5": data(21, 70)}
	want := map[string]uint32{}
	for name, b := range files {
		want[name] = crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
	}
	publish(t, sink, files, []string{"a.h5", "b.h5"})
	if err := sink.Wait(); err != nil {
		t.Fatal(err)
	}
	got, err := sink.(*cloudsrc.GCSSink).Files(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("Files = %+v, want a.h5 and b.h5", got)
	}
	for _, f := range got {
		if f.Size != int64(len(files[f.Name])) || f.CRC32C != want[f.Name] || want[f.Name] != crc32.Checksum(files[f.Name], crc32.MakeTable(crc32.Castagnoli)) {
			t.Errorf("%s: size %d CRC32C %08x, want %d %08x", f.Name, f.Size, f.CRC32C, len(files[f.Name]), want[f.Name])
		}
	}
}
