package cloudsrc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// uploads runs a remote sink's uploads in the background: at most
// cap(sem) at once, those of one name in the order they were published,
// the first error kept for Wait. A published file is first renamed to a
// staging name, so that its writer may write the name again while the
// upload runs. GCSSink and S3Sink embed it; each gives the upload itself.
type uploads struct {
	dir string // the local staging folder: Sink.Dir
	sem chan struct{}
	wg  sync.WaitGroup

	mu   sync.Mutex
	err  error                    // the first upload error
	last map[string]chan struct{} // per name: closed when its latest upload ends
	seq  int
}

func newUploads(dir string, n int) uploads {
	return uploads{dir: dir, sem: make(chan struct{}, n), last: map[string]chan struct{}{}}
}

// start stages Dir()/name and uploads it with up, in a goroutine Wait
// waits for; uri names the object in messages.
func (u *uploads) start(ctx context.Context, name, uri string, up func(staged string) error) error {
	if err := u.firstErr(); err != nil {
		return err
	}
	select {
	case u.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	u.mu.Lock()
	u.seq++
	staged := filepath.Join(u.dir, fmt.Sprintf(".upload-%d-%s", u.seq, filepath.Base(name)))
	if err := os.Rename(filepath.Join(u.dir, name), staged); err != nil {
		u.mu.Unlock()
		<-u.sem
		return fmt.Errorf("publish %s: %w", uri, err)
	}
	prev, done := u.last[name], make(chan struct{})
	u.last[name] = done
	u.mu.Unlock()

	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		defer func() { <-u.sem }()
		defer close(done)
		if prev != nil {
			<-prev
		}
		err := up(staged)
		if err == nil {
			err = os.Remove(staged)
		}
		if err != nil {
			u.mu.Lock()
			if u.err == nil {
				u.err = err
			}
			u.mu.Unlock()
		}
	}()
	return nil
}

func (u *uploads) firstErr() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.err
}

// Wait blocks until every upload published so far has ended and returns
// the first upload error.
func (u *uploads) Wait() error {
	u.wg.Wait()
	return u.firstErr()
}

// Close waits for the uploads and removes the staging folder.
func (u *uploads) Close() error {
	err := u.Wait()
	if rerr := os.RemoveAll(u.dir); err == nil {
		err = rerr
	}
	return err
}
