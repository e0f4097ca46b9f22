package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cheggaaa/pb/v3"

	"github.com/prep-dev/prep/augment"
	"github.com/prep-dev/prep/convert"
	"github.com/prep-dev/prep/formats/manifest"
	"github.com/prep-dev/prep/internal/testenv"
)

// execute runs prep in this process, as run does, and returns its
// stdout, stderr and error.
func execute(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := newRoot()
	var stdout, stderr bytes.Buffer
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return stdout.String(), stderr.String(), err
}

// cpuFlags reads the CPU's flags from /proc/cpuinfo, a source apart from
// the one prep uses (CPUID).
func cpuFlags(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		testenv.Need(t, "/proc/cpuinfo ("+err.Error()+")", "mount proc on /proc")
	}
	for _, line := range strings.Split(string(data), "\n") {
		if name, val, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "flags" {
			return strings.Fields(val)
		}
	}
	return nil
}

// cpuFlag reports whether /proc/cpuinfo lists flag.
func cpuFlag(t *testing.T, flag string) bool { return slices.Contains(cpuFlags(t), flag) }

// cpuInfoSIMD reads the widest SIMD prep can use from /proc/cpuinfo.
func cpuInfoSIMD(t *testing.T) string {
	t.Helper()
	flags := cpuFlags(t)
	has := func(names ...string) bool {
		for _, n := range names {
			if !slices.Contains(flags, n) {
				return false
			}
		}
		return true
	}
	switch {
	case has("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"):
		return "AVX-512"
	case has("avx2"):
		return "AVX2"
	}
	return "none"
}

// wantSIMDLine is the start of prep version's simd line for a binary
// built with or without GOEXPERIMENT=simd on this machine.
func wantSIMDLine(t *testing.T, built bool) string {
	cpu := cpuInfoSIMD(t)
	switch {
	case runtime.GOARCH != "amd64":
		return "simd:  scalar: prep's SIMD loops are for amd64 (AVX2, AVX-512); this is " + runtime.GOARCH
	case cpu == "none":
		return "simd:  scalar: this CPU lacks AVX2 and AVX-512"
	case built:
		return "simd:  " + cpu + ": resampler"
	}
	return "simd:  scalar: built without GOEXPERIMENT=simd, though this CPU has " + cpu + " (rebuild: make install)"
}

// checkVersion checks prep version's output: the version line, then one
// line per fast path, the simd one starting with wantSIMD.
func checkVersion(t *testing.T, out, wantSIMD string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 11 || !strings.HasPrefix(lines[0], "prep "+version+" (go") {
		t.Fatalf("prep version printed %q, want a version line and 10 fast paths", out)
	}
	if !strings.HasPrefix(lines[1], wantSIMD) {
		t.Errorf("simd line %q, want it to start %q", lines[1], wantSIMD)
	}
	// Every build that runs convert has cgo: formats/hdf5 needs it.
	png := "png:   libpng, 8-bit RGB/RGBA/grey inflated by libdeflate (cgo)"
	if cpuFlag(t, "sse4_1") {
		png += "; Paeth rows in SSE4.1"
	}
	// libheif and libjxl are loaded at run time; make deps installs them.
	heif := regexp.MustCompile(`^heif:  libheif 1\.\d+\.\d+, loaded at run time: HEIC, AVIF; in child processes \(a crash refuses one file\)$`)
	jxl := regexp.MustCompile(`^jxl:   libjxl 0\.\d+\.\d+, loaded at run time; in child processes \(a crash refuses one file\)$`)
	for i, want := range []any{"jpeg:  libjpeg-turbo, with DCT scaling (cgo); prep's entropy decoders", png, "webp:  libwebp (cgo)",
		heif, jxl, "other: GIF, BMP, TIFF, PNM (Go)", "flac:  libFLAC (cgo)", "mp3:   libmpg123, gapless (cgo)",
		"opus:  libopusfile (cgo)"} {
		if re, ok := want.(*regexp.Regexp); ok && !re.MatchString(lines[2+i]) || !ok && lines[2+i] != want {
			t.Errorf("line %d = %q, want %v", 3+i, lines[2+i], want)
		}
	}
}

