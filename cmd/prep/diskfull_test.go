package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/prep-dev/prep/internal/testenv"
)

// TestDiskFullThenResume converts onto a 2 MiB tmpfs: the run must stop
// with a message that says the disk is full and to rerun with --resume,
// leave no temp file and no damaged shard, and, once there is room, resume
// to exactly what an uninterrupted run writes.
func TestDiskFullThenResume(t *testing.T) {
	dir := t.TempDir()
	testenv.MountTmpfs(t, dir, "size=2m")
	args := func(dst string) []string {
		return []string{"convert", "../../testdata/images", dst, "--recipe", "resize=256,crop=224", "--seed", "5",
			"--copies", "3", "--items-per-shard", "4"}
	}
	clean := t.TempDir()
	if _, stderr, code := prepRun(t, args(clean)...); code != 0 {
		t.Fatalf("clean run exit %d: %s", code, stderr)
	}
	dst := dir + "/out"
	_, stderr, code := prepRun(t, args(dst)...)
	if code != exitFailure {
		t.Fatalf("exit %d on a full disk, want %d; stderr:\n%s", code, exitFailure, stderr)
	}
	for _, want := range []string{"the disk is full", "--resume"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	// The space runs out in a shard or in the progress record written
	// after one, as the closing shard and the next one race for it.
	if !strings.Contains(stderr, dst+"/shard-") && !strings.Contains(stderr, dst+"/.prep-progress.json") {
		t.Errorf("stderr names neither a shard nor the progress record in %s:\n%s", dst, stderr)
	}
	if strings.Contains(stderr, "HDF5-DIAG") {
		t.Errorf("the HDF5 error stack reached the user:\n%s", stderr)
	}
	want := readDir(t, clean)
	for name, data := range readDir(t, dst) {
		if strings.HasSuffix(name, ".tmp") {
			t.Errorf("temp file %s left behind", name)
		}
		if strings.HasPrefix(name, "shard-") && !bytes.Equal(data, want[name]) {
			t.Errorf("%s is under its final name but differs from the clean run", name)
		}
	}
	if out, err := exec.Command("mount", "-o", "remount,size=64m", dir).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v: %s", err, out)
	}
	if _, stderr, code := prepRun(t, append(args(dst), "--resume")...); code != 0 {
		t.Fatalf("resume exit %d: %s", code, stderr)
	}
	got := readDir(t, dst)
	if len(got) != len(want) {
		t.Fatalf("resumed run has %d files, clean run %d", len(got), len(want))
	}
	for name, data := range want {
		if !bytes.Equal(data, got[name]) {
			t.Errorf("%s differs after resume", name)
		}
	}
}

// TestReadOnlyDestination: a destination on a read-only file system is
// refused in prep's words, naming it and the fix, before anything runs.
func TestReadOnlyDestination(t *testing.T) {
	dir := t.TempDir()
	testenv.MountTmpfs(t, dir, "size=1m,ro")
	_, stderr, code := prepRun(t, "convert", "../../testdata/images", dir)
	want := "destination " + dir + " is not writable ("
	if code != exitFailure || !strings.Contains(stderr, want) || !strings.Contains(stderr, "read-only file system): choose another destination, or fix its permissions") {
		t.Fatalf("exit %d, stderr %q; want exit 1 and %q", code, stderr, want)
	}
}
