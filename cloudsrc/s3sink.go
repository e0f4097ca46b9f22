package cloudsrc

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"golang.org/x/sync/errgroup"
)

// S3Sink stages files in a local folder and uploads each one to
// s3://bucket/prefix when it is published, as GCSSink does for gs://:
// uploads run in the background, a few at a time (Opener.Uploads), each
// checked end to end by the CRC32C S3 computes and stores with the object
// (x-amz-checksum-crc32c; a file larger than one part goes up as a
// multipart upload with a FULL_OBJECT CRC32C, each part checked with its
// own). The local copy is removed once its upload is confirmed.
type S3Sink struct {
	s   *S3
	ctx context.Context // uploads run under the context OpenSink was given
	uploads
}

func (o *Opener) openS3Sink(ctx context.Context, uri string) (*S3Sink, error) {
	b, prefix, err := splitS3(strings.TrimSuffix(uri, "/"))
	if err != nil {
		return nil, err
	}
	if hasMeta(prefix) {
		return nil, fmt.Errorf("destination %s: a destination cannot be a pattern", uri)
	}
	s, err := o.s3(b, prefix)
	if err != nil {
		return nil, err
	}
	s.dest = true
	dir, err := o.stagingDir(uri, "s3://"+b+"/"+prefix)
	if err != nil {
		return nil, err
	}
	return &S3Sink{s: s, ctx: ctx, uploads: newUploads(dir, o.uploads())}, nil
}

// Dir is the local staging folder.
func (k *S3Sink) Dir() string { return k.dir }

// URI is s3://bucket/prefix.
func (k *S3Sink) URI() string { return "s3://" + k.s.name + "/" + strings.TrimSuffix(k.s.prefix, "/") }

func (k *S3Sink) objectURI(name string) string { return k.s.URI(name) }

// Publish starts uploading Dir()/name and returns, as GCSSink.Publish.
func (k *S3Sink) Publish(ctx context.Context, name string) error {
	return k.publish(ctx, name, nil)
}

// PublishSummed is Publish for a file whose CRC32C and size are known.
func (k *S3Sink) PublishSummed(ctx context.Context, name string, crc uint32, size int64) error {
	return k.publish(ctx, name, &fileSum{crc, size})
}

func (k *S3Sink) publish(ctx context.Context, name string, sum *fileSum) error {
	return k.start(ctx, name, k.objectURI(name), func(staged string) error { return k.upload(staged, name, sum, false) })
}

// minPart and maxParts are S3's multipart limits: every part but the last
// at least 5 MiB, at most 10,000 parts.
const (
	minPart  = 5 << 20
	maxParts = 10000
)

// partSize is the size of one upload request for a file of size bytes:
// Opener.ChunkSize, raised to S3's minimum part and to what keeps a large
// file within 10,000 parts.
func (k *S3Sink) partSize(size int64) int64 {
	p := max(int64(k.s.o.chunkSize()), minPart)
	if need := (size + maxParts - 1) / maxParts; need > p {
		p = need
	}
	return p
}

// crcText is a CRC32C as S3 sends it: base64 of its 4 big-endian bytes.
func crcText(crc uint32) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], crc)
	return base64.StdEncoding.EncodeToString(b[:])
}

// parseCRC reads a full-object CRC32C as S3 sends it; false for none or a
// composite one ("...-N", of a multipart upload's parts).
func parseCRC(s string) (uint32, bool) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != 4 {
		return 0, false
	}
	return binary.BigEndian.Uint32(b), true
}

// upload copies the local file to the object name: one PutObject for a
// file up to one part, a multipart upload for a larger one. Each request
// is tried up to Opener.Attempts times, in place, while it fails with
// 429, 5xx, a connection error, a stall (no answer and no byte sent for
// Opener.Timeout) or bytes that arrived changed (S3 refuses a part or
// object whose CRC32C differs: BadDigest). createOnly makes the write
// conditional (If-None-Match: *): a name already taken fails with 412.
func (k *S3Sink) upload(local, name string, sum *fileSum, createOnly bool) error {
	ctx := k.ctx // uploads run under the context OpenSink was given
	uri := k.objectURI(name)
	if sum == nil {
		crc, size, err := fileCRC32C(local)
		if err != nil {
			return fmt.Errorf("upload %s: %w", uri, err)
		}
		sum = &fileSum{crc, size}
	}
	f, err := os.Open(local)
	if err != nil {
		return fmt.Errorf("upload %s: %w", uri, err)
	}
	defer f.Close()
	key := k.s.prefix + name
	ctype := "application/octet-stream"
	if path.Ext(name) == ".json" {
		ctype = "application/json"
	}
	part := k.partSize(sum.size)
	if sum.size <= part {
		err = k.putOnce(ctx, f, key, ctype, *sum, createOnly)
	} else {
		err = k.multipart(ctx, f, key, ctype, *sum, part, createOnly)
	}
	return s3Err(uri, k.s.name, true, err)
}

