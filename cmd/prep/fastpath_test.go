package main

import (
	"bytes"
	"crypto/sha256"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prep-dev/prep/internal/testenv"
)

// TestSIMDPathsSameShards converts the testdata photos on each SIMD path
// this CPU runs, chosen with GODEBUG as a user can (cpu.avx512f=off
// leaves AVX2, cpu.avx2=off too leaves scalar), checks that prep version
// names the path, and that every path writes the same shard bytes: the
// dataset does not depend on the machine that made it.
func TestSIMDPathsSameShards(t *testing.T) {
	cpu := cpuInfoSIMD(t)
	testenv.NeedSIMD(t, "AVX2", simdBuilt && cpu != "none")
	bin := prepBinary(t)
	var want [sha256.Size]byte
	for i, p := range []struct{ godebug, path string }{
		{"", cpu},
		{"cpu.avx512f=off", "AVX2"},
		{"cpu.avx512f=off,cpu.avx2=off", "scalar"},
	} {
		run := func(args ...string) string {
			t.Helper()
			cmd := exec.Command(bin, args...)
			cmd.Env = append(os.Environ(), "GODEBUG="+p.godebug)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("GODEBUG=%s prep %s: %v", p.godebug, strings.Join(args, " "), err)
			}
			return string(out)
		}
		if line := strings.Split(run("version"), "\n")[1]; !strings.HasPrefix(line, "simd:  "+p.path+":") {
			t.Errorf("GODEBUG=%s: prep version says %q, want the %s path", p.godebug, line, p.path)
		}
		dst := t.TempDir()
		run("convert", "../../testdata/images", dst, "--recipe", "resize=256,crop=224:random,hflip=0.5", "--copies", "3", "--seed", "7")
		got := shardsSHA256(t, dst)
		if i == 0 {
			want = got
		} else if got != want {
			t.Errorf("GODEBUG=%s: the %s path wrote other shard bytes than the %s path", p.godebug, p.path, cpu)
		}
	}
}

// shardsSHA256 hashes the bytes of every HDF5 shard in dir, in name order.
func shardsSHA256(t *testing.T, dir string) [sha256.Size]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.h5"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no shards in %s (%v)", dir, err)
	}
	var all bytes.Buffer
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	return sha256.Sum256(all.Bytes())
}