// TestVersionFastPaths: prep version names the SIMD level this binary
// runs on this CPU, as /proc/cpuinfo and the build say it must.
func TestVersionFastPaths(t *testing.T) {
	stdout, stderr, code := prepRun(t, "version")
	if code != 0 || stderr != "" {
		t.Fatalf("prep version: exit %d, stderr %q", code, stderr)
	}
	checkVersion(t, stdout, wantSIMDLine(t, simdBuilt))
}

// TestMakeInstall installs prep with make into a staging DESTDIR under a
// PREFIX, as a package build would, and runs the installed binary: the
// Makefile builds with GOEXPERIMENT=simd, whatever the caller's
// environment.
func TestMakeInstall(t *testing.T) {
	testenv.NeedCommand(t, "make", "make")
	tmp := t.TempDir()
	stage, prefix := filepath.Join(tmp, "stage"), "/opt/prep"
	// BIN keeps the build out of the shared bin/; GOEXPERIMENT= shows that
	// the Makefile sets it itself.
	cmd := exec.Command("make", "-s", "-C", filepath.Join("..", ".."), "install",
		"BIN="+filepath.Join(tmp, "build", "prep"), "PREFIX="+prefix, "DESTDIR="+stage)
	cmd.Env = append(os.Environ(), "GOEXPERIMENT=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	installed := filepath.Join(stage, prefix, "bin", "prep")
	if !strings.Contains(string(out), "installed "+installed) {
		t.Errorf("make install said %q, want it to name %s", out, installed)
	}
	fi, err := os.Stat(installed)
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("installed binary: %v, mode %v; want 0755", err, fi)
	}
	version, err := exec.Command(installed, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", installed, err)
	}
	checkVersion(t, string(version), wantSIMDLine(t, true))
}

