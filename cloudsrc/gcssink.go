package cloudsrc

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/googleapi"
)

// GCSSink stages files in a local folder and uploads each one to
// gs://bucket/prefix when it is published. Uploads run in the background,
// a few at a time, each checked end to end with CRC32C; the local copy is
// removed once its upload is confirmed.
type GCSSink struct {
	g   *GCS
	ctx context.Context // uploads run under the context OpenSink was given
	uploads
}

func (o *Opener) openGCSSink(ctx context.Context, uri string) (*GCSSink, error) {
	b, prefix, err := splitGS(strings.TrimSuffix(uri, "/"))
	if err != nil {
		return nil, err
	}
	if hasMeta(prefix) {
		return nil, fmt.Errorf("destination %s: a destination cannot be a pattern", uri)
	}
	g, err := o.gcs(ctx, b, prefix)
	if err != nil {
		return nil, err
	}
	g.dest = true
	dir, err := o.stagingDir(uri, "gs://"+b+"/"+prefix)
	if err != nil {
		return nil, err
	}
	return &GCSSink{g: g, ctx: ctx, uploads: newUploads(dir, o.uploads())}, nil
}

// stagingDir makes this run's staging folder for the destination at canon
// (its scheme://bucket/prefix), after removing the stale folders of runs
// that died.
func (o *Opener) stagingDir(uri, canon string) (string, error) {
	if err := os.MkdirAll(o.staging(), 0o755); err != nil {
		return "", fmt.Errorf("staging folder for %s: %w (set PREP_STAGING to a writable folder)", uri, err)
	}
	stage := stagingPrefix(canon)
	removeStaleStaging(o.staging(), stage)
	dir, err := os.MkdirTemp(o.staging(), stage+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", fmt.Errorf("staging folder for %s: %w (set PREP_STAGING to a writable folder)", uri, err)
	}
	return dir, nil
}

// stagingPrefix begins the name of every staging folder of a run into
// dest from this host; the run's pid and a random suffix follow it. The
// host is in the hash because PREP_STAGING may be shared between machines,
// and a pid says something only on its own host.
func stagingPrefix(dest string) string {
	host, _ := os.Hostname()
	h := sha256.Sum256([]byte(host + "\n" + dest))
	return fmt.Sprintf("prep-staging-%x-", h[:6])
}

// removeStaleStaging removes the staging folders under staging that runs
// into the same destination from this host left when they were killed:
// those whose pid is gone. Other tasks of a distributed run on this host
// are alive, and other destinations' folders are not named with prefix,
// so neither is touched. It is best effort: a folder that cannot be
// removed costs disk space only, and the run goes on.
func removeStaleStaging(staging, prefix string) {
	entries, err := os.ReadDir(staging)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		if pid, err := strconv.Atoi(pidText); err == nil && pid != os.Getpid() && ProcessGone(pid) {
			os.RemoveAll(filepath.Join(staging, e.Name()))
		}
	}
}

