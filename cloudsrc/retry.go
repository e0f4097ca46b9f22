package cloudsrc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/googleapi"
)

// retryWait returns nil after a backoff pause when err is worth another
// attempt, and err (naming the attempts) otherwise.
func retryWait(ctx context.Context, err error, tries, attempts int, bo *gax.Backoff) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if !transient(err) {
		return err
	}
	if tries >= attempts {
		return &exhaustedError{tries: tries, err: err}
	}
	pause := bo.Pause()
	if d := retryAfter(err); d > pause {
		pause = d
	}
	t := time.NewTimer(pause)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// maxRetryAfter caps the wait a server may ask for, so that a bad header
// cannot hold a run for long.
const maxRetryAfter = 30 * time.Second

// retryAfter is the wait a 429 or 503 answer asks for in its Retry-After
// header (seconds or an HTTP date), capped at maxRetryAfter; 0 if none.
func retryAfter(err error) time.Duration {
	v, ok := s3RetryAfter(err)
	var ge *googleapi.Error
	if errors.As(err, &ge) && (ge.Code == http.StatusTooManyRequests || ge.Code == http.StatusServiceUnavailable) {
		v, ok = ge.Header.Get("Retry-After"), true
	}
	if !ok {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.Atoi(v); err == nil {
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = time.Until(t)
	}
	return max(0, min(d, maxRetryAfter))
}

// exhaustedError is a retryable failure that lasted through every attempt.
type exhaustedError struct {
	tries int
	err   error
}

func (e *exhaustedError) Error() string {
	return fmt.Sprintf("%v (gave up after %d attempts)", e.err, e.tries)
}

func (e *exhaustedError) Unwrap() error { return e.err }
