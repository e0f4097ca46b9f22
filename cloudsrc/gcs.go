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
func splitGS(uri string) (bucket, name string, err error) { return splitURL(uri, "gs") }

// splitURL splits scheme://bucket/name into its bucket and object name.
func splitURL(uri, scheme string) (bucket, name string, err error) {
	rest, ok := strings.CutPrefix(uri, scheme+"://")
	if !ok {
		return "", "", fmt.Errorf("%s does not start with %s://", uri, scheme)
	}
	bucket, name, _ = strings.Cut(rest, "/")
	if bucket == "" {
		return "", "", fmt.Errorf("%s names no bucket: want %s://BUCKET/PREFIX", uri, scheme)
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
	obj := g.bucket.Object(name)
	var gen int64 // the generation first read: later reads are pinned to it
	r := &objectReader{
		uri:  "gs://" + g.name + "/" + name,
		name: name,
		open: func(ctx context.Context, off int64) (io.ReadCloser, int64, error) {
			h := obj
			if gen != 0 {
				h = obj.Generation(gen)
			}
			rr, err := h.NewRangeReader(ctx, off, -1)
			if err != nil {
				return nil, 0, err
			}
			if gen == 0 {
				gen = rr.Attrs.Generation
			}
			return rr, rr.Attrs.Size, nil
		},
		resumable: func(err error) bool { return errors.Is(err, errStalled) || storage.ShouldRetry(err) },
	}
	r.wrap = func(err error) error { return gcsErr(r.uri, g.name, g.dest, err) }
	if err := r.start(ctx, g.o); err != nil {
		defer r.cancel()
		if errors.Is(err, fs.ErrNotExist) {
			// A missing bucket answers 404 to object reads too: tell
			// the two apart, on this error path only.
			if _, berr := g.bucket.Attrs(r.ctx); errors.Is(berr, storage.ErrBucketNotExist) {
				return nil, gcsErr(r.uri, g.name, g.dest, berr)
			}
		}
		return nil, err
	}
	return r, nil
}
