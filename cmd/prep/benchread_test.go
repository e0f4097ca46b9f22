package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prep-dev/prep/bench"
	"github.com/prep-dev/prep/formats/manifest"
)

// convertedShards runs the real converter on the test photos: 16 samples
// of 224×224×3 in three HDF5 shards.
func convertedShards(t *testing.T) (string, *manifest.Manifest) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "shards")
	if _, stderr, code := prepRun(t, "convert", "../../testdata/images", dst, "--recipe", demoRecipe, "--seed", "7", "--copies", "2", "--items-per-shard", "6"); code != 0 {
		t.Fatalf("convert exit %d: %s", code, stderr)
	}
	m, err := manifest.Read(dst)
	if err != nil {
		t.Fatal(err)
	}
	return dst, m
}

// dataSHA returns the sha256 of a shard's data dataset, from the bytes at
// the manifest's offset.
func dataSHA(t *testing.T, dir string, s manifest.Shard) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, s.File))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range s.Datasets {
		if d.Name == "data" {
			sum := sha256.Sum256(b[d.Offset : d.Offset+d.Size])
			return hex.EncodeToString(sum[:])
		}
	}
	t.Fatalf("%s has no data dataset", s.File)
	return ""
}

// haveLib reports whether the dynamic linker knows a library.
func haveLib(name string) bool {
	out, err := exec.Command("/sbin/ldconfig", "-p").Output()
	return err == nil && strings.Contains(string(out), name)
}

func TestBenchRead(t *testing.T) {
	dir, m := convertedShards(t)
	var payload, files int64
	for _, s := range m.Shards {
		files += s.Bytes
		for _, d := range s.Datasets {
			payload += d.Size
		}
	}
	for _, args := range [][]string{
		{},
		{"--direct", "--readers", "2"},
		{"--via", "hdf5", "--cold"},
	} {
		stdout, stderr, code := prepRun(t, append([]string{"bench-read", dir, "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("bench-read %v: exit %d: %s", args, code, stderr)
		}
		var res bench.ReadResult
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatalf("bench-read %v --json: %v\n%s", args, err, stdout)
		}
		if res.Samples != 16 || len(res.Shards) != 3 || res.Prep.Bytes != payload || res.Raw.Bytes != files {
			t.Errorf("bench-read %v: %d samples in %d shards, prep read %d bytes (datasets hold %d), raw %d (files %d)",
				args, res.Samples, len(res.Shards), res.Prep.Bytes, payload, res.Raw.Bytes, files)
		}
		if res.Sample.String() != "224×224×3 uint8" || res.Efficiency <= 0 {
			t.Errorf("bench-read %v: sample %v, efficiency %v", args, res.Sample, res.Efficiency)
		}
	}
	// One shard, text output.
	stdout, stderr, code := prepRun(t, "bench-read", filepath.Join(dir, m.Shards[0].File))
	if code != 0 || !strings.Contains(stdout, "samples/s of 224×224×3 uint8") || !strings.Contains(stdout, "shard-000000.h5") || stderr != "" {
		t.Errorf("bench-read SHARD: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

func TestBenchReadErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"bench-read", t.TempDir()}, exitFailure, "run prep convert first"},
		{[]string{"bench-read", filepath.Join(t.TempDir(), "missing")}, exitFailure, "no such folder or file: give the folder prep convert wrote"},
		{[]string{"bench-read", ".", "--via", "mmap"}, exitUsage, `--via "mmap"`},
		{[]string{"bench-read", ".", "--readers", "0"}, exitUsage, "--readers 0"},
		{[]string{"bench-read"}, exitUsage, "bench-read takes SHARD|DIR, got 0"},
	} {
		_, stderr, code := prepRun(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
}

// TestBenchHelpExamples requires a worked example in the --help of prep
// and of every command it has, so a new command cannot ship without one.
func TestBenchHelpExamples(t *testing.T) {
	cmds := []string{""}
	for _, c := range newRoot().Commands() {
		if c.Name() != "help" {
			cmds = append(cmds, c.Name())
		}
	}
	for _, want := range []string{"convert", "inspect", "version", "merge-manifest", "bench-read", "feed-test", "gpu-watch", "completion", "recipes"} {
		if !slices.Contains(cmds, want) {
			t.Errorf("prep has no %s command", want)
		}
	}
	for _, c := range cmds {
		args := []string{"--help"}
		if c != "" {
			args = []string{c, "--help"}
		}
		stdout, _, code := prepRun(t, args...)
		if code != 0 || !strings.Contains(stdout, "Examples:\n  prep ") && !strings.Contains(stdout, "Examples:\n  # ") {
			t.Errorf("prep %s --help: exit %d, no worked example:\n%s", c, code, stdout)
		}
	}
	stdout, _, _ := prepRun(t, "--help")
	for _, want := range []string{"Exit codes:", "  2    usage", "  130  interrupted"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("prep --help lacks %q:\n%s", want, stdout)
		}
	}
}