// ProcessGone reports whether no process pid runs on this host: a killed
// run's staging folder, or its lock, is stale. Where that cannot be told,
// the process counts as alive.
func ProcessGone(pid int) bool {
	if pid <= 0 {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	return errors.Is(p.Signal(syscall.Signal(0)), os.ErrProcessDone)
}

// Dir is the local staging folder.
func (s *GCSSink) Dir() string { return s.dir }

// URI is gs://bucket/prefix.
func (s *GCSSink) URI() string {
	return "gs://" + s.g.name + "/" + strings.TrimSuffix(s.g.prefix, "/")
}

func (s *GCSSink) objectURI(name string) string { return "gs://" + s.g.name + "/" + s.g.prefix + name }

// Publish starts uploading Dir()/name and returns; it blocks only while
// the maximum number of uploads is running. The file is moved aside first,
// so the caller may write name again at once; uploads of the same name
// finish in the order they were published.
func (s *GCSSink) Publish(ctx context.Context, name string) error {
	return s.publish(ctx, name, nil)
}

// PublishSummed is Publish for a file whose CRC32C and size are known.
func (s *GCSSink) PublishSummed(ctx context.Context, name string, crc uint32, size int64) error {
	return s.publish(ctx, name, &fileSum{crc, size})
}

// fileSum is a file's CRC32C and size.
type fileSum struct {
	crc  uint32
	size int64
}

func (s *GCSSink) publish(ctx context.Context, name string, sum *fileSum) error {
	return s.start(ctx, name, s.objectURI(name), func(staged string) error { return s.upload(staged, name, sum, nil) })
}

// upload copies the local file to the object name. Each request of an
// upload (the one request of a small file; the request that opens a
// resumable upload and each chunk of it) is tried up to Opener.Attempts
// times by the storage library, in place, while it fails with 429, 5xx or
// a connection error; the count starts again once a request succeeds.
// This loop starts the whole upload over, also up to Attempts times, only
// for what the library cannot retry: bytes that arrived changed, an
// attempt that stalled (no answer and no bytes accepted for Opener.Timeout),
// or a connection that failed while the reply was read (the library reads
// it after its retries are over; the object may be stored already, and
// sending the same bytes under the same name again is safe).
// cond, when set, makes each attempt conditional (a precondition that
// fails answers 412, which is not retried).
func (s *GCSSink) upload(local, name string, sum *fileSum, cond *storage.Conditions) error {
	uri := s.objectURI(name)
	if sum == nil {
		crc, size, err := fileCRC32C(local)
		if err != nil {
			return fmt.Errorf("upload %s: %w", uri, err)
		}
		sum = &fileSum{crc, size}
	}
	bo := s.g.o.backoff()
	for tries := 1; ; tries++ {
		err := s.uploadOnce(local, name, *sum, cond, tries > 1)
		if err == nil {
			return nil
		}
		if !retryUpload(err) {
			return gcsErr(uri, s.g.name, true, err)
		}
		if err := retryWait(s.ctx, err, tries, s.g.o.attempts(), &bo); err != nil {
			if errors.Is(err, errCorrupt) {
				// Leave no damaged object under the final name.
				s.g.bucket.Object(s.g.prefix + name).Delete(context.WithoutCancel(s.ctx))
			}
			return gcsErr(uri, s.g.name, true, err)
		}
	}
}

// retryUpload reports whether an upload attempt that failed with err is
// worth starting over: a retryable error the library did not already
// retry Attempts times.
func retryUpload(err error) bool {
	var xe *exhaustedError
	if errors.As(err, &xe) {
		return false
	}
	return transient(err)
}

// uploadRetries is the storage library's retry decision for the requests
// of one upload attempt. The library calls it after every answer (nil
// error for a success) and every connection error. It bounds the library's
// retries of one request to attempts, which the library itself does not
// for uploads (it retries a one-request upload until its context ends),
// and makes the backoff pause itself, with the watchdog held off for just
// that pause: a server that answers errors has not stalled, and the next
// request gets Timeout, no more. (The library's own pause is near zero.)
type uploadRetries struct {
	dog      *watchdog
	bo       gax.Backoff
	attempts int

	mu        sync.Mutex
	failed    int  // failed tries of the current request
	retried   bool // a request was sent again: an earlier one may have landed
	exhausted bool // the library gave up on a request because of attempts
}

func (u *uploadRetries) shouldRetry(err error) bool {
	pause, retry := u.decide(err)
	if !retry {
		u.dog.kick(0)
		return false
	}
	u.dog.kick(pause)
	t := time.NewTimer(pause)
	defer t.Stop()
	select {
	case <-t.C:
	case <-u.dog.ctx.Done():
		return false
	}
	u.dog.kick(0)
	return true
}

// decide counts err against the current request's attempts and returns
// the pause before the next try, if there is one.
func (u *uploadRetries) decide(err error) (time.Duration, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if err == nil {
		u.failed = 0 // a request succeeded: the next one has its own tries
		u.bo = gax.Backoff{Initial: u.bo.Initial, Max: u.bo.Max, Multiplier: u.bo.Multiplier}
		return 0, false
	}
	if u.dog.ctx.Err() != nil || !storage.ShouldRetry(err) {
		return 0, false
	}
	u.failed++
	if u.failed >= u.attempts {
		u.exhausted = true
		return 0, false
	}
	u.retried = true
	return u.bo.Pause(), true
}

// sentAgain reports whether a request of this attempt was sent twice.
func (u *uploadRetries) sentAgain() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.retried
}

// result wraps the error that ended an upload attempt as exhausted when
// the retry budget of one request is what ended it.
func (u *uploadRetries) result(err error) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if err != nil && u.exhausted && !errors.Is(err, errStalled) && !errors.Is(err, errCorrupt) {
		return &exhaustedError{tries: u.failed, err: err}
	}
	return err
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errCorrupt marks an upload whose bytes arrived changed; the local file
// is intact, so sending it again is worth it.
var errCorrupt = errors.New("upload corrupted in transit (CRC32C mismatch)")

func fileCRC32C(name string) (uint32, int64, error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, f)
	return h.Sum32(), n, err
}

