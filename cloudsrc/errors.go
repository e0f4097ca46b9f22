package cloudsrc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
)

// transient reports whether a request that failed with err is worth
// another attempt: a stall, bytes that arrived changed, or what the storage
// library (Cloud Storage's or S3's) counts as transient (429, 5xx, a
// connection error).
func transient(err error) bool {
	return errors.Is(err, errStalled) || errors.Is(err, errCorrupt) || storage.ShouldRetry(err) || s3Retryable(err)
}

// Error is a storage failure in one line: the address, what went wrong and
// the fix. Err is the library's error; a missing object or bucket also
// matches fs.ErrNotExist.
type Error struct {
	URI  string
	Code int // HTTP status, 0 if none
	Msg  string
	Err  error
}

func (e *Error) Error() string { return e.URI + ": " + e.Msg }

func (e *Error) Unwrap() []error {
	if e.Code == http.StatusNotFound {
		return []error{e.Err, fs.ErrNotExist}
	}
	return []error{e.Err}
}

// Fatal reports whether the failure must stop a run rather than skip one
// input. Only a missing object is not: an input list can be older than
// the bucket, and the run goes on without that one input. A refused
// permission, missing credentials, a missing bucket, a failure that
// lasted through every retry and an object's deadline all stop it, since
// going on would leave out inputs the user still has.
func (e *Error) Fatal() bool {
	return !errors.Is(e.Err, storage.ErrObjectNotExist) && !errors.Is(e.Err, errNoSuchKey)
}

const loginHint = `run "gcloud auth application-default login", or set GOOGLE_APPLICATION_CREDENTIALS to a service account key file`

// commonErr words the errors every store shares: nil, an Error already
// or a cancellation (as they are), the object's deadline, retries given
// up (the last error worded by again, the store's own function), a stall.
// ok is false for the rest, which the store words itself.
func commonErr(uri string, err error, store string, again func(error) error) (_ error, ok bool) {
	var e *Error
	if err == nil || errors.As(err, &e) || errors.Is(err, context.Canceled) {
		return err, true
	}
	var de *deadlineError
	if errors.As(err, &de) {
		return &Error{URI: uri, Err: err, Msg: de.Error() + ": raise --object-timeout for large objects or a slow link, then rerun with --resume"}, true
	}
	var xe *exhaustedError
	if errors.As(err, &xe) {
		e, ok := again(xe.err).(*Error)
		if !ok { // a cancellation: nothing to advise
			return err, true
		}
		e.Err = err
		why, fix := store+" kept failing", "raise --io-attempts"
		if errors.Is(xe.err, errStalled) {
			// Every try stalled: a slow link wants a longer --io-timeout.
			why, fix = "every try stalled", "raise --io-timeout on a slow link"
		}
		e.Msg += fmt.Sprintf(" (gave up after %d attempts: %s; rerun with --resume later, or %s)", xe.tries, why, fix)
		return e, true
	}
	if errors.Is(err, errStalled) {
		return &Error{URI: uri, Err: err, Msg: "no progress within the timeout (--io-timeout)"}, true
	}
	return nil, false
}

// gcsErr turns a library error into an Error that names the fix. write
// selects the role to ask for on 403: the destination's.
func gcsErr(uri, bucket string, write bool, err error) error {
	again := func(err error) error { return gcsErr(uri, bucket, write, err) }
	if w, ok := commonErr(uri, err, "Cloud Storage", again); ok {
		return w
	}
	if errors.Is(err, storage.ErrBucketNotExist) {
		return &Error{URI: uri, Code: 404, Err: err,
			Msg: fmt.Sprintf("bucket %q does not exist (check the name in gs://%s/...)", bucket, bucket)}
	}
	if errors.Is(err, storage.ErrObjectNotExist) {
		return &Error{URI: uri, Code: 404, Err: err, Msg: "object does not exist"}
	}
	if strings.Contains(err.Error(), "could not find default credentials") {
		return &Error{URI: uri, Err: err, Msg: "no Google Cloud credentials found: " + loginHint}
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		switch ge.Code {
		case http.StatusUnauthorized:
			return &Error{URI: uri, Code: ge.Code, Err: err, Msg: "not authenticated (401): " + loginHint}
		case http.StatusForbidden:
			msg := fmt.Sprintf("permission denied (403): grant the service account roles/storage.objectViewer on bucket %s, or %s", bucket, loginHint)
			if write {
				msg = fmt.Sprintf("permission denied (403): the destination needs roles/storage.objectAdmin (prep lists, writes and deletes there): grant it to the service account on bucket %s, or %s", bucket, loginHint)
			}
			return &Error{URI: uri, Code: ge.Code, Err: err, Msg: msg}
		case http.StatusNotFound:
			// Listing and uploading answer 404 only for a missing bucket.
			return &Error{URI: uri, Code: ge.Code, Err: err,
				Msg: fmt.Sprintf("bucket %q does not exist (check the name in gs://%s/...)", bucket, bucket)}
		}
		msg := firstLine(ge.Message)
		if msg == "" {
			msg = http.StatusText(ge.Code)
		}
		return &Error{URI: uri, Code: ge.Code, Err: err, Msg: fmt.Sprintf("%d %s", ge.Code, msg)}
	}
	return &Error{URI: uri, Err: err, Msg: firstLine(cause(err).Error())}
}

// cause drops the request line (method and a URL hundreds of characters
// long) of a transport error: the Error names the object already.
func cause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		return ue.Err
	}
	return err
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
