package cloudsrc

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// s3Clients holds one S3 client per endpoint and credential setting, for
// the reasons clients (gcs.go) gives for Cloud Storage: loading the
// configuration is slow, a client is safe for concurrent use, and every
// entry of an input list must share one connection pool. The key keeps
// tests that point AWS_ENDPOINT_URL at different fake servers apart.
var s3Clients struct {
	sync.Mutex
	m map[string]*s3.Client
}

// s3Client returns the shared client. Credentials and region come from the
// SDK's default chain (environment, shared config and credentials files,
// SSO, web identity, the ECS or EC2 instance role), the endpoint from
// AWS_ENDPOINT_URL or AWS_ENDPOINT_URL_S3 when set (MinIO, R2). A custom
// endpoint is addressed path-style (endpoint/bucket/key), which MinIO
// needs and R2 accepts. The SDK's own retries are off: this package's
// loops retry every request (retry.go), as they do for Cloud Storage.
func s3Client() (*s3.Client, error) {
	key := os.Getenv("AWS_ENDPOINT_URL") + "\x00" + os.Getenv("AWS_ENDPOINT_URL_S3") + "\x00" +
		os.Getenv("AWS_ACCESS_KEY_ID") + "\x00" + os.Getenv("AWS_PROFILE") + "\x00" + os.Getenv("AWS_REGION")
	s3Clients.Lock()
	defer s3Clients.Unlock()
	if c := s3Clients.m[key]; c != nil {
		return c, nil
	}
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		return nil, err
	}
	custom := cfg.BaseEndpoint != nil || os.Getenv("AWS_ENDPOINT_URL_S3") != ""
	if cfg.Region == "" {
		// S3 signs with a region even where the server ignores it
		// (MinIO, R2 takes "auto" or this); a bucket elsewhere on AWS
		// answers 301, whose message asks for AWS_REGION.
		cfg.Region = "us-east-1"
	}
	c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.Retryer = aws.NopRetryer{}
		o.UsePathStyle = custom
		// prep sends the CRC32C it computed itself; the SDK need not
		// stream another checksum in a trailer (which S3-compatible
		// servers do not all accept).
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	if s3Clients.m == nil {
		s3Clients.m = map[string]*s3.Client{}
	}
	s3Clients.m[key] = c
	return c, nil
}

// splitS3 splits s3://bucket/name into its bucket and object key.
func splitS3(uri string) (bucket, name string, err error) { return splitURL(uri, "s3") }

// S3 is a Source over the objects of one S3 (or S3-compatible) bucket
// under a prefix, optionally filtered by a pattern. It behaves as GCS
// does: the same listing, hidden-name and pattern rules, the same retries
// (Opener.Attempts, Backoff) and stall watchdog (Opener.Timeout), and
// reads that resume where they stopped, pinned to the object first read.
type S3 struct {
	o       *Opener
	c       *s3.Client
	name    string // bucket name
	prefix  string // "" or ending in "/"; keys are relative to it
	pattern string // path.Match pattern on keys; "" keeps all
	dest    bool   // a destination: a 403 asks for the permissions that write
}

