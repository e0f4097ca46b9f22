package cloudsrc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Dir is a Source over a local folder.
type Dir struct{ Root string }

// List walks the folder; hidden files and unfinished .tmp files are left out.
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
	err = filepath.WalkDir(d.Root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		name := e.Name()
		if path != d.Root && strings.HasPrefix(name, ".") {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() {
			return nil
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(d.Root, path)
		if err != nil {
			return err
		}
		objs = append(objs, Object{Key: filepath.ToSlash(rel), Size: fi.Size()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", d.Root, err)
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
	return objs, nil
}

// Open opens the file behind key.
func (d Dir) Open(_ context.Context, key string) (io.ReadCloser, error) {
	return os.Open(d.LocalPath(key))
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
