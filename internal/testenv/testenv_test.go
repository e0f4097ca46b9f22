package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fakeTB records how a helper ended a test: Fatalf and Skip stop the
// goroutine, as testing.T's do. Methods the helpers do not call are left
// to the nil testing.TB, and panic.
type fakeTB struct {
	testing.TB
	name     string
	ended    string // "", "fail" or "skip"
	msg      string
	cleanups []func()
}

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Name() string      { return f.name }
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.ended, f.msg = "fail", fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (f *fakeTB) Skip(args ...any) {
	f.ended, f.msg = "skip", fmt.Sprint(args...)
	runtime.Goexit()
}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.ended, f.msg = "skip", fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls fn with a fake test named name, on a goroutine of its own that
// a Fatalf or Skip may end, and returns the fake once fn is done.
func run(name string, fn func(testing.TB)) *fakeTB {
	f := &fakeTB{name: name}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	for _, c := range f.cleanups {
		c()
	}
	return f
}

// helperCase is a call of a helper, and how it must end the test
// without CI and under CI=true: "", "skip" or "fail".
type helperCase struct {
	name         string
	fn           func(testing.TB)
	want, wantCI string
	msg          string // in the message either way
}

// TestHelpers runs each helper with what it needs there and missing,
// under CI=true and not: a missing dependency fails under CI and skips
// elsewhere with the same message; hardware always skips.
func TestHelpers(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "fakeprog"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	tests := []helperCase{
		{"command found", func(t testing.TB) {
			if p := NeedCommand(t, "fakeprog", "fake"); p != filepath.Join(bin, "fakeprog") {
				t.Fatalf("path %s", p)
			}
		}, "", "", ""},
		{"command missing", func(t testing.TB) { NeedCommand(t, "ffmpeg", "ffmpeg") },
			"skip", "fail", "needs the ffmpeg command: make deps installs it (apt-get install ffmpeg)"},
		{"file found", func(t testing.TB) { NeedFile(t, bin, "mkdir it") }, "", "", ""},
		{"file missing", func(t testing.TB) { NeedFile(t, "/dev/no-such-device", "mknod it") },
			"skip", "fail", "needs /dev/no-such-device: mknod it"},
		{"no interpreter", func(t testing.TB) {
			defer func(p string) { python = p }(python)
			python = filepath.Join(bin, "python3")
			NeedPython(t, "PIL")
		}, "skip", "fail", "needs " + filepath.Join(bin, "python3") + ": make deps installs it (apt-get install python3)"},
		{"cgo built", func(t testing.TB) { NeedCgo(t, "libpng", true) }, "", "", ""},
		{"cgo missing", func(t testing.TB) { NeedCgo(t, "libpng", false) },
			"skip", "fail", "needs libpng (a cgo build): build with CGO_ENABLED=1"},
		{"cgo left out", func(t testing.TB) {
			os.Setenv("CGO_ENABLED", "0") // the subtest's Setenv restores it
			NeedCgo(t, "libpng", false)
		}, "skip", "skip", "CGO_ENABLED=0: this build leaves out libpng"},
		{"SIMD built and present", func(t testing.TB) { NeedSIMD(t, "AVX-512", true) }, "", "", ""},
		{"SIMD not built", func(t testing.TB) {
			defer func(v bool) { simdBuild = v }(simdBuild)
			simdBuild = false
			NeedSIMD(t, "AVX-512", false)
		}, "skip", "fail", "needs a GOEXPERIMENT=simd build (for the AVX-512 loops): export GOEXPERIMENT=simd"},
		{"hardware", func(t testing.TB) { SkipHardware(t, "no GPU") }, "skip", "skip", "no GPU"},
	}
	if _, err := os.Stat(python); err == nil {
		tests = append(tests,
			helperCase{"python modules found", func(t testing.TB) { NeedPython(t, "sys", "json") }, "", "", ""},
			helperCase{"python module missing", func(t testing.TB) { NeedPython(t, "json", "no_such_module_prep") }, "skip", "fail",
				"needs Python module no_such_module_prep for /usr/bin/python3: make deps installs it (apt-get install python3-no_such_module_prep)"})
	}
	if runtime.GOARCH == "amd64" {
		tests = append(tests, helperCase{"SIMD built, CPU without", func(t testing.TB) {
			defer func(v bool) { simdBuild = v }(simdBuild)
			simdBuild = true
			NeedSIMD(t, "AVX-512", false)
		}, "skip", "skip", "no AVX-512 on this amd64 CPU"})
	}
	for _, tt := range tests {
		for _, ci := range []string{"", "true"} {
			t.Run(tt.name+"/CI="+ci, func(t *testing.T) {
				t.Setenv("CI", ci)
				t.Setenv(SkipsEnv, "")
				t.Setenv("CGO_ENABLED", "")
				f := run("TestX", tt.fn)
				want := tt.want
				if ci == "true" {
					want = tt.wantCI
				}
				if f.ended != want || !strings.Contains(f.msg, tt.msg) {
					t.Errorf("ended %q with %q; want %q with %q", f.ended, f.msg, want, tt.msg)
				}
				if f.ended == "fail" && !strings.Contains(f.msg, "CI=true") {
					t.Errorf("failure %q does not say CI=true made it one", f.msg)
				}
			})
		}
	}
}

