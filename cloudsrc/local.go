package cloudsrc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
)

// Dir is a Source over a local folder.
type Dir struct{ Root string }

// List walks the folder; files whose name, or a folder's on their path,
// starts with "." are listed with Hidden set.
// Symbolic links are followed, to files and to folders alike (a link back
// to a folder it sits in is not followed again); a link whose target is
// missing is listed all the same, so that opening it fails and the run
// reports it rather than losing the input without a word.
func (d Dir) List(ctx context.Context) ([]Object, error) {
	info, err := os.Stat(d.Root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("source %s does not exist: check the path", d.Root)
		}
		return nil, fmt.Errorf("source %s: %w", d.Root, err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("source %s is a file, not a folder", d.Root)
	}
	var objs []Object
	if err := d.walk(ctx, d.Root, "", []fs.FileInfo{info}, false, &objs); err != nil {
		return nil, fmt.Errorf("list %s: %w", d.Root, err)
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
	return objs, nil
}

// walk lists folder dir, whose key prefix is rel; parents are the folders
// it sits in, dir last, to recognise a link that leads back into them.
func (d Dir) walk(ctx context.Context, dir, rel string, parents []fs.FileInfo, hidden bool, objs *[]Object) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if hidden {
			return nil // a hidden folder prep cannot read holds nothing it would take
		}
		return err
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		name := e.Name()
		hide := hidden || strings.HasPrefix(name, ".")
		path, key := filepath.Join(dir, name), rel+name
		fi, err := os.Stat(path) // follows links
		switch {
		case err != nil && e.Type()&fs.ModeSymlink != 0:
			*objs = append(*objs, Object{Key: key, Hidden: hide}) // broken link: opening it says why
		case err != nil && hide:
		case err != nil:
			return err
		case fi.IsDir():
			if slices.ContainsFunc(parents, func(p fs.FileInfo) bool { return os.SameFile(p, fi) }) {
				continue // a link to a folder above: following it would never end
			}
			if err := d.walk(ctx, path, key+"/", append(parents, fi), hide, objs); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			*objs = append(*objs, Object{Key: key, Size: fi.Size(), ModTime: fi.ModTime(), Hidden: hide})
		}
	}
	return nil
}

// Folders names the folders directly under the root, hidden ones
// included, following links as List does.
func (d Dir) Folders(ctx context.Context) ([]string, error) {
	entries, err := os.ReadDir(d.Root)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", d.Root, err)
	}
	var names []string
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if fi, err := os.Stat(filepath.Join(d.Root, e.Name())); err == nil && fi.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// Open opens the file behind key.
func (d Dir) Open(_ context.Context, key string) (io.ReadCloser, error) {
	name := d.LocalPath(key)
	f, err := os.Open(name)
	if err != nil && errors.Is(err, fs.ErrNotExist) {
		// "no such file" about a file ls shows is a puzzle: name the link.
		if target, lerr := os.Readlink(name); lerr == nil {
			return nil, fmt.Errorf("%s is a broken symbolic link (to %s, which does not exist)", name, target)
		}
	}
	return f, err
}

// Stat describes the file behind key, following links.
func (d Dir) Stat(_ context.Context, key string) (Object, error) {
	fi, err := os.Stat(d.LocalPath(key))
	if err != nil {
		return Object{}, err
	}
	return Object{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// URI returns the file's path.
func (d Dir) URI(key string) string { return d.LocalPath(key) }

// LocalPath returns the file's path.
func (d Dir) LocalPath(key string) string {
	if filepath.IsAbs(key) || d.Root == "" {
		return filepath.FromSlash(key)
	}
	return filepath.Join(d.Root, filepath.FromSlash(key))
}

// LocalSink is a Sink over a local folder: files are final once renamed.
type LocalSink struct{ Path string }

// NewLocalSink creates the folder if needed.
func NewLocalSink(path string) (*LocalSink, error) {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("create destination %s: %w", path, err)
	}
	return &LocalSink{Path: path}, nil
}

func (s *LocalSink) Dir() string                           { return s.Path }
func (s *LocalSink) URI() string                           { return s.Path }
func (s *LocalSink) Publish(context.Context, string) error { return nil }
func (s *LocalSink) Wait() error                           { return nil }
func (s *LocalSink) Remove(_ context.Context, name string) error {
	return os.Remove(filepath.Join(s.Path, name))
}

// PublishNew links tmp to name, which fails when name exists: unlike a
// rename, a link never replaces a file, and a reader sees name whole or
// not at all. Both are in one folder, so the link stays on one file system.
func (s *LocalSink) PublishNew(_ context.Context, tmp, name string) error {
	src, dst := filepath.Join(s.Path, tmp), filepath.Join(s.Path, name)
	defer os.Remove(src)
	if err := os.Link(src, dst); err != nil {
		if errors.Is(err, errors.ErrUnsupported) || errors.Is(err, syscall.EPERM) {
			// Some file systems (FAT, some FUSE mounts) have no hard links.
			return fmt.Errorf("create %s: %w (its file system has no hard links, which a create-only write needs)", dst, err)
		}
		return err
	}
	return syncDir(s.Path)
}

// syncDir makes a new name in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

func (s *LocalSink) ReadFile(_ context.Context, name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(s.Path, name))
}

func (s *LocalSink) List(context.Context) ([]string, error) {
	entries, err := os.ReadDir(s.Path)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, nil
}