// TestSlowBuild: what prep version says for each kind of build and
// machine, and the warning a slow build gives at the start of a convert,
// once.
func TestSlowBuild(t *testing.T) {
	fast := fastPaths{arch: "amd64", cpu: "AVX-512", simdBuilt: true, resampler: "AVX-512", rgbCopy: "AVX-512 VBMI", decoders: true}
	goInstall := fastPaths{arch: "amd64", cpu: "AVX-512", resampler: "scalar", rgbCopy: "scalar", decoders: true}
	tests := []struct {
		name string
		f    fastPaths
		simd string
		slow []string
	}{
		{"fast", fast, "AVX-512: resampler, RGB copy (AVX-512 VBMI)", nil},
		{"no VBMI", fastPaths{arch: "amd64", cpu: "AVX-512", simdBuilt: true, resampler: "AVX-512", rgbCopy: "AVX2", decoders: true},
			"AVX-512: resampler; AVX2: RGB copy (this CPU lacks AVX-512 VBMI)", nil},
		{"go install on AVX-512", goInstall,
			"scalar: built without GOEXPERIMENT=simd, though this CPU has AVX-512 (rebuild: make install)",
			[]string{"built without GOEXPERIMENT=simd, the resampler runs its scalar loops on this AVX-512 CPU"}},
		{"go install on AVX2", fastPaths{arch: "amd64", cpu: "AVX2", resampler: "scalar", rgbCopy: "scalar", decoders: true},
			"scalar: built without GOEXPERIMENT=simd, though this CPU has AVX2 (rebuild: make install)",
			[]string{"built without GOEXPERIMENT=simd, the resampler runs its scalar loops on this AVX2 CPU"}},
		{"simd build on AVX2", fastPaths{arch: "amd64", cpu: "AVX2", simdBuilt: true, resampler: "AVX2", rgbCopy: "AVX2", decoders: true},
			"AVX2: resampler, RGB copy (this CPU lacks AVX-512)", nil},
		{"simd build on a CPU without AVX2", fastPaths{arch: "amd64", cpu: "none", simdBuilt: true, resampler: "scalar", rgbCopy: "scalar", decoders: true},
			"scalar: this CPU lacks AVX2 and AVX-512", nil},
		{"GODEBUG=cpu.avx512f=off", fastPaths{arch: "amd64", cpu: "AVX2", simdBuilt: true, resampler: "AVX2", rgbCopy: "AVX2", godebug: "cpu.avx512f=off", decoders: true},
			"AVX2: resampler, RGB copy (GODEBUG=cpu.avx512f=off)", nil},
		{"GODEBUG=cpu.avx512f=off,cpu.avx2=off", fastPaths{arch: "amd64", cpu: "none", simdBuilt: true, resampler: "scalar", rgbCopy: "scalar", godebug: "cpu.avx512f=off,cpu.avx2=off", decoders: true},
			"scalar: GODEBUG=cpu.avx512f=off,cpu.avx2=off", nil},
		{"arm64", fastPaths{arch: "arm64", cpu: "none", resampler: "scalar", rgbCopy: "scalar", decoders: true},
			"scalar: prep's SIMD loops are for amd64 (AVX2, AVX-512); this is arm64", nil},
		{"no cgo", fastPaths{arch: "amd64", cpu: "AVX-512", simdBuilt: true, resampler: "AVX-512", rgbCopy: "AVX-512 VBMI"},
			"AVX-512: resampler, RGB copy (AVX-512 VBMI)",
			[]string{"built without cgo, JPEG and PNG decode with Go's slower decoders"}},
	}
	for _, tt := range tests {
		if got := tt.f.simd(); got != tt.simd {
			t.Errorf("%s: simd line %q, want %q", tt.name, got, tt.simd)
		}
		if got := tt.f.slow(); !slices.Equal(got, tt.slow) {
			t.Errorf("%s: slow %q, want %q", tt.name, got, tt.slow)
		}
	}

	defer func(d func() fastPaths) { detectFastPaths = d }(detectFastPaths)
	for _, tt := range []struct {
		f    fastPaths
		want int
	}{{fast, 0}, {goInstall, 1}} {
		detectFastPaths = func() fastPaths { return tt.f }
		_, stderr, err := execute(t, "convert", "../../testdata/images/space", t.TempDir(), "--recipe", "resize=16")
		if err != nil {
			t.Fatal(err)
		}
		warning := "prep: warning: slow build: built without GOEXPERIMENT=simd, the resampler runs its scalar loops on this AVX-512 CPU; rebuild with `make install` (see prep version)\n"
		if n := strings.Count(stderr, "warning"); n != tt.want || tt.want == 1 && !strings.HasPrefix(stderr, warning) {
			t.Errorf("%+v: stderr %q, want the warning %d time(s) first", tt.f, stderr, tt.want)
		}
	}
}