// TestSkipHardwareRecords checks the lines SkipHardware appends to the
// file $PREP_TEST_SKIPS names, and that Need and passing helpers add none.
func TestSkipHardwareRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "skips")
	t.Setenv(SkipsEnv, path)
	t.Setenv("CI", "true")
	run("TestGPU", func(t testing.TB) { SkipHardware(t, "no GPU") })
	run("TestFile", func(t testing.TB) { NeedFile(t, "/dev/no-such-device", "mknod it") })
	run("TestISA/sub", func(t testing.TB) { SkipHardware(t, "no AVX-512: not checked") })
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "internal/testenv: TestGPU: no GPU\ninternal/testenv: TestISA/sub: no AVX-512: not checked\n"
	if string(got) != want {
		t.Errorf("recorded\n%s\nwant\n%s", got, want)
	}

	t.Setenv(SkipsEnv, filepath.Join(t.TempDir(), "no-such-folder", "skips"))
	if f := run("TestGPU", func(t testing.TB) { SkipHardware(t, "no GPU") }); f.ended != "fail" || !strings.Contains(f.msg, SkipsEnv) {
		t.Errorf("an unwritable skips file: ended %q with %q, want a failure naming %s", f.ended, f.msg, SkipsEnv)
	}
}

// TestMountTmpfs mounts a small tmpfs where it can (as root), checks that
// it is one and that it is gone after the test; where it cannot, the
// helper must skip, or fail under CI.
func TestMountTmpfs(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("CI", "true")
	f := run("TestTmpfs", func(t testing.TB) {
		MountTmpfs(t, dir, "size=4k")
		if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 64<<10), 0o644); err == nil {
			t.Fatalf("wrote 64 KiB into a 4 KiB tmpfs")
		}
	})
	if os.Geteuid() != 0 {
		if f.ended != "fail" || !strings.Contains(f.msg, "needs a tmpfs mount on "+dir) {
			t.Errorf("not root, CI=true: ended %q with %q, want a failure naming the mount", f.ended, f.msg)
		}
		return
	}
	if f.ended != "" {
		t.Fatalf("ended %q: %s", f.ended, f.msg)
	}
	if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 64<<10), 0o644); err != nil {
		t.Errorf("the tmpfs is still mounted after the test: %v", err)
	}
}

// TestRealTest runs this test binary again on a test that needs a missing
// command, without CI and with CI=true: go test's own report must be SKIP,
// then FAIL with the fix named.
func TestRealTest(t *testing.T) {
	if os.Getenv("TESTENV_CHILD") == "1" {
		t.Setenv("PATH", t.TempDir())
		NeedCommand(t, "ffmpeg", "ffmpeg")
		return
	}
	for _, tt := range []struct{ ci, want string }{
		{"", "--- SKIP: TestRealTest"},
		{"true", "--- FAIL: TestRealTest"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRealTest$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTENV_CHILD=1", "CI="+tt.ci)
		out, err := cmd.CombinedOutput()
		if !strings.Contains(string(out), tt.want) || !strings.Contains(string(out), "needs the ffmpeg command: make deps installs it") {
			t.Errorf("CI=%q: %v, output\n%s\nwant %q and the fix", tt.ci, err, out, tt.want)
		}
		if failed := err != nil; failed != (tt.ci == "true") {
			t.Errorf("CI=%q: exit error %v", tt.ci, err)
		}
	}
}