// putOnce uploads the whole file in one PutObject request, retried.
func (k *S3Sink) putOnce(ctx context.Context, f *os.File, key, ctype string, sum fileSum, createOnly bool) error {
	bo := k.s.o.backoff()
	for tries := 1; ; tries++ {
		in := &s3.PutObjectInput{
			Bucket:         aws.String(k.s.name),
			Key:            aws.String(key),
			ContentLength:  aws.Int64(sum.size),
			ContentType:    aws.String(ctype),
			ChecksumCRC32C: aws.String(crcText(sum.crc)),
		}
		if createOnly {
			in.IfNoneMatch = aws.String("*")
		}
		var out *s3.PutObjectOutput
		err := k.send(ctx, io.NewSectionReader(f, 0, sum.size), func(ctx context.Context, body io.Reader) (err error) {
			in.Body = body
			out, err = k.s.c.PutObject(ctx, in)
			return err
		})
		if err == nil {
			return checkStored(aws.ToString(out.ChecksumCRC32C), sum.crc)
		}
		if createOnly && tries > 1 && isStatus(err, 412) {
			// An earlier try may have landed, its answer lost.
			return k.checkOwn(ctx, key, sum, err)
		}
		if err := retryWait(ctx, err, tries, k.s.o.attempts(), &bo); err != nil {
			return err
		}
	}
}

// checkStored compares the CRC32C S3 answered with the one sent; a server
// that answers none (one without checksum support) is taken at its word.
func checkStored(got string, crc uint32) error {
	if got == "" {
		return nil
	}
	if c, ok := parseCRC(got); ok && c != crc {
		return fmt.Errorf("%w: stored CRC32C %08x, sent %08x", errCorrupt, c, crc)
	}
	return nil
}

// send makes one upload request under a watchdog: every byte the request
// body gives the connection is progress. A refused checksum is errCorrupt.
func (k *S3Sink) send(ctx context.Context, body io.ReadSeeker, call func(context.Context, io.Reader) error) error {
	dog := newWatchdog(ctx, k.s.o.timeout())
	defer dog.stop()
	dog.arm()
	err := call(dog.ctx, &kickReader{r: body, dog: dog})
	if dog.disarm() {
		return errStalled
	}
	if code := apiCode(err); code == "BadDigest" || code == "InvalidDigest" || code == "XAmzContentChecksumMismatch" {
		return fmt.Errorf("%w: %v", errCorrupt, err)
	}
	return err
}

// kickReader kicks a watchdog on every read of an upload's body. It is a
// ReadSeeker, so the SDK can hash the body to sign it and rewind it.
type kickReader struct {
	r   io.ReadSeeker
	dog *watchdog
}

func (r *kickReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.dog.kick(0)
	}
	return n, err
}

func (r *kickReader) Seek(off int64, whence int) (int64, error) { return r.r.Seek(off, whence) }

// multipart uploads the file in parts of part bytes, each with its own
// CRC32C, and completes it with the file's full-object CRC32C. An upload
// that fails is aborted, so that no parts are left to pay for.
func (k *S3Sink) multipart(ctx context.Context, f *os.File, key, ctype string, sum fileSum, part int64, createOnly bool) error {
	var id string
	err := k.s.retried(ctx, func(ctx context.Context) error {
		out, err := k.s.c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
			Bucket:            aws.String(k.s.name),
			Key:               aws.String(key),
			ContentType:       aws.String(ctype),
			ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c,
			ChecksumType:      types.ChecksumTypeFullObject,
		})
		if err == nil {
			id = aws.ToString(out.UploadId)
		}
		return err
	})
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			k.s.c.AbortMultipartUpload(context.WithoutCancel(ctx), &s3.AbortMultipartUploadInput{
				Bucket: aws.String(k.s.name), Key: aws.String(key), UploadId: aws.String(id)})
		}
	}()
	var parts []types.CompletedPart
	for off, n := int64(0), int32(1); off < sum.size; off, n = off+part, n+1 {
		size := min(part, sum.size-off)
		crc, err := sectionCRC(f, off, size)
		if err != nil {
			return fmt.Errorf("read %s: %w", f.Name(), err)
		}
		var etag string
		bo := k.s.o.backoff()
		for tries := 1; ; tries++ {
			err = k.send(ctx, io.NewSectionReader(f, off, size), func(ctx context.Context, body io.Reader) error {
				out, err := k.s.c.UploadPart(ctx, &s3.UploadPartInput{
					Bucket: aws.String(k.s.name), Key: aws.String(key), UploadId: aws.String(id),
					PartNumber: aws.Int32(n), Body: body, ContentLength: aws.Int64(size),
					ChecksumCRC32C: aws.String(crcText(crc)),
				})
				if err == nil {
					etag = aws.ToString(out.ETag)
				}
				return err
			})
			if err == nil {
				break
			}
			if err := retryWait(ctx, err, tries, k.s.o.attempts(), &bo); err != nil {
				return err
			}
		}
		parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(n), ETag: aws.String(etag), ChecksumCRC32C: aws.String(crcText(crc))})
	}
	in := &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(k.s.name), Key: aws.String(key), UploadId: aws.String(id),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
		ChecksumCRC32C:  aws.String(crcText(sum.crc)),
		ChecksumType:    types.ChecksumTypeFullObject,
	}
	if createOnly {
		in.IfNoneMatch = aws.String("*")
	}
	bo := k.s.o.backoff()
	for tries := 1; ; tries++ {
		var out *s3.CompleteMultipartUploadOutput
		err := k.s.guard(ctx, func(ctx context.Context) (err error) {
			out, err = k.s.c.CompleteMultipartUpload(ctx, in)
			return err
		})
		if err == nil {
			done = true
			return checkStored(aws.ToString(out.ChecksumCRC32C), sum.crc)
		}
		if tries > 1 && (apiCode(err) == "NoSuchUpload" || createOnly && isStatus(err, 412)) {
			// An earlier try completed it, its answer lost.
			done = true
			return k.checkOwn(ctx, key, sum, err)
		}
		if err := retryWait(ctx, err, tries, k.s.o.attempts(), &bo); err != nil {
			return err
		}
	}
}

