package cloudsrc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/iterator"
)

// clients holds one storage client per emulator address ("" for Google
// Cloud itself): a client is safe for concurrent use and finding
// credentials is slow, so every source and sink shares it.
//
// It is process-wide state on purpose. An Opener is a plain value that
// callers fill from flags and copy, and the zero Opener (OpenSource,
// OpenURI) must work, so it has nowhere to keep a client made on first
// use; and Resolve makes a GCS for every entry of an input list, which
// must all share one client and its connection pool. The key keeps tests
// that point STORAGE_EMULATOR_HOST at different fake servers apart. Only
// client touches it, under its mutex; clients are never closed and live
// as long as the process.
var clients struct {
	sync.Mutex
	m map[string]*storage.Client
}

// client returns the shared client. It uses Application Default
// Credentials, or no credentials when STORAGE_EMULATOR_HOST points the
// library at an emulator (the library reads that variable itself).
func client() (*storage.Client, error) {
	host := os.Getenv("STORAGE_EMULATOR_HOST")
	clients.Lock()
	defer clients.Unlock()
	if c := clients.m[host]; c != nil {
		return c, nil
	}
	// JSON reads return JSON errors, like every other call, so 403 and 404
	// read the same everywhere. Background: the client outlives any one call.
	c, err := storage.NewClient(context.Background(), storage.WithJSONReads())
	if err != nil {
		return nil, err
	}
	if clients.m == nil {
		clients.m = map[string]*storage.Client{}
	}
	clients.m[host] = c
	return c, nil
}

// splitGS splits gs://bucket/name into its bucket and object name.
func splitGS(uri string) (bucket, name string, err error) {
	rest, ok := strings.CutPrefix(uri, "gs://")
	if !ok {
		return "", "", fmt.Errorf("%s is not a gs:// address", uri)
	}
	bucket, name, _ = strings.Cut(rest, "/")
	if bucket == "" {
		return "", "", fmt.Errorf("%s names no bucket: want gs://BUCKET/PREFIX", uri)
	}
	return bucket, name, nil
}

// GCS is a Source over the objects of one bucket under a prefix,
// optionally filtered by a pattern.
type GCS struct {
	o *Opener
	// bucket serves reads, listings, deletes and attribute calls with the
	// library's retries off: this package's own loop retries them, so
	// that one failing request is tried Opener.Attempts times, and a read
	// resumes at the offset reached instead of starting over.
	bucket *storage.BucketHandle
	// uploads serves uploads only, with the library's retries on: it
	// retries each chunk of a resumable upload in place, which no loop
	// outside it can. An upload is safe to send again (the same bytes under
	// the same name, checked by CRC32C), so the policy is RetryAlways.
	uploads *storage.BucketHandle
	name    string // bucket name
	prefix  string // "" or ending in "/"; keys are relative to it
	pattern string // path.Match pattern on keys; "" keeps all
	dest    bool   // a destination: a 403 asks for the role that writes
}