func (o *Opener) s3(b, prefix string) (*S3, error) {
	c, err := s3Client()
	if err != nil {
		return nil, s3Err("s3://"+b+"/"+prefix, b, false, err)
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &S3{o: o, c: c, name: b, prefix: prefix}, nil
}

func (o *Opener) openS3Source(uri string) (*S3, error) {
	b, name, err := splitS3(uri)
	if err != nil {
		return nil, err
	}
	dir, pattern := splitPattern(strings.TrimSuffix(name, "/"))
	if pattern != "" {
		if _, err := path.Match(pattern, ""); err != nil {
			return nil, fmt.Errorf("%s: bad pattern: %w", uri, err)
		}
	}
	s, err := o.s3(b, dir)
	if err != nil {
		return nil, err
	}
	s.pattern = pattern
	return s, nil
}

// URI returns s3://bucket/prefix/key.
func (s *S3) URI(key string) string { return "s3://" + s.name + "/" + s.prefix + key }

// LocalPath is "": objects have no local file.
func (s *S3) LocalPath(string) string { return "" }

// ETagGeneration is the Generation an S3 object is recorded with: the
// first 63 bits of the SHA-256 of its ETag (quotes included, as S3 sends
// it), never 0. S3 has no generation number; the ETag is what it gives for
// every object, versioned bucket or not, and it changes whenever the
// object's bytes do (an MD5 of them for a plain upload, of its parts for a
// multipart one). It is hashed because an ETag is text and the manifest's
// input list keeps a number.
func ETagGeneration(etag string) int64 {
	h := sha256.Sum256([]byte(etag))
	g := int64(binary.BigEndian.Uint64(h[:8]) >> 1)
	return max(g, 1)
}

// List lists the objects under the prefix that match the pattern, sorted
// by key, as GCS.List does. Each object's Generation is ETagGeneration of
// its ETag and its ModTime is its LastModified (whole seconds as S3 lists
// them): a rewrite changes the time even where the bytes are the same.
func (s *S3) List(ctx context.Context) ([]Object, error) {
	listPrefix := s.prefix
	if s.pattern != "" {
		first, _, _ := strings.Cut(s.pattern, "/")
		if i := strings.IndexAny(first, `*?[\`); i >= 0 {
			first = first[:i]
		}
		listPrefix += first
	}
	var objs []Object
	err := s.list(ctx, listPrefix, "", func(o types.Object) {
		key := strings.TrimPrefix(aws.ToString(o.Key), s.prefix)
		if key == "" || strings.HasSuffix(key, "/") {
			return
		}
		if s.pattern != "" {
			if ok, _ := path.Match(s.pattern, key); !ok {
				return
			}
		}
		objs = append(objs, Object{Key: key, Size: aws.ToInt64(o.Size), Generation: ETagGeneration(aws.ToString(o.ETag)), ModTime: aws.ToTime(o.LastModified).UTC(), Hidden: hidden(key)})
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
	return objs, nil
}

// list calls fn for each object named with prefix (with a delimiter, only
// those directly under it). A page request that fails or stalls is tried
// again with the same continuation token, so a long listing never
// restarts.
func (s *S3) list(ctx context.Context, prefix, delim string, fn func(types.Object)) error {
	uri := "s3://" + s.name + "/" + strings.TrimSuffix(prefix, "/")
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.name), Prefix: aws.String(prefix)}
	if delim != "" {
		in.Delimiter = aws.String(delim)
	}
	bo := s.o.backoff()
	for tries := 1; ; tries++ {
		var out *s3.ListObjectsV2Output
		err := s.guard(ctx, func(ctx context.Context) (err error) {
			out, err = s.c.ListObjectsV2(ctx, in)
			return err
		})
		if err == nil {
			tries = 0
			for _, o := range out.Contents {
				fn(o)
			}
			if !aws.ToBool(out.IsTruncated) || out.NextContinuationToken == nil {
				return nil
			}
			in.ContinuationToken = out.NextContinuationToken
			continue
		}
		if err := retryWait(ctx, err, tries, s.o.attempts(), &bo); err != nil {
			return s3Err(uri, s.name, s.dest, err)
		}
	}
}

// guard runs one request under a watchdog of the Opener's Timeout: a
// request that gets no answer in that time is cancelled and fails with
// errStalled, which retryWait counts as transient.
func (s *S3) guard(ctx context.Context, call func(context.Context) error) error {
	dog := newWatchdog(ctx, s.o.timeout())
	defer dog.stop()
	dog.arm()
	err := call(dog.ctx)
	if dog.disarm() {
		return errStalled
	}
	return err
}

// retried runs call until it succeeds or fails for good, each try guarded.
func (s *S3) retried(ctx context.Context, call func(context.Context) error) error {
	bo := s.o.backoff()
	for tries := 1; ; tries++ {
		err := s.guard(ctx, call)
		if err == nil {
			return nil
		}
		if err := retryWait(ctx, err, tries, s.o.attempts(), &bo); err != nil {
			return err
		}
	}
}

// Open opens the object behind key, as GCS.Open does: the first request
// is made here, reads that stall or fail resume at the offset reached on
// the same object (If-Match its ETag), and the whole read must end within
// the Opener's ObjectTimeout.
func (s *S3) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.openObject(ctx, s.prefix+key)
}

func (s *S3) openObject(ctx context.Context, name string) (*objectReader, error) {
	var etag string // the version first read: later reads are If-Match it
	var size int64
	r := &objectReader{
		uri:  "s3://" + s.name + "/" + name,
		name: name,
		open: func(ctx context.Context, off int64) (io.ReadCloser, int64, error) {
			in := &s3.GetObjectInput{Bucket: aws.String(s.name), Key: aws.String(name)}
			if off > 0 {
				in.Range = aws.String("bytes=" + strconv.FormatInt(off, 10) + "-")
			}
			if etag != "" {
				in.IfMatch = aws.String(etag) // the object first read, or 412
			}
			out, err := s.c.GetObject(ctx, in)
			if err != nil {
				if off > 0 && size == off && isStatus(err, 416) {
					return io.NopCloser(strings.NewReader("")), size, nil // nothing is left past the end
				}
				return nil, 0, err
			}
			if etag == "" {
				etag, size = aws.ToString(out.ETag), aws.ToInt64(out.ContentLength)
			}
			return out.Body, size, nil
		},
		resumable: transient,
		exact:     true,
	}
	r.wrap = func(err error) error { return s3Err(r.uri, s.name, s.dest, err) }
	if err := r.start(ctx, s.o); err != nil {
		r.cancel()
		return nil, err
	}
	return r, nil
}