func sectionCRC(f *os.File, off, n int64) (uint32, error) {
	h := crc32New()
	_, err := io.Copy(h, io.NewSectionReader(f, off, n))
	return h.Sum32(), err
}

// head returns the object's size and full-object CRC32C (ok false where
// S3 keeps none for it).
func (k *S3Sink) head(ctx context.Context, key string) (size int64, crc uint32, ok bool, err error) {
	err = k.s.retried(ctx, func(ctx context.Context) error {
		out, err := k.s.c.HeadObject(ctx, &s3.HeadObjectInput{
			Bucket: aws.String(k.s.name), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled,
		})
		if err == nil {
			size = aws.ToInt64(out.ContentLength)
			crc, ok = parseCRC(aws.ToString(out.ChecksumCRC32C))
		}
		return err
	})
	return size, crc, ok, err
}

// checkOwn returns nil when the object key holds sum, and conflict
// otherwise.
func (k *S3Sink) checkOwn(ctx context.Context, key string, sum fileSum, conflict error) error {
	size, crc, ok, err := k.head(ctx, key)
	if err != nil {
		return err
	}
	if ok && crc == sum.crc && size == sum.size {
		return nil
	}
	return conflict
}

// PublishNew uploads Dir()/tmp as name on condition that no object of
// that name exists (If-None-Match: *, S3's conditional write): S3 applies
// it atomically, so of tasks racing to create name exactly one succeeds.
// A try sent again after its answer was lost finds its own object (the
// same CRC32C and size) and reports success.
func (k *S3Sink) PublishNew(ctx context.Context, tmp, name string) error {
	local := filepath.Join(k.dir, tmp)
	defer os.Remove(local)
	if err := ctx.Err(); err != nil {
		return err
	}
	err := k.upload(local, name, nil, true)
	if isStatus(err, 412) {
		return fmt.Errorf("create %s: %w", k.objectURI(name), fs.ErrExist)
	}
	return err
}

// ReadFile reads name at the destination; a missing file matches
// fs.ErrNotExist.
func (k *S3Sink) ReadFile(ctx context.Context, name string) ([]byte, error) {
	r, err := k.s.openObject(ctx, k.s.prefix+name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// List names the files directly under the destination prefix, sorted.
func (k *S3Sink) List(ctx context.Context) ([]string, error) {
	var names []string
	err := k.s.list(ctx, k.s.prefix, "/", func(o types.Object) {
		if n := strings.TrimPrefix(aws.ToString(o.Key), k.s.prefix); n != "" {
			names = append(names, n)
		}
	})
	sort.Strings(names)
	return names, err
}

// Files lists the files directly under the destination prefix, sorted by
// name, with the size and CRC32C S3 keeps for each: enough to check a
// finished shard without downloading it. S3 lists no checksum values, so
// each file costs one HEAD request (a few dozen at once); a file whose
// CRC32C S3 does not keep as a full-object one gets 0, which no shard
// record matches, so --resume writes it again.
func (k *S3Sink) Files(ctx context.Context) ([]FileInfo, error) {
	names, err := k.List(ctx)
	if err != nil {
		return nil, err
	}
	files := make([]FileInfo, len(names))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i, n := range names {
		g.Go(func() error {
			size, crc, _, err := k.head(gctx, k.s.prefix+n)
			if errors.Is(err, fs.ErrNotExist) || isStatus(err, 404) {
				size, crc, err = -1, 0, nil // deleted since the listing
			}
			files[i] = FileInfo{Name: n, Size: size, CRC32C: crc}
			return s3Err(k.objectURI(n), k.s.name, true, err)
		})
	}
	return files, g.Wait()
}

// Remove deletes name at the destination. S3 answers a delete of a
// missing key with success, so a missing file is no error.
func (k *S3Sink) Remove(ctx context.Context, name string) error {
	err := k.s.retried(ctx, func(ctx context.Context) error {
		_, err := k.s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(k.s.name), Key: aws.String(k.s.prefix + name)})
		return err
	})
	return s3Err(k.objectURI(name), k.s.name, true, err)
}