// gcs returns a source over bucket b with keys relative to prefix.
func (o *Opener) gcs(_ context.Context, b, prefix string) (*GCS, error) {
	c, err := client()
	if err != nil {
		return nil, gcsErr("gs://"+b+"/"+prefix, b, false, err)
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &GCS{
		o:      o,
		bucket: c.Bucket(b).Retryer(storage.WithPolicy(storage.RetryNever)),
		uploads: c.Bucket(b).Retryer(
			storage.WithPolicy(storage.RetryAlways),
			// uploadRetries makes the pauses, so that the watchdog
			// knows them; the library's own is next to nothing.
			storage.WithBackoff(gax.Backoff{Initial: time.Nanosecond, Max: time.Nanosecond, Multiplier: 1}),
		),
		name:   b,
		prefix: prefix,
	}, nil
}

func (o *Opener) openGCSSource(ctx context.Context, uri string) (*GCS, error) {
	b, name, err := splitGS(uri)
	if err != nil {
		return nil, err
	}
	dir, pattern := splitPattern(strings.TrimSuffix(name, "/"))
	if pattern != "" {
		if _, err := path.Match(pattern, ""); err != nil {
			return nil, fmt.Errorf("%s: bad pattern: %w", uri, err)
		}
	}
	g, err := o.gcs(ctx, b, dir)
	if err != nil {
		return nil, err
	}
	g.pattern = pattern
	return g, nil
}

// URI returns gs://bucket/prefix/key.
func (g *GCS) URI(key string) string { return "gs://" + g.name + "/" + g.prefix + key }

// LocalPath is "": objects have no local file.
func (g *GCS) LocalPath(string) string { return "" }

// List lists the objects under the prefix that match the pattern, sorted
// by key. Hidden names (an element starting with '.') and folder
// placeholders are left out, as Dir leaves them out.
func (g *GCS) List(ctx context.Context) ([]Object, error) {
	listPrefix := g.prefix
	if g.pattern != "" {
		// The literal head of the pattern narrows the listing.
		first, _, _ := strings.Cut(g.pattern, "/")
		if i := strings.IndexAny(first, `*?[\`); i >= 0 {
			first = first[:i]
		}
		listPrefix += first
	}
	var objs []Object
	err := g.list(ctx, listPrefix, "", func(a *storage.ObjectAttrs) {
		key := strings.TrimPrefix(a.Name, g.prefix)
		if key == "" || strings.HasSuffix(key, "/") {
			return
		}
		if g.pattern != "" {
			if ok, _ := path.Match(g.pattern, key); !ok {
				return
			}
		}
		objs = append(objs, Object{Key: key, Size: a.Size, Generation: a.Generation, Hidden: hidden(key)})
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
	return objs, nil
}

// list calls fn for each object (and, with a delimiter, each folder as a
// Prefix-only ObjectAttrs) named with prefix. A page request that stalls
// is retried from the last name seen, so a long listing never restarts.
func (g *GCS) list(ctx context.Context, prefix, delim string, fn func(*storage.ObjectAttrs)) error {
	uri := "gs://" + g.name + "/" + strings.TrimSuffix(prefix, "/")
	q := &storage.Query{Prefix: prefix, Delimiter: delim}
	if err := q.SetAttrSelection([]string{"Name", "Size", "CRC32C", "Generation"}); err != nil {
		return err
	}
	bo := g.o.backoff()
	for tries := 1; ; tries++ {
		dog := newWatchdog(ctx, g.o.timeout())
		it := g.bucket.Objects(dog.ctx, q)
		var err error
		for {
			dog.arm()
			var a *storage.ObjectAttrs
			a, err = it.Next()
			stalled := dog.disarm()
			if err == iterator.Done {
				dog.stop()
				return nil
			}
			if err != nil {
				if stalled {
					err = errStalled
				}
				break
			}
			tries = 1
			fn(a)
			if a.Name != "" {
				q.StartOffset = a.Name + "\x00"
			} else {
				q.StartOffset = a.Prefix + "\x00"
			}
		}
		dog.stop()
		if err := retryWait(ctx, err, tries, g.o.attempts(), &bo); err != nil {
			return gcsErr(uri, g.name, g.dest, err)
		}
	}
}

func hidden(key string) bool {
	for _, e := range strings.Split(key, "/") {
		if strings.HasPrefix(e, ".") {
			return true
		}
	}
	return false
}

// Open opens the object behind key. The first request is made here, so a
// missing object or a refused permission shows up at once; reads that
// stall or fail later resume at the offset reached, on the same object
// generation. Opening and reading together, retries included, must end
// within the Opener's ObjectTimeout; Close ends the object's time.
func (g *GCS) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	return g.openObject(ctx, g.prefix+key)
}

func (g *GCS) openObject(ctx context.Context, name string) (*objectReader, error) {
	d := g.o.objectTimeout()
	ctx, cancel := context.WithTimeoutCause(ctx, d, &deadlineError{d})
	r := &objectReader{ctx: ctx, cancel: cancel, g: g, obj: g.bucket.Object(name), name: name, bo: g.o.backoff()}
	if err := r.reopen(); err != nil {
		defer cancel()
		if errors.Is(err, fs.ErrNotExist) {
			// A missing bucket answers 404 to object reads too: tell
			// the two apart, on this error path only.
			if _, berr := g.bucket.Attrs(ctx); errors.Is(berr, storage.ErrBucketNotExist) {
				return nil, gcsErr(r.uri(), g.name, g.dest, berr)
			}
		}
		return nil, err
	}
	return r, nil
}

// deadlineError is the cause of an object read that ran out of its
// ObjectTimeout.
type deadlineError struct{ d time.Duration }

func (e *deadlineError) Error() string {
	return fmt.Sprintf("not read within %s (--object-timeout), retries included", e.d)
}

// objectReader reads one object, reopening it at the offset reached when a
// read fails with a retryable error or makes no progress for the
// Opener's Timeout.
type objectReader struct {
	ctx    context.Context // ends at the object's deadline, or on Close
	cancel context.CancelFunc
	g      *GCS
	obj    *storage.ObjectHandle
	name   string
	bo     gax.Backoff
	rr     *storage.Reader
	dog    *watchdog
	off    int64
	size   int64
	gen    int64
	tries  int // failed attempts since the last progress
}

func (r *objectReader) uri() string { return "gs://" + r.g.name + "/" + r.name }

// reopen starts a read at r.off, trying again while errors are retryable.
func (r *objectReader) reopen() error {
	obj := r.obj
	if r.gen != 0 {
		obj = obj.Generation(r.gen)
	}
	for {
		r.tries++
		dog := newWatchdog(r.ctx, r.g.o.timeout())
		dog.arm()
		rr, err := obj.NewRangeReader(dog.ctx, r.off, -1)
		stalled := dog.disarm()
		if err == nil {
			r.rr, r.dog = rr, dog
			if r.gen == 0 {
				r.gen, r.size = rr.Attrs.Generation, rr.Attrs.Size
			}
			return nil
		}
		dog.stop()
		if stalled {
			err = errStalled
		}
		if err := retryWait(r.ctx, err, r.tries, r.g.o.attempts(), &r.bo); err != nil {
			return r.fail(err)
		}
	}
}

// fail turns an error that ends a read into an Error, naming the object's
// deadline when it was that which ran out.
func (r *objectReader) fail(err error) error {
	var de *deadlineError
	if errors.As(context.Cause(r.ctx), &de) {
		err = de
	}
	return gcsErr(r.uri(), r.g.name, r.g.dest, err)
}

func (r *objectReader) Read(p []byte) (int, error) {
	for {
		if r.rr == nil {
			if err := r.reopen(); err != nil {
				return 0, err
			}
		}
		r.dog.arm()
		n, err := r.rr.Read(p)
		stalled := r.dog.disarm()
		r.off += int64(n)
		if n > 0 {
			r.tries = 0
		}
		if err == nil || err == io.EOF {
			return n, err
		}
		r.drop()
		if stalled {
			err = errStalled
		}
		if n > 0 && (stalled || storage.ShouldRetry(err)) {
			return n, nil // the next Read reopens
		}
		if err := retryWait(r.ctx, err, r.tries+1, r.g.o.attempts(), &r.bo); err != nil {
			return n, r.fail(err)
		}
	}
}

func (r *objectReader) drop() {
	if r.rr != nil {
		r.rr.Close()
		r.dog.stop()
		r.rr, r.dog = nil, nil
	}
}

// Stat reports the object's size, as *os.File does, so readers can size
// their buffer once.
func (r *objectReader) Stat() (fs.FileInfo, error) { return objectInfo{r.name, r.size}, nil }

func (r *objectReader) Close() error {
	r.drop()
	r.cancel()
	return nil
}

// objectInfo is a remote object's fs.FileInfo, for Stat.
type objectInfo struct {
	name string
	size int64
}

func (i objectInfo) Name() string       { return path.Base(i.name) }
func (i objectInfo) Size() int64        { return i.size }
func (i objectInfo) Mode() fs.FileMode  { return 0o444 }
func (i objectInfo) ModTime() time.Time { return time.Time{} }
func (i objectInfo) IsDir() bool        { return false }
func (i objectInfo) Sys() any           { return nil }
