package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/prep-dev/prep/formats"
)

func TestWriteReadRoundTrip(t *testing.T) {
	m := &Manifest{
		FormatVersion: FormatVersion, Order: "shuffle",
		Version: "v", Format: "hdf5", Recipe: "resize=8", Seed: 3, Copies: 2,
		Options: map[string]string{"b": "2", "a": "1"}, Classes: []string{"x", "y"},
		Items: 5, ItemsPerShard: 3, ShardCount: 2,
		Shards: []Shard{
			{Index: 0, ShardInfo: formats.ShardInfo{File: "shard-000000.h5", Count: 3, Bytes: 5000, SHA256: "ab",
				Datasets: []formats.DatasetInfo{{Name: "data", DType: formats.Uint8, Shape: []int{3, 2}, Offset: 4096, Size: 6}}}},
			{Index: 1, ShardInfo: formats.ShardInfo{File: "shard-000001.h5", Count: 1, Bytes: 50, SHA256: "cd"},
				Skipped: []Skipped{{Key: "bad.jpg", Reason: "truncated"}}},
		},
	}
	m.Totals()
	if m.Samples != 4 || m.Bytes != 5050 || len(m.Skipped) != 1 {
		t.Fatalf("totals: %d samples, %d bytes, %v skipped", m.Samples, m.Bytes, m.Skipped)
	}
	dir := t.TempDir()
	if err := Write(dir, m); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileName+".tmp")); !os.IsNotExist(err) {
		t.Fatal("temp manifest left behind")
	}
	got, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("read back\n%+v\nwant\n%+v", got, m)
	}
	a, _ := Marshal(m)
	b, _ := Marshal(got)
	if string(a) != string(b) {
		t.Fatal("marshalling is not stable")
	}
}

func TestParseError(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, FileName), []byte("{not json"), 0o644)
	if _, err := Read(dir); err == nil {
		t.Fatal("a corrupt manifest was accepted")
	}
}

func TestParseVersionAndOrder(t *testing.T) {
	for _, tc := range []struct {
		json, order, err string
		version          int
	}{
		{json: `{"version": "old"}`, version: 1, order: "sorted"}, // written before the fields existed
		{json: `{"format_version": 1, "order": "shuffle"}`, version: 1, order: "shuffle"},
		{json: `{"format_version": 2}`, version: 2, order: "sorted"},
		{json: `{"format_version": 4}`, err: "format version 4 is newer than this prep reads (3): upgrade prep"},
	} {
		m, err := Parse([]byte(tc.json))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.json, err, tc.err)
			}
			continue
		}
		if err != nil || m.FormatVersion != tc.version || m.Order != tc.order {
			t.Errorf("%s: version %d order %q err %v, want %d %q", tc.json, m.FormatVersion, m.Order, err, tc.version, tc.order)
		}
	}
}

// TestParseRefusesShardEntries: readers open shard files by the names a
// manifest gives, so a name that leaves the folder, or samples with no
// file, are refused, naming the manifest and the entry.
func TestParseRefusesShardEntries(t *testing.T) {
	for _, tc := range []struct {
		name, shards, err string
	}{
		{"plain", `{"index": 0, "file": "shard-000000.h5", "count": 2}`, ""},
		{"skipped shard", `{"index": 0, "file": "", "count": 0}`, ""},
		{"no file", `{"index": 0, "count": 0}, {"index": 1, "file": "", "count": 3}`, `shard entry 1 (index 1) holds 3 samples but names no file`},
		{"parent", `{"index": 0, "file": "../../x", "count": 1}`, `shard entry 0 (index 0): file "../../x" is not a plain file name`},
		{"dot dot", `{"index": 0, "file": "..", "count": 1}`, `file ".." is not a plain file name`},
		{"dot", `{"index": 0, "file": ".", "count": 1}`, `file "." is not a plain file name`},
		{"absolute", `{"index": 0, "file": "/etc/passwd", "count": 1}`, `file "/etc/passwd" is not a plain file name`},
		{"sub folder", `{"index": 0, "file": "sub/shard.h5", "count": 1}`, `file "sub/shard.h5" is not a plain file name`},
		{"backslash", `{"index": 0, "file": "..\\x.h5", "count": 1}`, `is not a plain file name`},
		// What prepshards refuses, prep refuses too.
		{"index twice", `{"index": 0, "file": "a.h5", "count": 1}, {"index": 0, "file": "b.h5", "count": 1}`, `shard entry 1: index 0 listed twice`},
		{"file twice", `{"index": 0, "file": "a.h5", "count": 1}, {"index": 1, "file": "a.h5", "count": 1}`, `shard entry 1: file a.h5 listed twice`},
		{"negative count", `{"index": 0, "file": "a.h5", "count": -1}`, `negative index, count or bytes`},
		{"dataset past the end", `{"index": 0, "file": "a.h5", "count": 1, "bytes": 100, "datasets": [{"name": "data", "offset": 90, "size": 20}]}`, `dataset data at offset 90, 20 bytes, lies outside the 100-byte shard`},
		{"datasets overlap", `{"index": 0, "file": "a.h5", "count": 1, "bytes": 100, "datasets": [{"name": "data", "offset": 0, "size": 50}, {"name": "labels", "offset": 40, "size": 8}]}`, `datasets data and labels overlap`},
		{"dataset not contiguous", `{"index": 0, "file": "a.h5", "count": 1, "bytes": 100, "datasets": [{"name": "data", "offset": -1, "size": 500}]}`, ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, FileName), []byte(`{"format_version": 1, "shards": [`+tc.shards+`]}`), 0o644)
			_, err := Read(dir)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), filepath.Join(dir, FileName)) {
				t.Fatalf("err = %v, want it to name %s and contain %q", err, filepath.Join(dir, FileName), tc.err)
			}
		})
	}
}

