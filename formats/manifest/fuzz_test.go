package manifest

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/prep-dev/prep/formats"
)

// FuzzParse: Parse never panics; what it accepts passes Validate, names
// only shard files directly inside the manifest's folder, and marshals to
// bytes that parse to the same manifest.
func FuzzParse(f *testing.F) {
	m := &Manifest{
		FormatVersion: FormatVersion, Version: "v1.2.3", Format: "hdf5", Recipe: "resize=256,crop=224",
		Seed: 7, Copies: 2, Order: "shuffle", Source: "/data/in", Options: map[string]string{"layout": "fixed"},
		Classes: []string{"cat", "dog"}, Items: 3, ItemsPerShard: 2, ShardCount: 2,
		Shards: []Shard{
			{Index: 0, ShardInfo: formats.ShardInfo{File: "shard-000000.h5", Count: 2, Bytes: 100, SHA256: "ab", CRC32C: "0000abcd",
				Datasets: []formats.DatasetInfo{{Name: "data", DType: formats.Uint8, Shape: []int{2, 4, 4, 3}}}}},
			{Index: 1, ShardInfo: formats.ShardInfo{Count: 0}, Skipped: []Skipped{{Key: "a.png", Reason: "corrupt"}}},
		},
	}
	m.Totals()
	good, err := Marshal(m)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"task": {"index": 1, "count": 2, "first_shard": 1, "end_shard": 2}, "shards": [{"index": 1, "file": "s.tar", "count": 1}]}`))
	for _, name := range []string{"../../x", "/etc/passwd", "", ".", "..", `a\b`, "a/b", "shard\x00.h5"} {
		q, _ := json.Marshal(name)
		f.Add([]byte(`{"format_version": 1, "shards": [{"index": 0, "file": ` + string(q) + `, "count": 1}]}`))
	}
	f.Add([]byte(`{"format_version": 2}`))
	f.Add([]byte(`{"format_version": -1, "order": ""}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data)
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("Parse accepted what Validate refuses: %v", err)
		}
		if m.FormatVersion < 1 || m.FormatVersion > FormatVersion || m.Order == "" {
			t.Fatalf("accepted format_version %d, order %q", m.FormatVersion, m.Order)
		}
		const dir = "/shards"
		for i, s := range m.Shards {
			if s.File == "" {
				if s.Count > 0 {
					t.Fatalf("shard entry %d holds %d samples and names no file", i, s.Count)
				}
				continue
			}
			if p := filepath.Join(dir, s.File); filepath.Dir(p) != dir || filepath.Base(p) != s.File {
				t.Fatalf("shard entry %d: file %q opens %s, outside %s", i, s.File, p, dir)
			}
		}
		out, err := Marshal(m)
		if err != nil {
			t.Fatalf("accepted manifest does not marshal: %v", err)
		}
		m2, err := Parse(out)
		if err != nil {
			t.Fatalf("marshalled manifest refused: %v\n%s", err, out)
		}
		out2, err := Marshal(m2)
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("not stable: %v\n%s\nthen\n%s", err, out, out2)
		}
	})
}