// complete runs cobra's hidden __complete command, as the shell scripts
// do, and returns the values offered and the directive line.
func complete(t *testing.T, args ...string) ([]string, string) {
	t.Helper()
	stdout, _, err := execute(t, append([]string{"__complete"}, args...)...)
	if err != nil {
		t.Fatalf("__complete %q: %v", args, err)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	var values []string
	for _, l := range lines[:len(lines)-1] {
		v, _, _ := strings.Cut(l, "\t")
		values = append(values, v)
	}
	return values, lines[len(lines)-1]
}

// TestCompletion checks the values the shell is offered for flags and
// recipes, and that each shell gets a script.
func TestCompletion(t *testing.T) {
	var ops, opsNamed []string
	for _, op := range augment.Ops() {
		ops = append(ops, op.Name+"=")
		if strings.HasPrefix(op.Name, "r") {
			opsNamed = append(opsNamed, "blur=1,"+op.Name+"=")
		}
	}
	const noFile, noSpace, files = ":4", ":6", ":8" // cobra's directives
	tests := []struct {
		args      []string
		want      []string
		directive string
	}{
		{[]string{"convert", "--format", ""}, []string{"hdf5", "png", "wav"}, noFile},
		{[]string{"convert", "--order", ""}, []string{"shuffle", "sorted"}, noFile},
		{[]string{"convert", "--decoder", ""}, []string{"auto", "turbo", "go"}, noFile},
		{[]string{"convert", "--sample-format", ""}, []string{"s16", "f32"}, noFile},
		{[]string{"bench-read", "--via", ""}, []string{"raw", "hdf5"}, noFile},
		{[]string{"convert", "--recipe", ""}, ops, noSpace},
		{[]string{"convert", "--recipe", "blur=1,r"}, opsNamed, noSpace},
		{[]string{"convert", "--recipe", "resize=256,crop=224:random,hf"}, []string{"resize=256,crop=224:random,hflip="}, noSpace},
		{[]string{"convert", "--recipe", "resize=25"}, nil, noSpace},
		{[]string{"convert", "--recipe", "resize=256 | hf"}, []string{"resize=256 | hflip="}, noSpace},
		{[]string{"convert", "--recipe", "my-recipe"}, []string{"yaml", "yml", "json"}, files},
		{[]string{"completion", ""}, []string{"bash", "zsh", "fish", "powershell"}, noFile},
	}
	for _, tt := range tests {
		got, directive := complete(t, tt.args...)
		if !slices.Equal(got, tt.want) || directive != tt.directive {
			t.Errorf("prep __complete %q: %q %s, want %q %s", tt.args, got, directive, tt.want, tt.directive)
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		stdout, _, err := execute(t, "completion", shell)
		if err != nil || !strings.Contains(stdout, "__complete") || !strings.Contains(stdout, "prep") {
			t.Errorf("prep completion %s: %v, %d bytes that do not call prep __complete", shell, err, len(stdout))
		}
	}
	if _, _, err := execute(t, "completion", "tcsh"); !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), "want bash, zsh, fish or powershell") {
		t.Errorf("prep completion tcsh: %v, want a usage error naming the shells", err)
	}
}