// TestDatasetID checks the ID against the text docs/FORMAT.md §2.5 spells
// out, and that it moves with every input of it and with nothing else.
func TestDatasetID(t *testing.T) {
	base := func() *Manifest {
		return &Manifest{
			FormatVersion: 1, Version: "v", Format: "hdf5", Recipe: "resize=8,crop=4:random", Seed: 18446744073709551615,
			Copies: 2, Order: "shuffle", Source: "/data/in", Items: 4, ItemsPerShard: 2, ShardCount: 3,
			Shards: []Shard{
				{Index: 0, ShardInfo: formats.ShardInfo{File: "shard-000000.h5", Count: 2, Bytes: 10, SHA256: "aa"}},
				{Index: 1, Skipped: []Skipped{{Key: "x.jpg", Reason: "bad"}}},
				{Index: 2, ShardInfo: formats.ShardInfo{File: "shard-000002.h5", Count: 1, Bytes: 9, SHA256: "bb"}},
			},
		}
	}
	text := "prep-dataset-id\nformat_version=1\nrecipe=resize=8,crop=4:random\nseed=18446744073709551615\norder=shuffle\n" +
		"shard=0:aa\nshard=1:\nshard=2:bb\n"
	sum := sha256.Sum256([]byte(text))
	want := hex.EncodeToString(sum[:])
	m := base()
	m.Totals()
	if m.DatasetID != want || DatasetID(m) != want {
		t.Fatalf("dataset id %s (Totals) %s (DatasetID), want %s", m.DatasetID, DatasetID(m), want)
	}
	for _, tc := range []struct {
		name   string
		change func(*Manifest)
		same   bool
	}{
		{"format version", func(m *Manifest) { m.FormatVersion = 2 }, false},
		{"recipe", func(m *Manifest) { m.Recipe = "resize=8" }, false},
		{"seed", func(m *Manifest) { m.Seed = 0 }, false},
		{"order", func(m *Manifest) { m.Order = "sorted" }, false},
		{"a shard's checksum", func(m *Manifest) { m.Shards[2].SHA256 = "bc" }, false},
		{"source", func(m *Manifest) { m.Source = "gs://b/in" }, true},
		{"prep version", func(m *Manifest) { m.Version = "w" }, true},
		{"options", func(m *Manifest) { m.Options = map[string]string{"decoder": "go"} }, true},
	} {
		m := base()
		tc.change(m)
		m.Totals()
		if got := m.DatasetID == want; got != tc.same {
			t.Errorf("%s changed: id %s, unchanged id %s; want equal %v", tc.name, m.DatasetID, want, tc.same)
		}
	}
	// Parts of a run have no ID of their own.
	part := base()
	part.Task = &Task{Index: 0, Count: 2, First: 0, End: 1}
	part.Totals()
	progress := base()
	progress.Shards = progress.Shards[:2]
	progress.Totals()
	if part.DatasetID != "" || progress.DatasetID != "" {
		t.Errorf("a task part got id %q and a progress file %q, want none", part.DatasetID, progress.DatasetID)
	}
	// An older manifest without the field still parses.
	old, err := Parse([]byte(`{"format":"hdf5","recipe":"","seed":1,"copies":1,"items":1,"items_per_shard":1,"shard_count":1,"shards":[{"index":0,"file":"shard-000000.h5","count":1,"bytes":5,"sha256":"cc"}]}`))
	if err != nil || old.DatasetID != "" || DatasetID(old) == "" {
		t.Fatalf("older manifest: %v, id %q, computed %q", err, old.DatasetID, DatasetID(old))
	}
}

// TestNamesKeptExactly: class names and keys of any bytes a Linux file
// system allows survive manifest.json exactly, bytes that are not UTF-8
// written as \udcXX (Python's surrogateescape), so b"caf\xe9" and
// b"caf\xe8" stay two classes; ordinary names are written as before.
func TestNamesKeptExactly(t *testing.T) {
	classes := []string{"a\nb", "caf\xe8", "caf\xe9", "plain"}
	bad := []Skipped{{Key: "caf\xe9/x.jpg", Reason: "open caf\xe9/x.jpg: damaged"}, {Key: "<&>\u2028.jpg", Reason: "r"}}
	m := &Manifest{FormatVersion: FormatVersion, Order: "sorted", Format: "png", Classes: classes, Source: "/data/caf\xe9",
		Shards:  []Shard{{Index: 0, ShardInfo: formats.ShardInfo{File: "shard-000000.tar", Count: 1}, Skipped: bad}},
		Ignored: []Skipped{{Key: "caf\xe8/notes.txt", Reason: "unsupported"}}}
	m.Totals()
	data, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"caf\udce8"`, `"caf\udce9"`, `"a\nb"`, `"key": "caf\udce9/x.jpg"`, `"reason": "open caf\udce9/x.jpg: damaged"`,
		`"key": "<&>\u2028.jpg"`, `"key": "caf\udce8/notes.txt"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("manifest lacks %s:\n%s", want, data)
		}
	}
	got, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual([]string(got.Classes), classes) {
		t.Errorf("classes read back as %q, want %q", got.Classes, classes)
	}
	if !reflect.DeepEqual(got.Shards[0].Skipped, bad) || !reflect.DeepEqual(got.Skipped, bad) {
		t.Errorf("skipped read back as %q / %q, want %q", got.Shards[0].Skipped, got.Skipped, bad)
	}
	if got.Source != "/data/caf\xe9" {
		t.Errorf("source read back as %q", got.Source)
	}
	if len(got.Ignored) != 1 || got.Ignored[0].Key != "caf\xe8/notes.txt" {
		t.Errorf("ignored read back as %q", got.Ignored)
	}
}
