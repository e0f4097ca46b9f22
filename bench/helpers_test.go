package bench

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/hdf5"
	"github.com/prep-dev/prep/formats/manifest"
	"github.com/prep-dev/prep/formats/tarshard"
)

// shardFormats reads shards as prep's registry does (cmd/prep).
var shardFormats = func() *formats.Registry {
	r := formats.NewRegistry(hdf5.Format{}, tarshard.PNG(), tarshard.WAV())
	r.AddExt(".hdf5", hdf5.Format{})
	return r
}()

// image returns a sample of h×w×3 deterministic noise.
func image(key string, label int64, h, w int) *formats.Sample {
	r := rand.New(rand.NewPCG(uint64(len(key)), uint64(label)))
	data := make([]byte, h*w*3)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	return &formats.Sample{Key: key, Label: label, Fields: []formats.Field{{
		Name: formats.DataField, Tensor: formats.Tensor{DType: formats.Uint8, Shape: []int{h, w, 3}, Data: data},
	}}}
}

// writeShards converts shards×perShard samples with the real shard
// writer of format f and writes the manifest beside them.
func writeShards(t testing.TB, dir string, f formats.ShardFormat, shards, perShard, h, w int) *manifest.Manifest {
	t.Helper()
	m := &manifest.Manifest{Version: "test", Format: f.Name(), Items: shards * perShard, ItemsPerShard: perShard, ShardCount: shards}
	for k := range shards {
		path := filepath.Join(dir, fmt.Sprintf("shard-%06d%s", k, f.Ext()))
		sw, err := f.Create(path, formats.ShardMeta{Version: "test"})
		if err != nil {
			t.Fatal(err)
		}
		for i := range perShard {
			if err := sw.Add(image(fmt.Sprintf("c%d/img%05d.jpg", i%3, k*perShard+i), int64(i%3), h, w)); err != nil {
				t.Fatal(err)
			}
		}
		info, err := sw.Close()
		if err != nil {
			t.Fatal(err)
		}
		m.Shards = append(m.Shards, manifest.Shard{Index: k, ShardInfo: info})
	}
	m.Totals()
	if err := manifest.Write(dir, m); err != nil {
		t.Fatal(err)
	}
	return m
}

func writeHDF5(t testing.TB, dir string, shards, perShard, h, w int) *manifest.Manifest {
	return writeShards(t, dir, hdf5.Format{}, shards, perShard, h, w)
}

func writeTar(t testing.TB, dir string, shards, perShard, h, w int) *manifest.Manifest {
	return writeShards(t, dir, tarshard.PNG(), shards, perShard, h, w)
}

// fileSHA returns the SHA-256 of bytes [off, off+n) of a file.
func fileSHA(t *testing.T, path string, off, n int64) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b[off : off+n])
	return hex.EncodeToString(sum[:])
}

// pySHA returns h5py's SHA-256 of each named dataset's bytes.
func pySHA(t *testing.T, path string, names ...string) map[string]string {
	t.Helper()
	script := `
import sys, hashlib, h5py
f = h5py.File(sys.argv[1], "r")
for n in sys.argv[2:]:
    print(n, hashlib.sha256(f[n][()].tobytes()).hexdigest())
`
	out, err := exec.Command("/usr/bin/python3", append([]string{"-c", script, path}, names...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("h5py: %v\n%s", err, out)
	}
	sums := make(map[string]string)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, sum, _ := strings.Cut(line, " ")
		sums[name] = sum
	}
	return sums
}

// python runs a script with Debian's python3 (h5py, numpy).
func python(t *testing.T, script string, args ...string) {
	t.Helper()
	out, err := exec.Command("/usr/bin/python3", append([]string{"-c", script}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
}

// findShards returns Find(dir, shardFormats), failing the test on an error.
func findShards(t testing.TB, dir string) []Shard {
	t.Helper()
	shards, err := Find(dir, shardFormats)
	if err != nil {
		t.Fatal(err)
	}
	return shards
}
