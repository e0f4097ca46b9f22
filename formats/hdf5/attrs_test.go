package hdf5

import (
	"bytes"
	"encoding/hex"
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

// TestClassNamesExact: class names of any bytes a Linux file system
// allows read back exactly, through Meta and through h5py (os.fsencode
// of the str it gives): joined by newlines in classes when that splits
// back into exactly them, else one per entry in class_names, with no
// classes for a reader to split wrongly.
func TestClassNamesExact(t *testing.T) {
	for _, tc := range []struct {
		classes []string
		list    bool // in class_names
	}{
		{[]string{"a\nb", "caf\xe8", "caf\xe9", "plain"}, true},
		{[]string{"caf\xe8", "caf\xe9", "\xff\xfe"}, false},
		{[]string{"\n"}, true},
		{[]string{""}, true}, // joined, it would read as no classes
		{[]string{"", "x"}, false},
		{nil, false},
	} {
		path := filepath.Join(t.TempDir(), "s.h5")
		meta := formats.ShardMeta{Version: "v", Recipe: "", Seed: 1, Classes: tc.classes}
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
		got, err := Meta(path)
		if err != nil || !reflect.DeepEqual(got.Classes, tc.classes) {
			t.Errorf("%q: Meta reads classes %q, %v", tc.classes, got.Classes, err)
		}
		m := h5py(t, path, `
import os
out["has_classes"] = "classes" in f.attrs
if "class_names" in f.attrs:
    v = f.attrs["class_names"]
    out["types"] = sorted({type(x).__name__ for x in v})
    names = [os.fsencode(x) for x in v]
else:
    v = f.attrs["classes"]
    names = os.fsencode(v).split(b"\n") if v else []
out["names"] = [n.hex() for n in names]
`)
		var want []any
		for _, c := range tc.classes {
			want = append(want, hex.EncodeToString([]byte(c)))
		}
		if names, _ := m["names"].([]any); !reflect.DeepEqual(names, want) && !(len(names) == 0 && len(want) == 0) {
			t.Errorf("%q: h5py reads names %v (hex), want %v", tc.classes, m["names"], want)
		}
		if m["has_classes"] != !tc.list {
			t.Errorf("%q: classes attribute present: %v, want %v", tc.classes, m["has_classes"], !tc.list)
		}
		if tc.list && !reflect.DeepEqual(m["types"], []any{"str"}) {
			t.Errorf("%q: h5py reads class_names entries as %v, want str", tc.classes, m["types"])
		}
	}
}
