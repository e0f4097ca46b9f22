package hdf5

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/prep-dev/prep/formats"
)

// TestStringAttrsUTF8: the root's string attributes are variable-length
// UTF-8, which h5py reads as str (not bytes), non-ASCII class names
// included; Meta reads them back; and the shard's bytes do not vary.
func TestStringAttrsUTF8(t *testing.T) {
	meta := formats.ShardMeta{Version: "0.1.0-dev", Recipe: "resize=8,hflip=0.5", Seed: 3, Classes: []string{"cat", "dög", "猫"}}
	var files [][]byte
	for _, name := range []string{"a.h5", "b.h5"} {
		path := filepath.Join(t.TempDir(), name)
		w, err := Format{}.Create(path, meta)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Add(imageSample("cat/1.jpg", 0, 4, 5, 1)); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Close(); err != nil {
			t.Fatal(err)
		}
		m := h5py(t, path, `
for k in ("prep_version", "recipe", "classes"):
    v = f.attrs[k]
    out[k] = [type(v).__name__, v if isinstance(v, str) else repr(v)]
`)
		want := map[string]any{
			"prep_version": []any{"str", meta.Version},
			"recipe":       []any{"str", meta.Recipe},
			"classes":      []any{"str", "cat\ndög\n猫"},
		}
		if !reflect.DeepEqual(m, want) {
			t.Errorf("h5py reads the attributes as %v, want %v", m, want)
		}
		got, err := Meta(path)
		if err != nil || !reflect.DeepEqual(got, meta) {
			t.Errorf("Meta = %+v, %v; want %+v", got, err, meta)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, b)
	}
	if !bytes.Equal(files[0], files[1]) {
		t.Error("the same shard written twice differs")
	}
}

// TestMetaFixedLengthAttrs: Meta still reads the fixed-length ASCII
// string attributes of shards written before they were UTF-8.
func TestMetaFixedLengthAttrs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.h5")
	out, err := exec.Command("/usr/bin/python3", "-c", `
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    for k, v in (("prep_version", b"0.1.0-dev"), ("recipe", b"resize=8"), ("classes", b"cat\ndog")):
        f.attrs.create(k, np.array(v, dtype="S%d" % len(v)))
    f.attrs.create("seed", np.uint64(7))
    print(sorted({type(f.attrs[k]).__name__ for k in ("prep_version", "recipe", "classes")}))
`, path).CombinedOutput()
	if err != nil || string(out) != "['bytes_']\n" {
		t.Fatalf("h5py wrote fixed-length attributes that read as %q: %v", out, err)
	}
	got, err := Meta(path)
	want := formats.ShardMeta{Version: "0.1.0-dev", Recipe: "resize=8", Seed: 7, Classes: []string{"cat", "dog"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Meta = %+v, %v; want %+v", got, err, want)
	}
}
