package cloudsrc

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/googleapis/gax-go/v2"
)

// Opener opens sources and sinks by URI. The zero value uses the defaults
// noted on each field; the package-level OpenSource, OpenSink and OpenURI
// use a zero Opener.
type Opener struct {
	// Timeout abandons one storage request that makes no progress for this
	// long: a read call on a download, which is tried again from where it
	// stopped; a listing page; an upload that gets no answer and has no
	// bytes accepted, which is started over. Any answer, even an error, is
	// progress: a server that answers 503 is failing, not stalled. It
	// bounds a stalled connection, not the transfer: a large object takes
	// as long as it takes, but Timeout must cover sending one upload chunk
	// (ChunkSize). Default 60s.
	Timeout time.Duration
	// ObjectTimeout caps the time one object's read may take in all,
	// retries and resumed requests included; past it the read fails.
	// Default 5m.
	ObjectTimeout time.Duration
	// Attempts is how many times one request (a read, a listing page, a
	// delete, one request of an upload) is tried before a retryable
	// failure (429, 5xx, a connection error, a stall) ends it. The
	// requests of an upload are retried in place by the storage library,
	// each up to Attempts times; an upload that stalls or arrives corrupted
	// (CRC32C mismatch) is started over, up to Attempts times. Default 8.
	Attempts int
	// Backoff spaces the attempts (full jitter). Default 100ms doubling
	// up to 5s.
	Backoff gax.Backoff
	// Uploads is how many files a gs:// or s3:// Sink uploads at once.
	// Default 4.
	Uploads int
	// ChunkSize is the most one upload request sends (a multiple of
	// 256 KiB); larger files go up in resumable chunks, each retried on
	// its own. Timeout must cover sending one chunk. Default 16 MiB.
	ChunkSize int
	// Staging is where a gs:// or s3:// Sink stages its files before upload.
	// Default $PREP_STAGING, else the system temp folder.
	Staging string
}

func (o *Opener) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return 60 * time.Second
}

func (o *Opener) objectTimeout() time.Duration {
	if o.ObjectTimeout > 0 {
		return o.ObjectTimeout
	}
	return 5 * time.Minute
}

func (o *Opener) attempts() int {
	if o.Attempts > 0 {
		return o.Attempts
	}
	return 8
}

func (o *Opener) backoff() gax.Backoff {
	if o.Backoff.Initial > 0 {
		return o.Backoff
	}
	return gax.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second, Multiplier: 2}
}

func (o *Opener) uploads() int {
	if o.Uploads > 0 {
		return o.Uploads
	}
	return 4
}

func (o *Opener) chunkSize() int {
	if o.ChunkSize > 0 {
		return (o.ChunkSize + 256<<10 - 1) / (256 << 10) * (256 << 10)
	}
	return 16 << 20
}

func (o *Opener) staging() string {
	if o.Staging != "" {
		return o.Staging
	}
	if s := os.Getenv("PREP_STAGING"); s != "" {
		return s
	}
	return os.TempDir()
}

// OpenSource opens uri with the default Opener.
func OpenSource(ctx context.Context, uri string) (Source, error) {
	return (&Opener{}).OpenSource(ctx, uri)
}

// OpenSink opens uri with the default Opener.
func OpenSink(ctx context.Context, uri string) (Sink, error) {
	return (&Opener{}).OpenSink(ctx, uri)
}

// OpenURI opens one file or object with the default Opener.
func OpenURI(ctx context.Context, uri string) (io.ReadCloser, error) {
	return (&Opener{}).OpenURI(ctx, uri)
}

// IsRemote reports whether uri names cloud storage (gs:// or s3://) rather
// than a local path.
func IsRemote(uri string) bool { return isGS(uri) || isS3(uri) }

func isGS(uri string) bool { return strings.HasPrefix(uri, "gs://") }

// isS3 reports an s3:// address: Amazon S3, or an S3-compatible store
// (MinIO, Cloudflare R2) at AWS_ENDPOINT_URL.
func isS3(uri string) bool { return strings.HasPrefix(uri, "s3://") }

// remote is what a bucket of either store gives Resolve and OpenURI.
type remote interface {
	Source
	// open opens one object by its full name in the bucket.
	open(ctx context.Context, name string) (io.ReadCloser, error)
}

func (g *GCS) open(ctx context.Context, name string) (io.ReadCloser, error) {
	return g.openObject(ctx, name)
}

func (s *S3) open(ctx context.Context, name string) (io.ReadCloser, error) {
	return s.openObject(ctx, name)
}

// bucketOf splits a gs:// or s3:// address into a Source over its whole
// bucket and the object name.
func (o *Opener) bucketOf(ctx context.Context, uri string) (remote, string, error) {
	if isS3(uri) {
		b, name, err := splitS3(uri)
		if err != nil {
			return nil, "", err
		}
		s, err := o.s3(b, "")
		return s, name, err
	}
	b, name, err := splitGS(uri)
	if err != nil {
		return nil, "", err
	}
	g, err := o.gcs(ctx, b, "")
	return g, name, err
}

