// Package testenv says what a test needs from the machine it runs on, so
// that CI never passes without running a test for want of a tool.
//
// A test that needs something the Makefile provides (a program or library
// make deps installs, /usr/bin/python3 with its modules, cgo, root for a
// tmpfs mount, /dev/full, /proc) calls Need or one of its forms: under CI
// (CI=true) a missing one fails the test, naming it and how to get it;
// elsewhere the test skips with the same words. What no package provides
// (a GPU, an instruction set, a GCE metadata server) skips with
// SkipHardware, under CI too, and is listed in the file $PREP_TEST_SKIPS
// names, from which make test prints one line of what was skipped and why.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// SkipsEnv names the file SkipHardware appends its lines to, one a skip:
// "package: test: reason". Unset, skips are not recorded.
const SkipsEnv = "PREP_TEST_SKIPS"

// underCI reports whether the tests run under CI: CI=true, as .ci/run sets it.
func underCI() bool { return strings.EqualFold(os.Getenv("CI"), "true") }

// Need stops t for want of what, which fix provides: under CI it fails,
// elsewhere it skips.
func Need(t testing.TB, what, fix string) {
	t.Helper()
	if underCI() {
		t.Fatalf("needs %s: %s (CI=true: a missing dependency fails the test)", what, fix)
	}
	t.Skipf("needs %s: %s", what, fix)
}

// NeedCommand returns the path of program name, or stops t (see Need);
// pkg is the Debian package that has it.
func NeedCommand(t testing.TB, name, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		Need(t, "the "+name+" command", "make deps installs it (apt-get install "+pkg+")")
	}
	return path
}

// NeedFile stops t (see Need) when path does not exist; fix says how to
// make it.
func NeedFile(t testing.TB, path, fix string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		Need(t, path, fix)
	}
}

// python is Debian's interpreter, which has the python3-* packages the
// Makefile installs (a python3 earlier on PATH may lack them).
var python = "/usr/bin/python3"

// pythonPackages names the Debian package of the modules tests import.
var pythonPackages = map[string]string{
	"PIL": "python3-pil", "numpy": "python3-numpy", "h5py": "python3-h5py", "torch": "python3-torch",
}

// NeedPython returns the path of Debian's python3 after checking that it
// imports every module, or stops t (see Need).
func NeedPython(t testing.TB, modules ...string) string {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		Need(t, python, "make deps installs it (apt-get install python3)")
	}
	for _, m := range modules {
		if !imports(m) {
			pkg, ok := pythonPackages[m]
			if !ok {
				pkg = "python3-" + strings.ToLower(m)
			}
			Need(t, "Python module "+m+" for "+python, "make deps installs it (apt-get install "+pkg+")")
		}
	}
	return python
}

// imported caches imports: a module is looked for once a test binary.
var imported sync.Map // "python\x00module" -> bool

// imports reports whether python imports module.
func imports(module string) bool {
	key := python + "\x00" + module
	if ok, done := imported.Load(key); done {
		return ok.(bool)
	}
	ok := exec.Command(python, "-c", "import "+module).Run() == nil
	imported.Store(key, ok)
	return ok
}

// MountTmpfs mounts a tmpfs with the given mount options (such as
// "size=2m") on dir, or stops t (see Need): mounting needs root, which CI
// has. The mount is undone when the test ends.
func MountTmpfs(t testing.TB, dir, options string) {
	t.Helper()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", options, "tmpfs", dir).CombinedOutput()
	if err != nil {
		msg, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		Need(t, fmt.Sprintf("a tmpfs mount on %s (%v: %s)", dir, err, msg), "run the tests as root, as CI does")
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
}

// NeedCgo stops a test of what only a cgo build has (have is false): a
// build asked for without cgo (CGO_ENABLED=0, as make cross does) skips,
// it is the build's choice; otherwise cgo is missing (see Need).
func NeedCgo(t testing.TB, what string, have bool) {
	t.Helper()
	if have {
		return
	}
	if os.Getenv("CGO_ENABLED") == "0" {
		t.Skipf("CGO_ENABLED=0: this build leaves out %s", what)
	}
	Need(t, what+" (a cgo build)", "build with CGO_ENABLED=1 and gcc, with the -dev packages make deps installs")
}

// NeedSIMD stops a test that compares SIMD loops with scalar ones when
// the loops cannot run (have is false): a build without GOEXPERIMENT=simd
// on amd64 lacks a setting the Makefile makes (see Need); another
// architecture, or a CPU without isa, is hardware (see SkipHardware).
func NeedSIMD(t testing.TB, isa string, have bool) {
	t.Helper()
	if have {
		return
	}
	if runtime.GOARCH == "amd64" && !simdBuild {
		Need(t, "a GOEXPERIMENT=simd build (for the "+isa+" loops)", "export GOEXPERIMENT=simd before go test, as the Makefile does")
	}
	SkipHardware(t, "no "+isa+" on this "+runtime.GOARCH+" CPU: the SIMD loops are not checked")
}

// SkipHardware skips t for want of hardware no package provides, such
// as a GPU or an instruction set, under CI too, and records the skip
// (see SkipsEnv).
func SkipHardware(t testing.TB, reason string) {
	t.Helper()
	if err := record(t.Name(), reason); err != nil {
		t.Fatalf("record the skip (%s): %v", reason, err)
	}
	t.Skip(reason)
}

// Stubbed records that t checked a path on a stub for want of hardware
// (the GPU bindings without a GPU) without skipping: make test's last
// line names such paths, so that a passing log does not read as if they
// ran for real.
func Stubbed(t testing.TB, reason string) {
	t.Helper()
	if err := record(t.Name(), StubMark+reason); err != nil {
		t.Fatalf("record the stub (%s): %v", reason, err)
	}
}

// StubMark starts the reason of a line Stubbed records.
const StubMark = "stub: "

// record appends "package: test: reason" to the file $PREP_TEST_SKIPS
// names, if it does. Test binaries of several packages append to it at
// once: each line is one write to a file opened O_APPEND.
func record(test, reason string) error {
	path := os.Getenv(SkipsEnv)
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("%s: %w", SkipsEnv, err)
	}
	_, err = fmt.Fprintf(f, "%s: %s: %s\n", callerPackage(), test, reason)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", SkipsEnv, err)
	}
	return nil
}

// callerPackage returns the folder, relative to the module's root, of
// the first caller outside this package: the test's package. (A function
// name would say "main" for cmd/prep.)
func callerPackage() string {
	pcs := make([]uintptr, 16)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	_, self, _, _ := runtime.Caller(0)
	for {
		f, more := frames.Next()
		if filepath.Dir(f.File) != filepath.Dir(self) || strings.HasSuffix(f.File, "_test.go") {
			return moduleRel(filepath.Dir(f.File))
		}
		if !more {
			return "?"
		}
	}
}

// moduleRel returns dir relative to the folder above it that holds
// go.mod, or dir itself when none does.
func moduleRel(dir string) string {
	for root := dir; ; {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			rel, err := filepath.Rel(root, dir)
			if err != nil {
				return dir
			}
			return filepath.ToSlash(rel)
		}
		parent := filepath.Dir(root)
		if parent == root {
			return dir
		}
		root = parent
	}
}
