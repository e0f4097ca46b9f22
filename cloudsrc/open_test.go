package cloudsrc_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/prep-dev/prep/cloudsrc"
)

func TestOpenSourceLocal(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"cat/1.jpg": "one", "cat/2.png": "two!", "dog/3.jpg": "three", "dog/sub/4.jpg": "four", "5.jpg": "five",
	}
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	tests := []struct {
		uri  string
		keys []string
	}{
		{root, []string{"5.jpg", "cat/1.jpg", "cat/2.png", "dog/3.jpg", "dog/sub/4.jpg"}},
		{filepath.Join(root, "*", "*.jpg"), []string{"cat/1.jpg", "dog/3.jpg"}},
		{filepath.Join(root, "cat", "*"), []string{"1.jpg", "2.png"}},
		{filepath.Join(root, "d?g", "*", "*.jpg"), []string{"dog/sub/4.jpg"}},
	}
	for _, tt := range tests {
		src, err := cloudsrc.OpenSource(ctx, tt.uri)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := src.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, o := range objs {
			keys = append(keys, o.Key)
			rc, err := src.Open(ctx, o.Key)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(rc)
			rc.Close()
			rel, _ := filepath.Rel(root, src.LocalPath(o.Key))
			if want := files[filepath.ToSlash(rel)]; string(got) != want || o.Size != int64(len(want)) {
				t.Errorf("%s: %s read %q (size %d), want %q", tt.uri, o.Key, got, o.Size, want)
			}
		}
		if !reflect.DeepEqual(keys, tt.keys) {
			t.Errorf("%s: keys %q, want %q", tt.uri, keys, tt.keys)
		}
	}
	_, err := cloudsrc.OpenSource(ctx, filepath.Join(root, "*.gif"))
	if err == nil || !strings.Contains(err.Error(), "matches no files") {
		t.Errorf("a glob that matches nothing: %v", err)
	}
	sink, err := cloudsrc.OpenSink(ctx, filepath.Join(root, "out"))
	if err != nil || sink.Dir() != filepath.Join(root, "out") {
		t.Errorf("local OpenSink: %v, %v", sink, err)
	}
	rc, err := cloudsrc.OpenURI(ctx, filepath.Join(root, "5.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if string(got) != "five" {
		t.Errorf("OpenURI read %q", got)
	}
}