// OpenSource opens the inputs at uri:
//   - a local folder: every file under it (Dir);
//   - a local glob such as /data/*/*.jpg: the matching files, keyed
//     relative to the glob's fixed leading folder (/data);
//   - gs://bucket/prefix: every object under prefix/, keyed relative to it;
//   - gs://bucket/prefix/*/*.jpg: the objects whose names match the pattern
//     (path.Match, so * stays within one path element), keyed relative to
//     the fixed leading prefix;
//   - s3://bucket/prefix, with or without a pattern: as gs://, on Amazon
//     S3 or an S3-compatible store at AWS_ENDPOINT_URL.
//
// Listing is left to Source.List; OpenSource only checks the address.
func (o *Opener) OpenSource(ctx context.Context, uri string) (Source, error) {
	if isS3(uri) {
		s, err := o.openS3Source(uri)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	if IsRemote(uri) {
		g, err := o.openGCSSource(ctx, uri)
		if err != nil {
			return nil, err
		}
		return g, nil
	}
	if _, err := os.Stat(uri); err == nil || !hasMeta(uri) {
		return Dir{Root: uri}, nil
	}
	return globSource(uri)
}

// OpenSink opens the destination at uri: a local folder (created if
// needed), or gs://bucket/prefix or s3://bucket/prefix, whose Sink stages
// files locally and uploads each one when it is published. A remote Sink
// is an io.Closer:
// Close waits for the uploads and removes the staging folder.
func (o *Opener) OpenSink(ctx context.Context, uri string) (Sink, error) {
	if isS3(uri) {
		s, err := o.openS3Sink(ctx, uri)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	if IsRemote(uri) {
		s, err := o.openGCSSink(ctx, uri)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	return NewLocalSink(uri)
}

// OpenURI opens one local file or gs:// or s3:// object, e.g. an input list or an
// entry in one.
func (o *Opener) OpenURI(ctx context.Context, uri string) (io.ReadCloser, error) {
	if !IsRemote(uri) {
		return os.Open(uri)
	}
	src, name, err := o.bucketOf(ctx, uri)
	if err != nil {
		return nil, err
	}
	if name == "" || strings.HasSuffix(name, "/") {
		return nil, fmt.Errorf("%s names a folder, not an object", uri)
	}
	return src.open(ctx, name)
}

// Resolve maps one entry of an input list to the Source that opens it and
// its key there. base is the folder (or gs:// or s3:// prefix) of the list, against
// which relative entries resolve. It has the shape that
// convert.ParseInputList takes for its open argument:
//
//	convert.ParseInputList(name, data, func(uri string) (cloudsrc.Source, string, error) {
//		return opener.Resolve(ctx, base, uri)
//	}, handled)
func (o *Opener) Resolve(ctx context.Context, base, uri string) (Source, string, error) {
	switch {
	case IsRemote(uri):
		src, name, err := o.bucketOf(ctx, uri)
		if err != nil {
			return nil, "", err
		}
		return src, name, nil
	case IsRemote(base) && !path.IsAbs(uri):
		src, prefix, err := o.bucketOf(ctx, base)
		if err != nil {
			return nil, "", err
		}
		name := path.Join(prefix, uri)
		if name == ".." || strings.HasPrefix(name, "../") {
			return nil, "", fmt.Errorf("%s: %s leaves the bucket", base, uri)
		}
		return src, name, nil
	}
	return Dir{Root: base}, uri, nil
}

// hasMeta reports whether p holds a glob metacharacter.
func hasMeta(p string) bool { return strings.ContainsAny(p, `*?[`) }

// splitPattern splits a '/'-separated glob into its fixed leading folder
// and the rest: "raw/*/a*.jpg" gives "raw", "*/a*.jpg".
func splitPattern(p string) (dir, rest string) {
	parts := strings.Split(p, "/")
	for i, e := range parts {
		if hasMeta(e) {
			return strings.Join(parts[:i], "/"), strings.Join(parts[i:], "/")
		}
	}
	return p, ""
}

// fileList is a Source over a fixed list of local files under Root.
type fileList struct {
	Dir
	objs []Object
}

func (f fileList) List(ctx context.Context) ([]Object, error) {
	return append([]Object(nil), f.objs...), ctx.Err()
}

// globSource matches a local glob once, when opened.
func globSource(pattern string) (Source, error) {
	if _, err := filepath.Match(pattern, ""); err != nil {
		return nil, fmt.Errorf("source %s: bad pattern: %w", pattern, err)
	}
	slashed := filepath.ToSlash(pattern)
	dir, _ := splitPattern(slashed)
	if dir == "" && strings.HasPrefix(slashed, "/") {
		dir = "/"
	}
	root := filepath.FromSlash(dir)
	matches, err := filepath.Glob(pattern)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", pattern, err)
	}
	f := fileList{Dir: Dir{Root: root}}
	for _, m := range matches {
		fi, err := os.Stat(m)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		rel, err := filepath.Rel(root, m)
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", pattern, err)
		}
		f.objs = append(f.objs, Object{Key: filepath.ToSlash(rel), Size: fi.Size(), ModTime: fi.ModTime()})
	}
	if len(f.objs) == 0 {
		return nil, fmt.Errorf("source %s matches no files: check the pattern", pattern)
	}
	sort.Slice(f.objs, func(i, j int) bool { return f.objs[i].Key < f.objs[j].Key })
	return f, nil
}