// uploadOnce makes one upload attempt. The server checks the CRC32C sent
// with the object and refuses a mismatch; the stored object's CRC32C is
// compared again after Close.
//
// A create-only attempt (cond) that finds the name taken (412) after an
// earlier request of this upload may have landed (retried) checks whether
// the object there is its own: the same CRC32C and size mean success.
func (s *GCSSink) uploadOnce(local, name string, sum fileSum, cond *storage.Conditions, retried bool) error {
	crc, size := sum.crc, sum.size
	f, err := os.Open(local)
	if err != nil {
		return err
	}
	defer f.Close()
	bo := s.g.o.backoff()
	dog := newWatchdog(s.ctx, s.g.o.timeout())
	defer dog.stop()
	retries := &uploadRetries{dog: dog, bo: bo, attempts: s.g.o.attempts()}
	obj := s.g.uploads.Object(s.g.prefix + name).Retryer(storage.WithErrorFunc(retries.shouldRetry))
	if cond != nil {
		obj = obj.If(*cond)
	}
	w := obj.NewWriter(dog.ctx)
	w.CRC32C, w.SendCRC32C = crc, true
	w.ContentType = "application/octet-stream"
	if path.Ext(name) == ".json" {
		w.ContentType = "application/json"
	}
	// One request for a small file; resumable chunks for a shard.
	chunk := s.g.o.chunkSize()
	w.ChunkSize = chunk
	if size < int64(chunk) {
		w.ChunkSize = int(size) + 1
	}
	// A chunk accepted by the server is progress.
	w.ProgressFunc = func(int64) { dog.kick(0) }
	// Stalls are the watchdog's alone (ChunkTransferTimeout stays 0), and
	// the tries of a chunk are counted by retries. The chunk deadline is
	// only a backstop: Attempts tries, each cut off by the watchdog, with
	// the longest pause between them.
	w.ChunkRetryDeadline = time.Duration(retries.attempts) * (s.g.o.timeout() + bo.Max)

	buf := make([]byte, 1<<20)
	for {
		n, rerr := f.Read(buf)
		if n > 0 {
			// A Write blocks while a full chunk is being sent.
			dog.arm()
			_, werr := w.Write(buf[:n])
			if dog.disarm() {
				werr = errStalled
			}
			if werr != nil {
				w.Close()
				return retries.result(werr)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			w.Close()
			return fmt.Errorf("read %s: %w", local, rerr)
		}
	}
	dog.arm()
	err = w.Close()
	if dog.disarm() {
		return errStalled
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) && ge.Code == http.StatusBadRequest && strings.Contains(strings.ToLower(ge.Message), "crc32c") {
		// Cloud Storage refused bytes that differ from the checksum.
		return fmt.Errorf("%w: %s", errCorrupt, firstLine(ge.Message))
	}
	if cond != nil && isPreconditionFailed(err) && (retried || retries.sentAgain()) {
		return s.checkOwn(name, sum, err)
	}
	if err != nil {
		return retries.result(err)
	}
	if got := w.Attrs().CRC32C; got != crc {
		return fmt.Errorf("%w: stored CRC32C %08x, sent %08x", errCorrupt, got, crc)
	}
	return nil
}

func isPreconditionFailed(err error) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge) && ge.Code == http.StatusPreconditionFailed
}

// checkOwn returns nil when the object name holds sum, and conflict (the
// 412 that made it look) otherwise.
func (s *GCSSink) checkOwn(name string, sum fileSum, conflict error) error {
	bo := s.g.o.backoff()
	for tries := 1; ; tries++ {
		a, err := s.g.bucket.Object(s.g.prefix + name).Attrs(s.ctx)
		if err == nil {
			if a.CRC32C == sum.crc && a.Size == sum.size {
				return nil
			}
			return conflict
		}
		if err := retryWait(s.ctx, err, tries, s.g.o.attempts(), &bo); err != nil {
			return err
		}
	}
}

// PublishNew uploads Dir()/tmp as name on condition that no object of
// that name exists (ifGenerationMatch=0): Cloud Storage applies the
// condition atomically, so of tasks racing to create name exactly one
// succeeds. An attempt retried after its answer was lost finds its own
// object (the same CRC32C and size) and reports success.
func (s *GCSSink) PublishNew(ctx context.Context, tmp, name string) error {
	local := filepath.Join(s.dir, tmp)
	defer os.Remove(local)
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.upload(local, name, nil, &storage.Conditions{DoesNotExist: true})
	if isPreconditionFailed(err) {
		return fmt.Errorf("create %s: %w", s.objectURI(name), fs.ErrExist)
	}
	return err
}

// ReadFile reads name at the destination; a missing file matches
// fs.ErrNotExist.
func (s *GCSSink) ReadFile(ctx context.Context, name string) ([]byte, error) {
	r, err := s.g.openObject(ctx, s.g.prefix+name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// List names the files directly under the destination prefix, sorted.
func (s *GCSSink) List(ctx context.Context) ([]string, error) {
	files, err := s.Files(ctx)
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.Name
	}
	return names, err
}

// Files lists the files directly under the destination prefix, sorted by
// name, with the size and CRC32C Cloud Storage keeps for each: enough to
// check a finished shard without downloading it.
func (s *GCSSink) Files(ctx context.Context) ([]FileInfo, error) {
	var files []FileInfo
	err := s.g.list(ctx, s.g.prefix, "/", func(a *storage.ObjectAttrs) {
		if n := strings.TrimPrefix(a.Name, s.g.prefix); a.Name != "" && n != "" {
			files = append(files, FileInfo{Name: n, Size: a.Size, CRC32C: a.CRC32C})
		}
	})
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	return files, err
}

// Remove deletes name at the destination; a missing file matches
// fs.ErrNotExist.
func (s *GCSSink) Remove(ctx context.Context, name string) error {
	bo := s.g.o.backoff()
	for tries := 1; ; tries++ {
		err := s.g.bucket.Object(s.g.prefix + name).Delete(ctx)
		if err == nil {
			return nil
		}
		if err := retryWait(ctx, err, tries, s.g.o.attempts(), &bo); err != nil {
			return gcsErr(s.objectURI(name), s.g.name, true, err)
		}
	}
}
