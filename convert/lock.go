package convert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prep-dev/prep/cloudsrc"
)

// lockHolder is what a destination's lock file says about the run that
// holds it, so that a refused run can name it.
type lockHolder struct {
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Started string `json:"started"`
}

// LockName is the lock file of a run (or of one task of a distributed
// run: the tasks write beside each other, but no two runs of one task may).
func LockName(taskIndex, taskCount int) string {
	if taskCount > 1 {
		return fmt.Sprintf(".prep-lock-task-%05d", taskIndex)
	}
	return ".prep-lock"
}

// IsLockName reports whether name is a lock file of LockName's.
func IsLockName(name string) bool {
	if name == ".prep-lock" {
		return true
	}
	rest, ok := strings.CutPrefix(name, ".prep-lock-task-")
	return ok && len(rest) >= 5 && strings.Trim(rest, "0123456789") == ""
}

// lock takes the destination for this run: it creates the lock file,
// create-only (a GCS write with ifGenerationMatch=0, locally a hard link),
// so of two runs started at once exactly one gets it, before either
// touches what is there. Another run's lock is taken over only when it is
// stale: written on this host by a process that is gone (a killed run).
// unlock removes it.
func lock(ctx context.Context, s cloudsrc.Sink, name string) (unlock func(), err error) {
	c, ok := s.(cloudsrc.Creator)
	if !ok {
		return func() {}, nil // a sink that cannot create atomically cannot lock
	}
	host, _ := os.Hostname()
	me := lockHolder{Host: host, PID: os.Getpid(), Started: time.Now().UTC().Format(time.RFC3339)}
	for try := 0; ; try++ {
		err := create(ctx, s, c, name, me)
		if err == nil {
			return func() { s.Remove(context.WithoutCancel(ctx), name) }, nil
		}
		if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
			// The first file a run writes: say so in words, not libhdf5's.
			return nil, fmt.Errorf("destination %s is not writable (%v): choose another destination, or fix its permissions", s.URI(), err)
		}
		var ce *cloudsrc.Error
		if errors.As(err, &ce) {
			return nil, err // names the object and the fix
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("lock destination %s: %w", s.URI(), err)
		}
		data, rerr := s.ReadFile(ctx, name)
		var h lockHolder
		if rerr != nil || json.Unmarshal(data, &h) != nil {
			if try < 3 && errors.Is(rerr, fs.ErrNotExist) {
				continue // released between the create and the read
			}
			return nil, fmt.Errorf("destination %s is locked by %s, which cannot be read (%v): if no prep convert is writing there, delete it and rerun", s.URI(), name, rerr)
		}
		if try == 0 && h.Host == host && (h.PID <= 0 || cloudsrc.ProcessGone(h.PID)) {
			// A run killed on this host: its lock is stale.
			if err := s.Remove(ctx, name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("remove the stale lock %s/%s: %w", s.URI(), name, err)
			}
			continue
		}
		return nil, fmt.Errorf("destination %s is in use by another prep convert (pid %d on %s, since %s): wait for it to finish; if it is no longer running, delete %s/%s and rerun",
			s.URI(), h.PID, h.Host, h.Started, s.URI(), name)
	}
}

// create writes h as name, create-only.
func create(ctx context.Context, s cloudsrc.Sink, c cloudsrc.Creator, name string, h lockHolder) error {
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(s.Dir(), name+".*.new")
	if err != nil {
		return err
	}
	_, err = f.Write(append(data, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	return c.PublishNew(ctx, filepath.Base(f.Name()), name)
}

// isLockFile reports whether name is a lock, or the temporary file a lock
// is created from (left behind only by a run killed while locking).
func isLockFile(name string) bool {
	return IsLockName(name) || strings.HasPrefix(name, ".prep-lock") && strings.HasSuffix(name, ".new")
}
