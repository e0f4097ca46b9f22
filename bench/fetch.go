package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/manifest"
)

// OpenFunc opens a file by URI (a gs:// object or a local path).
type OpenFunc func(ctx context.Context, uri string) (io.ReadCloser, error)

// Fetched reports a download of shards to local disk.
type Fetched struct {
	Source string `json:"source"`
	Files  int    `json:"files"` // shards, plus the manifest
	// Parallel is how many shards were downloaded at once.
	Parallel int     `json:"parallel"`
	Bytes    int64   `json:"bytes"`
	Seconds  float64 `json:"seconds"`
	MBps     float64 `json:"mb_per_s"`
	// Verified is true when every shard's sha256 matched the manifest.
	Verified bool `json:"sha256_verified"`
	// Target is the local path to benchmark: dir, or the one shard in it.
	Target string `json:"-"`
}

// FetchOptions tune Fetch.
type FetchOptions struct {
	Parallel int         // files downloaded at once; default 4
	Progress func(int64) // called with each chunk of bytes written; may be nil
	// Formats tells a shard's URI from a folder's by its extension;
	// required.
	Formats *formats.Registry
}

// Fetch copies shards from remote storage into dir so they can be read
// from local disk, the way a training job stages them: uri is a folder
// holding manifest.json (every shard it lists is copied) or one shard file
// (copied with its folder's manifest when there is one). Each shard's
// sha256 is checked against the manifest as it is written, so a damaged
// object is named rather than benchmarked.
func Fetch(ctx context.Context, open OpenFunc, uri, dir string, opt FetchOptions) (*Fetched, error) {
	uri = strings.TrimSuffix(uri, "/")
	folder, single := uri, ""
	if opt.Formats.ForFile(uri) != nil {
		folder, single = parentURI(uri), path.Base(uri)
	}
	start := time.Now()
	res := &Fetched{Source: uri, Target: dir}
	var written atomic.Int64
	progress := func(n int64) {
		written.Add(n)
		if opt.Progress != nil {
			opt.Progress(n)
		}
	}

	mURI := folder + "/" + manifest.FileName
	data, err := readAll(ctx, open, mURI)
	var m *manifest.Manifest
	switch {
	case err == nil:
		if m, err = manifest.Parse(data); err != nil {
			return nil, fmt.Errorf("%s: %w", mURI, err)
		}
		if err := manifest.WriteFileAtomic(filepath.Join(dir, manifest.FileName), data); err != nil {
			return nil, stagingErr(dir, err)
		}
		res.Files++
		progress(int64(len(data)))
	case single == "" || !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("%w (bench-read of a folder needs the manifest.json that prep convert writes last; after a distributed run, run prep merge-manifest)", err)
	}

	type file struct {
		name, sha string
		size      int64
	}
	var files []file
	if single != "" {
		f := file{name: single, size: -1}
		if m != nil {
			for _, s := range m.Shards {
				if s.File == single {
					f = file{name: s.File, sha: s.SHA256, size: s.Bytes}
				}
			}
		}
		files = append(files, f)
		res.Target = filepath.Join(dir, single)
	} else {
		for _, s := range m.Shards {
			if s.File != "" {
				files = append(files, file{name: s.File, sha: s.SHA256, size: s.Bytes})
			}
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("%s lists no shards with samples", mURI)
		}
	}

	res.Verified = true
	parallel := opt.Parallel
	if parallel < 1 {
		parallel = 4
	}
	res.Parallel = min(parallel, len(files))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for _, f := range files {
		if f.sha == "" {
			res.Verified = false
		}
		g.Go(func() error {
			src := folder + "/" + f.name
			sum, n, err := download(gctx, open, src, filepath.Join(dir, f.name), progress)
			switch {
			case err != nil:
				return err
			case f.size >= 0 && n != f.size:
				return fmt.Errorf("%s is %d bytes, the manifest says %d: the object changed since it was written; re-run prep convert --resume", src, n, f.size)
			case f.sha != "" && sum != f.sha:
				return fmt.Errorf("%s: sha256 %s differs from the manifest's %s: the object is damaged or was replaced; re-run prep convert --resume", src, sum, f.sha)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	res.Files += len(files)
	res.Bytes = written.Load()
	res.Seconds = time.Since(start).Seconds()
	if res.Seconds > 0 {
		res.MBps = float64(res.Bytes) / 1e6 / res.Seconds
	}
	return res, nil
}

// download copies src to dst (through a temporary name), returning the
// sha256 and size of what it wrote.
func download(ctx context.Context, open OpenFunc, src, dst string, progress func(int64)) (string, int64, error) {
	r, err := open(ctx, src)
	if err != nil {
		return "", 0, err
	}
	defer r.Close()
	tmp := dst + ".tmp"
	w, err := os.Create(tmp)
	if err != nil {
		return "", 0, stagingErr(filepath.Dir(dst), err)
	}
	h := sha256.New()
	n, err := io.CopyBuffer(io.MultiWriter(w, h, progressWriter(progress)), r, make([]byte, 4<<20))
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		var pe *os.PathError
		if errors.As(err, &pe) || errors.Is(err, syscall.ENOSPC) {
			return "", 0, stagingErr(filepath.Dir(dst), err)
		}
		return "", 0, fmt.Errorf("download %s: %w", src, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// stagingErr names the fix for a local write failure: another folder.
func stagingErr(dir string, err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("staging folder %s: the disk is full: point --staging (or PREP_STAGING) at a disk with room for the shards: %w", dir, err)
	}
	return fmt.Errorf("staging folder %s: %w (choose another with --staging or PREP_STAGING)", dir, err)
}

type progressWriter func(int64)

func (p progressWriter) Write(b []byte) (int, error) {
	if p != nil {
		p(int64(len(b)))
	}
	return len(b), nil
}

func readAll(ctx context.Context, open OpenFunc, uri string) ([]byte, error) {
	r, err := open(ctx, uri)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", uri, err)
	}
	return data, nil
}

// parentURI is the folder of a gs:// object or a local file.
func parentURI(uri string) string {
	if i := strings.LastIndex(uri, "/"); i >= 0 {
		return uri[:i]
	}
	return "."
}
