package cloudsrc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"time"

	"github.com/googleapis/gax-go/v2"
)

// objectReader reads one remote object, reopening it at the offset
// reached when a read fails with a retryable error or makes no progress
// for the Opener's Timeout. GCS and S3 differ only in the three funcs: how
// a read starts at an offset (pinned to the version first read), which
// failed reads resume at once, and how an error is worded.
type objectReader struct {
	ctx    context.Context // ends at the object's deadline, or on Close
	cancel context.CancelFunc
	o      *Opener
	uri    string
	name   string
	bo     gax.Backoff
	body   io.ReadCloser
	dog    *watchdog
	off    int64
	size   int64
	opened bool
	tries  int // failed attempts since the last progress

	// open starts a read at off: the body and the object's size.
	open func(ctx context.Context, off int64) (io.ReadCloser, int64, error)
	// resumable reports whether a read that failed after some bytes is
	// reopened at once rather than waited for as a failed attempt.
	resumable func(error) bool
	// wrap turns an error that ends the read into an Error.
	wrap func(error) error
	// exact: a body that ends before the size is a cut connection.
	exact bool
}

// start gives r its deadline (the Opener's ObjectTimeout, from ctx) and
// makes the first request, so that a missing object or a refused
// permission shows up at once. On error the caller calls r.cancel.
func (r *objectReader) start(ctx context.Context, o *Opener) error {
	d := o.objectTimeout()
	r.ctx, r.cancel = context.WithTimeoutCause(ctx, d, &deadlineError{d})
	r.o, r.bo = o, o.backoff()
	return r.reopen()
}

// reopen starts a read at r.off, trying again while errors are retryable.
func (r *objectReader) reopen() error {
	for {
		r.tries++
		dog := newWatchdog(r.ctx, r.o.timeout())
		dog.arm()
		body, size, err := r.open(dog.ctx, r.off)
		stalled := dog.disarm()
		if err == nil {
			r.body, r.dog = body, dog
			if !r.opened {
				r.size, r.opened = size, true
			}
			return nil
		}
		dog.stop()
		if stalled {
			err = errStalled
		}
		if err := retryWait(r.ctx, err, r.tries, r.o.attempts(), &r.bo); err != nil {
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
	return r.wrap(err)
}

func (r *objectReader) Read(p []byte) (int, error) {
	for {
		if r.body == nil {
			if err := r.reopen(); err != nil {
				return 0, err
			}
		}
		r.dog.arm()
		n, err := r.body.Read(p)
		stalled := r.dog.disarm()
		r.off += int64(n)
		if n > 0 {
			r.tries = 0
		}
		if err == io.EOF && r.exact && r.off < r.size {
			err = io.ErrUnexpectedEOF // the connection ended early
		}
		if err == nil || err == io.EOF {
			return n, err
		}
		r.drop()
		if stalled {
			err = errStalled
		}
		if n > 0 && r.resumable(err) {
			return n, nil // the next Read reopens
		}
		if err := retryWait(r.ctx, err, r.tries+1, r.o.attempts(), &r.bo); err != nil {
			return n, r.fail(err)
		}
	}
}

func (r *objectReader) drop() {
	if r.body != nil {
		r.body.Close()
		r.dog.stop()
		r.body, r.dog = nil, nil
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

// deadlineError is the cause of an object read that ran out of its
// ObjectTimeout.
type deadlineError struct{ d time.Duration }

func (e *deadlineError) Error() string {
	return fmt.Sprintf("not read within %s (--object-timeout), retries included", e.d)
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