// TestCompletedValuesAccepted holds the completed words to the flags'
// own checks: each is accepted, and the words a check's error lists
// ("want A, B or C") are exactly the ones completed.
func TestCompletedValuesAccepted(t *testing.T) {
	wantList := regexp.MustCompile(`want ([a-z0-9]+(?:, [a-z0-9]+)*(?: or [a-z0-9]+)?)`)
	// The input does not exist: a run gets past the flag checks and
	// stops where it looks for it.
	none := filepath.Join(t.TempDir(), "none")
	positional := map[string][]string{}
	for _, c := range newRoot().Commands() {
		// "convert SRC DST": SRC the missing input, DST a folder;
		// optional ones, "[DST]", left out.
		var args []string
		for _, a := range strings.Fields(c.Use)[1:] {
			if !strings.HasPrefix(a, "[") {
				args = append(args, t.TempDir())
			}
		}
		if len(args) > 0 {
			args[0] = none
			positional[c.Name()] = args
		}
	}
	for cmd, flags := range flagValues {
		if positional[cmd] == nil {
			t.Errorf("flagValues has %s, which is no command of prep taking arguments", cmd)
			continue
		}
		for flag, words := range flags {
			var values []string
			for _, w := range words {
				v, _, _ := strings.Cut(w, "\t")
				values = append(values, v)
				_, _, err := execute(t, append([]string{cmd, "--" + flag, v}, positional[cmd]...)...)
				if err == nil || strings.Contains(err.Error(), "--"+flag) {
					t.Errorf("prep %s --%s %s: %v, want an error about the missing input only", cmd, flag, v, err)
				}
			}
			_, _, err := execute(t, append([]string{cmd, "--" + flag, "bogus"}, positional[cmd]...)...)
			m := wantList.FindStringSubmatch(errString(err))
			if m == nil {
				t.Errorf("prep %s --%s bogus: %v, want \"want A, B or C\"", cmd, flag, err)
				continue
			}
			listed := strings.FieldsFunc(strings.ReplaceAll(m[1], " or ", ", "), func(r rune) bool { return r == ',' || r == ' ' })
			if !slices.Equal(slices.Sorted(slices.Values(listed)), slices.Sorted(slices.Values(values))) {
				t.Errorf("prep %s --%s: completes %q, its check wants %q", cmd, flag, values, listed)
			}
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestHelpRecipes: prep help recipes lists every op of augment's table
// (the one the parser looks names up in) with its syntax, what it does
// and an example that parses; its recipe file and command lines parse
// too, and convert's --help points to it.
func TestHelpRecipes(t *testing.T) {
	stdout, _, err := execute(t, "help", "recipes")
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range augment.Ops() {
		entry := "\n  " + op.Syntax + "\n" + wrap(op.Doc, "      ", 80) + "      e.g. " + op.Example + "  file: " + op.File + "\n"
		if !strings.Contains(stdout, entry) {
			t.Errorf("prep help recipes lacks %s as\n%s", op.Name, entry)
		}
	}
	examples := regexp.MustCompile(`e\.g\. (\S+)`).FindAllStringSubmatch(stdout, -1)
	if len(examples) != len(augment.Ops()) {
		t.Errorf("%d examples of ops, want one per op (%d)", len(examples), len(augment.Ops()))
	}
	for _, m := range examples {
		if _, err := augment.Parse(m[1]); err != nil {
			t.Errorf("example %s: %v", m[1], err)
		}
	}
	for _, m := range regexp.MustCompile(`--recipe "([^"]+)"`).FindAllStringSubmatch(stdout, -1) {
		if _, _, err := augment.ParseSplit(m[1]); err != nil {
			t.Errorf("command line recipe %s: %v", m[1], err)
		}
	}
	_, file, ok := strings.Cut(stdout, "  # recipe.yaml\n")
	file, _, _ = strings.Cut(file, "\n\n")
	yaml := filepath.Join(t.TempDir(), "recipe.yaml")
	if err := os.WriteFile(yaml, []byte(file), 0o644); !ok || err != nil {
		t.Fatalf("no recipe file in the help (%v)", err)
	}
	if r, _, err := loadRecipe(yaml); err != nil || !strings.HasPrefix(r.String(), "resize=256,crop=224:random,hflip=0.5,jitter=") {
		t.Errorf("the help's recipe file: %v, %v", r, err)
	}
	stdout, _, _ = execute(t, "convert", "--help")
	if !strings.Contains(stdout, "prep help recipes") {
		t.Errorf("prep convert --help does not point to prep help recipes:\n%s", stdout)
	}
	stdout, _, _ = execute(t, "--help")
	if !regexp.MustCompile(`Additional help topics:\n  prep recipes +The --recipe grammar`).MatchString(stdout) {
		t.Errorf("prep --help does not list the recipes topic:\n%s", stdout)
	}
}

// TestProgressBarFull: the bar of a finished run reads 100%, with a rate
// (no "?" placeholders) even for a run shorter than rateAfter.
func TestProgressBarFull(t *testing.T) {
	var buf bytes.Buffer
	progress, done := barProgress(&buf, 120)
	progress(convert.Progress{Items: 100, TotalItems: 404, Samples: 100, Bytes: 1e6})
	progress(convert.Progress{Items: 404, TotalItems: 404, Samples: 402, Bytes: 4e6, Skipped: 2})
	done()
	done()
	frames := strings.Split(strings.TrimRight(buf.String(), "\n "), "\r")
	last := frames[len(frames)-1]
	if !strings.HasPrefix(last, "404 / 404 items [") || !strings.Contains(last, "] 100.00% ") ||
		!regexp.MustCompile(`100\.00% \d+ items/s, [\d.]+ MB/s `).MatchString(last) {
		t.Errorf("last frame %q, want 404 / 404 items at 100.00%% with a rate", last)
	}
	if strings.Contains(buf.String(), "?") || strings.Contains(buf.String(), "p/s") {
		t.Errorf("the bar shows a placeholder: %q", buf.String())
	}
	// bench-read's bar of bytes, finished before pb knows a speed.
	buf.Reset()
	bar := newBar(&buf, -1, 1000).Set(pb.Bytes, true).Start()
	bar.Add64(1000)
	bar.Finish()
	if out := buf.String(); !strings.Contains(out, "100.00%") || strings.Contains(out, "?") || strings.Contains(out, "p/s") {
		t.Errorf("bar of bytes: %q, want 100.00%% and no placeholder", out)
	}
}

// TestProgressCountsSkipped: a run with a bad input reports, at its last
// progress, every item done, the skipped one included, so the bar ends
// full.
func TestProgressCountsSkipped(t *testing.T) {
	defer func(d time.Duration) { progressEvery = d }(progressEvery)
	progressEvery = 0
	src := t.TempDir()
	for _, f := range []string{"a.jpg", "b.jpg", "c.jpg"} {
		data, err := os.ReadFile("../../testdata/images/space/hubble.jpg")
		if err != nil {
			t.Fatal(err)
		}
		if f == "b.jpg" {
			data = data[:100]
		}
		if err := os.WriteFile(filepath.Join(src, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, stderr, err := execute(t, "convert", src, t.TempDir(), "--recipe", "resize=16", "--copies", "2", "--workers", "1", "--max-skipped", "100%")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "prep: 6/6 items, 4 samples, ") || !strings.HasSuffix(last, ", 2 skipped") {
		t.Errorf("last progress line %q, want 6/6 items, 4 samples, 2 skipped", last)
	}
}

// TestSummaryAfterResume: a resume reports the samples it converted, at
// their rate, apart from those it kept.
func TestSummaryAfterResume(t *testing.T) {
	dst := t.TempDir()
	args := []string{"convert", "../../testdata/images", dst, "--recipe", "resize=32,crop=32", "--items-per-shard", "3", "--copies", "2"}
	if _, _, err := execute(t, args...); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Read(dst)
	if err != nil {
		t.Fatal(err)
	}
	gone := m.Shards[1]
	if err := os.Remove(filepath.Join(dst, gone.File)); err != nil {
		t.Fatal(err)
	}
	stdout, _, err := execute(t, append(args, "--resume")...)
	if err != nil {
		t.Fatal(err)
	}
	kept := m.Samples - gone.Count
	want := regexp.MustCompile(`^converted ` + count(gone.Count, "sample") + ` \([\d.]+ KiB\) into 1 new shard in [\d.]+m?s: \d+ samples/s, [\d.]+ MB/s\n` +
		`kept ` + count(kept, "sample") + ` \([\d.]+ KiB\) in ` + count(len(m.Shards)-1, "shard") + ` from the earlier run: ` + count(m.Samples, "sample") + ` in all\n`)
	if !want.MatchString(stdout) {
		t.Errorf("summary after resume:\n%s\nwant it to match %s", stdout, want)
	}
	stdout, _, err = execute(t, append(args, "--resume", "--json")...)
	var sum convert.Summary
	if err != nil || json.Unmarshal([]byte(stdout), &sum) != nil {
		t.Fatalf("--json: %v: %s", err, stdout)
	}
	if sum.SamplesKept != m.Samples || sum.BytesKept != m.Bytes || sum.ShardsKept != len(m.Shards) {
		t.Errorf("a resume with nothing to do: kept %d samples, %d bytes, %d shards; want %d, %d, %d",
			sum.SamplesKept, sum.BytesKept, sum.ShardsKept, m.Samples, m.Bytes, len(m.Shards))
	}
}

// TestSummaryPlurals: one of anything reads in the singular.
func TestSummaryPlurals(t *testing.T) {
	var buf bytes.Buffer
	printSummary(&buf, "hdf5", &convert.Summary{
		Samples: 1, Bytes: 100, ShardsWritten: 1, Seconds: 0.5, SamplesPerSec: 2, MBPerSec: 0.0002,
		Skipped:  []manifest.Skipped{{Key: "a.jpg", Reason: "truncated"}},
		Ignored:  []manifest.Skipped{{Key: "notes.txt"}},
		Manifest: "out/manifest.json",
	})
	want := "converted 1 sample (100 B) into 1 new shard in 500ms: 2 samples/s, 0.0 MB/s\n" +
		"skipped 1 input (listed in the manifest):\n  a.jpg: truncated\n" +
		"ignored 1 file (listed in the manifest with why)\nmanifest: out/manifest.json\n"
	if buf.String() != want {
		t.Errorf("summary:\n%s\nwant:\n%s", buf.String(), want)
	}
}

// TestRawMessages: the messages a new user met raw (stat, strconv, an
// unknown --version, a merge that made the folder it did not find) say
// what is wrong and what to do (issue 28).
func TestRawMessages(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "shardz")
	tests := []struct {
		args []string
		code int
		want string // in stdout+stderr
	}{
		{[]string{"inspect", missing}, 1, "no such folder or file: give the folder prep convert wrote (it holds manifest.json)"},
		{[]string{"bench-read", missing}, 1, "bench-read " + missing + ": no such folder or file"},
		{[]string{"feed-test", missing, "--device", "host"}, 1, "feed-test " + missing + ": no such folder or file"},
		{[]string{"inspect", dir, "--rebuild", "abc"}, exitUsage, `--rebuild "abc": want a whole number (see prep inspect --help)`},
		{[]string{"convert", dir, missing, "--strict=maybe"}, exitUsage, `--strict "maybe": want true or false`},
		{[]string{"--version"}, 0, "prep " + version},
		{[]string{"merge-manifest", missing}, 1, "merge-manifest " + missing + ": no such folder: give the DST"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			stdout, stderr, code := prepRun(t, tt.args...)
			out := stdout + stderr
			if code != tt.code || !strings.Contains(out, tt.want) || strings.Contains(out, "strconv.") || strings.Contains(out, "stat ") {
				t.Errorf("exit %d, want %d with %q:\n%s", code, tt.code, tt.want, out)
			}
			if _, err := os.Stat(missing); err == nil {
				t.Fatalf("%v created %s", tt.args, missing)
			}
		})
	}
}

// TestBashCompletesAfterComma runs prep's bash script in bash, with the
// words bash gives it for `prep convert a b --recipe resize=256,c<TAB>`
// (bash breaks words at "="): it must offer crop=, which cobra's script
// filtered out because bash's printf %q escapes the comma (issue 32).
func TestBashCompletesAfterComma(t *testing.T) {
	bash := testenv.NeedCommand(t, "bash", "bash")
	testenv.NeedFile(t, "/usr/share/bash-completion/bash_completion", "make deps installs it (apt-get install bash-completion)")
	dir := t.TempDir()
	script, _, err := execute(t, "completion", "bash")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "prep.bash"), []byte(script), 0o644)
	os.Symlink(prepBinary(t), filepath.Join(dir, "prep"))
	for _, tt := range []struct {
		line  string
		words string // as bash splits them
		want  string
	}{
		{"prep convert a b --recipe resize=256,c", "prep convert a b --recipe resize = 256,c", "256,crop="},
		{"prep convert a b --recipe resize=256,crop=224,hf", "prep convert a b --recipe resize = 256,crop = 224,hf", "224,hflip="},
	} {
		sh := `source /usr/share/bash-completion/bash_completion; source prep.bash; PATH=$PWD:$PATH
COMP_LINE="$1"; COMP_POINT=${#1}; read -ra COMP_WORDS <<<"$2"; COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
__start_prep prep 2>/dev/null; printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command(bash, "-c", sh, "bash", tt.line, tt.words)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil || strings.TrimSpace(string(out)) != tt.want {
			t.Errorf("%s<TAB>: %q (%v), want %q", tt.line, out, err, tt.want)
		}
	}
}
