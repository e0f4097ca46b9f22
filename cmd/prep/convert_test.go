package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prep-dev/prep/augment"
	"github.com/prep-dev/prep/cloudsrc/gcstest"
	"github.com/prep-dev/prep/convert"
	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/hdf5"
	"github.com/prep-dev/prep/formats/manifest"
	"github.com/prep-dev/prep/media/imgdec"
)

var (
	cliOnce sync.Once
	cliPath string
	cliErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if cliPath != "" {
		os.RemoveAll(filepath.Dir(cliPath))
	}
	os.Exit(code)
}

// prepBinary builds the real binary once, for the tests that signal it.
func prepBinary(t *testing.T) string {
	t.Helper()
	cliOnce.Do(func() {
		dir, err := os.MkdirTemp("", "prep-cli-")
		if err != nil {
			cliErr = err
			return
		}
		cliPath = filepath.Join(dir, "prep")
		out, err := exec.Command("go", "build", "-o", cliPath, ".").CombinedOutput()
		if err != nil {
			cliErr = errors.New(string(out))
		}
	})
	if cliErr != nil {
		t.Fatalf("build prep: %v", cliErr)
	}
	return cliPath
}

// prepRun runs the binary and returns stdout, stderr and the exit code.
func prepRun(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(prepBinary(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

const demoRecipe = "resize=256,crop=224:random,hflip=0.5"

func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

func TestConvertInspectVerify(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "out")
	stdout, stderr, code := prepRun(t, "convert", "../../testdata/images", dst, "--recipe", demoRecipe, "--seed", "7", "--copies", "2", "--json", "--items-per-shard", "6")
	if code != 0 {
		t.Fatalf("convert exit %d: %s", code, stderr)
	}
	var sum struct {
		Samples int `json:"samples"`
		Skipped []any
	}
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatalf("--json output %q: %v", stdout, err)
	}
	if sum.Samples != 16 || len(sum.Skipped) != 0 {
		t.Fatalf("summary %+v", sum)
	}
	if !strings.Contains(stdout, `"skipped": []`) || !strings.Contains(stdout, `"ignored": []`) {
		t.Errorf("--json: empty skip and ignore lists must print as [], got:\n%s", stdout)
	}
	m, err := manifest.Read(dst)
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := os.ReadFile(filepath.Join(dst, manifest.FileName)); bytes.Contains(raw, []byte("null")) {
		t.Errorf("manifest holds a null:\n%s", raw)
	}
	if len(m.Shards) != 3 || m.Shards[0].Datasets[0].Shape[1] != 224 {
		t.Fatalf("manifest shards %+v", m.Shards)
	}
	if out, _, code := prepRun(t, "inspect", dst, "--verify"); code != 0 || !strings.Contains(out, "verified 3 shards") {
		t.Fatalf("inspect --verify exit %d: %s", code, out)
	}
	// One shard: the run it records, its sample count, and --verify
	// against the manifest beside it.
	shard0 := filepath.Join(dst, m.Shards[0].File)
	out, stderr, code := prepRun(t, "inspect", shard0, "--verify")
	for _, want := range []string{
		"shard-000000.h5: 6 samples, prep " + version + ", seed 7\n",
		"recipe: " + demoRecipe + "\n",
		"classes (" + strconv.Itoa(len(m.Classes)) + "): " + strings.Join(m.Classes, ", ") + "\n",
		"verified shard-000000.h5: checksum and size match the manifest",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("inspect SHARD --verify: exit %d, output lacks %q:\n%s%s", code, want, out, stderr)
		}
	}
	// A flipped byte in a shard is caught, in the folder and alone.
	path := filepath.Join(dst, m.Shards[1].File)
	b, _ := os.ReadFile(path)
	b[len(b)/2] ^= 0xff
	os.WriteFile(path, b, 0o644)
	out, stderr, code = prepRun(t, "inspect", dst, "--verify")
	if code != exitFailure || !strings.Contains(out, "FAIL "+m.Shards[1].File+": sha256 mismatch") || !strings.Contains(stderr, "--resume") {
		t.Fatalf("corrupt shard: exit %d\n%s\n%s", code, out, stderr)
	}
	out, stderr, code = prepRun(t, "inspect", path, "--verify")
	if code != exitFailure || !strings.Contains(out, "FAIL "+m.Shards[1].File+": sha256 mismatch") || !strings.Contains(stderr, "--resume") {
		t.Fatalf("corrupt single shard: exit %d\n%s\n%s", code, out, stderr)
	}
	// Without a manifest beside it, a single shard cannot be verified.
	alone := filepath.Join(t.TempDir(), m.Shards[0].File)
	data, err := os.ReadFile(shard0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := prepRun(t, "inspect", alone, "--verify"); code != exitUsage || !strings.Contains(stderr, "no manifest.json beside the shard") {
		t.Fatalf("shard without manifest: exit %d: %s", code, stderr)
	}
}

// TestManifestShardNames: every command that opens shards by a manifest's
// names refuses one that leaves the folder, or that gives samples no file,
// instead of reading (and verifying) files elsewhere or skipping them.
func TestManifestShardNames(t *testing.T) {
	dir, m := convertedShards(t)
	good, err := os.ReadFile(filepath.Join(dir, manifest.FileName))
	if err != nil {
		t.Fatal(err)
	}
	// A file outside the folder with the bytes the manifest records.
	data, err := os.ReadFile(filepath.Join(dir, m.Shards[0].File))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "..", "outside.h5"), data, 0o644)
	path := filepath.Join(dir, manifest.FileName)
	for _, tt := range []struct {
		name string
		edit func(s []manifest.Shard)
		want string
	}{
		{"outside", func(s []manifest.Shard) { s[0].File = "../outside.h5" }, `shard entry 0 (index 0): file "../outside.h5" is not a plain file name`},
		{"no file", func(s []manifest.Shard) { s[1].File = "" }, "shard entry 1 (index 1) holds 6 samples but names no file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bad, err := manifest.Parse(good)
			if err != nil {
				t.Fatal(err)
			}
			tt.edit(bad.Shards)
			b, err := manifest.Marshal(bad)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(path, b, 0o644)
			defer os.WriteFile(path, good, 0o644)
			for _, args := range [][]string{
				{"inspect", dir, "--verify"},
				{"inspect", filepath.Join(dir, m.Shards[2].File), "--verify"},
				{"bench-read", dir},
				{"feed-test", dir, "--device", "host"},
				{"convert", "../../testdata/images", dir, "--recipe", demoRecipe, "--seed", "7", "--copies", "2", "--items-per-shard", "6", "--resume"},
			} {
				stdout, stderr, code := prepRun(t, args...)
				if code != exitFailure || !strings.Contains(stderr, path+": "+tt.want) {
					t.Errorf("%v: exit %d (want %d), stderr:\n%s\nwant it to contain %q\nstdout:\n%s", args, code, exitFailure, stderr, path+": "+tt.want, stdout)
				}
			}
		})
	}
	// A shard whose inputs were all skipped has no file, and is not
	// counted as verified.
	empty, err := manifest.Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	empty.Shards[1].File, empty.Shards[1].Count = "", 0
	b, err := manifest.Marshal(empty)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path, b, 0o644)
	if out, stderr, code := prepRun(t, "inspect", dir, "--verify"); code != 0 || !strings.Contains(out, "verified 2 shards") {
		t.Errorf("inspect --verify with a shard of skipped inputs: exit %d\n%s%s", code, out, stderr)
	}
}

func TestConvertErrors(t *testing.T) {
	foreign := t.TempDir()
	os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("x"), 0o644)
	mixed := filepath.Join(t.TempDir(), "mixed.csv")
	os.WriteFile(mixed, []byte("path,label\na.jpg,4\nb.jpg,7\nc.jpg,cat\n"), 0o644)
	mixedDTypes := t.TempDir()
	for name, from := range map[string]string{"a.npy": "f4_le.npy", "b.npy": "i4_le.npy"} {
		if data, err := os.ReadFile("../../testdata/npy/ok/" + from); err != nil || os.WriteFile(filepath.Join(mixedDTypes, name), data, 0o644) != nil {
			t.Fatal(err)
		}
	}
	cutVideo := t.TempDir()
	if data, err := os.ReadFile("../../testdata/video/truncated.mkv"); err != nil || os.WriteFile(filepath.Join(cutVideo, "cut.mkv"), data, 0o644) != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown op", []string{"convert", "../../testdata/images", t.TempDir(), "--recipe", "resize=256,flip=0.5"}, exitUsage, `unknown op "flip"`},
		{"bad value", []string{"convert", "../../testdata/images", t.TempDir(), "--recipe", "hflip=1.5"}, exitUsage, "hflip"},
		{"bad flag", []string{"convert", "../../testdata/images", t.TempDir(), "--wrokers", "2"}, exitUsage, "unknown flag"},
		{"bad size", []string{"convert", "../../testdata/images", t.TempDir(), "--shard-size", "lots"}, exitUsage, "--shard-size"},
		{"bad format", []string{"convert", "../../testdata/images", t.TempDir(), "--format", "jpeg"}, exitUsage, "hdf5, png or wav"},
		{"missing source", []string{"convert", "/nonexistent/photos", t.TempDir()}, exitFailure, "/nonexistent/photos"},
		{"foreign files", []string{"convert", "../../testdata/images", foreign}, exitFailure, "notes.txt"},
		{"args", []string{"convert", "only-one"}, exitUsage, "convert takes SRC DST, got 1"},
		{"strict", []string{"convert", "../../testdata/edge", t.TempDir(), "--strict"}, exitFailure, "--strict"},
		{"plan, mixed dtypes", []string{"plan", mixedDTypes, "--order", "sorted", "--probe-size", "0"}, exitFailure,
			"prep: plan: timing a run of the sample: " + filepath.Join(mixedDTypes, "b.npy") + ": incompatible sample: field data int32[3 4] does not match the shard's data float32[3 4]; shard 0 started with a.npy: one shard holds one kind of sample"},
		{"mixed dtypes", []string{"convert", mixedDTypes, t.TempDir(), "--order", "sorted"}, exitFailure,
			filepath.Join(mixedDTypes, "b.npy") + ": incompatible sample: field data int32[3 4] does not match the shard's data float32[3 4]; shard 0 started with a.npy: one shard holds one kind of sample, so convert such inputs in separate runs"},
		{"strict cut video", []string{"convert", cutVideo, t.TempDir(), "--strict"}, exitFailure, "cut.mkv: ffmpeg: video cut off or damaged: 23 frames decoded"},
		{"resume and overwrite", []string{"convert", "/nonexistent/photos", t.TempDir(), "--resume", "--overwrite"}, exitUsage, "pass one of them"},
		{"huge resize", []string{"convert", "../../testdata/images", t.TempDir(), "--recipe", "resize=99999999"}, exitUsage, "resize=99999999: size \"99999999\": over the limit of 16384 pixels a side"},
		{"huge crop", []string{"convert", "../../testdata/images", t.TempDir(), "--recipe", "resize=256,crop=99999"}, exitUsage, "crop=99999: size \"99999\": over the limit of 16384"},
		{"huge rrc", []string{"convert", "../../testdata/images", t.TempDir(), "--recipe", "rrc=99999"}, exitUsage, "rrc=99999: size \"99999\": over the limit of 16384"},
		{"max pixels negative", []string{"convert", "../../testdata/images", t.TempDir(), "--max-pixels", "-1"}, exitUsage, "--max-pixels -1: want a positive number of pixels"},
		{"max pixels zero", []string{"convert", "../../testdata/images", t.TempDir(), "--max-pixels", "0"}, exitUsage, "--max-pixels 0: want a positive number of pixels"},
		{"mixed labels", []string{"convert", mixed, t.TempDir()}, exitFailure, mixed + `:4: label "cat" is a class name, but 2 other labels are integers: use all integers (class indices) or all class names`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := prepRun(t, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d (want %d), stderr:\n%s\nwant it to contain %q", code, tt.code, stderr, tt.want)
			}
			if strings.Count(strings.TrimSpace(stderr), "\n") > 0 && tt.code != exitUsage {
				t.Errorf("error is more than one line:\n%s", stderr)
			}
		})
	}
}

// TestBadInputsListed: bad inputs are skipped and listed with their
// reasons; a run that skips more than --max-skipped of its inputs (5 of
// the 25 here) still writes everything, then exits 1 with the count.
func TestBadInputsListed(t *testing.T) {
	dst := t.TempDir()
	stdout, stderr, code := prepRun(t, "convert", "../../testdata/edge", dst, "--overwrite", "--recipe", "resize=32x32")
	want := "prep: 5 of 26 inputs skipped (19.2%), over --max-skipped 1%: the shards and " + dst + "/manifest.json are written; fix or remove the inputs the summary lists"
	if code != exitFailure || !strings.Contains(stderr, want) {
		t.Fatalf("exit %d, stderr %q; want exit 1 and %q", code, stderr, want)
	}
	for _, tt := range []struct {
		share string
		code  int
	}{{"20%", exitOK}, {"19.1%", exitFailure}, {"100%", exitOK}} {
		if _, stderr, code := prepRun(t, "convert", "../../testdata/edge", t.TempDir(), "--recipe", "resize=32x32", "--max-skipped", tt.share); code != tt.code {
			t.Errorf("--max-skipped %s: exit %d, want %d: %s", tt.share, code, tt.code, stderr)
		}
	}
	m, err := manifest.Read(dst)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, s := range m.Skipped {
		reasons[s.Key] = s.Reason
	}
	for key, want := range map[string]string{
		"empty.jpg":       "empty file",
		"text.jpg":        "not an image prep decodes",
		"truncated.jpg":   "truncated JPEG",
		"huge_header.png": "over the 100 Mpixel limit",
	} {
		if !strings.Contains(reasons[key], want) {
			t.Errorf("%s: reason %q, want %q", key, reasons[key], want)
		}
		if !strings.Contains(stdout, key) {
			t.Errorf("summary does not list %s:\n%s", key, stdout)
		}
	}
	if m.Samples == 0 || m.Samples+len(m.Skipped) != m.Items {
		t.Errorf("samples %d + skipped %d != items %d", m.Samples, len(m.Skipped), m.Items)
	}
}

// TestInputListUnsupported: an input list naming files no handler takes
// (a README, a .psd, a name without extension) lists them as ignored, as
// a folder scan does, instead of crashing mid-run and leaving a .tmp.
func TestInputListUnsupported(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"space/rocket.jpg", "everyday/coffee.png"} {
		data, err := os.ReadFile(filepath.Join("../../testdata/images", name))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, filepath.Base(name)), data, 0o644)
	}
	for _, name := range []string{"README", "layers.psd", "notes.md"} {
		os.WriteFile(filepath.Join(dir, name), []byte("not an image"), 0o644)
	}
	os.WriteFile(filepath.Join(dir, "in.csv"), []byte("path,label\nREADME,0\nrocket.jpg,1\nlayers.psd,1\ncoffee.png,0\nnotes.md,2\n"), 0o644)
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"probe", nil},
		{"items per shard", []string{"--items-per-shard", "1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "out")
			stdout, stderr, code := prepRun(t, append([]string{"convert", filepath.Join(dir, "in.csv"), dst, "--recipe", "resize=32x32"}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !strings.Contains(stdout, "ignored 3 files (listed in the manifest with why)") {
				t.Errorf("summary does not count the ignored files:\n%s", stdout)
			}
			m, err := manifest.Read(dst)
			if err != nil {
				t.Fatal(err)
			}
			var ignored []string
			for _, s := range m.Ignored {
				ignored = append(ignored, s.Key)
			}
			if slices.Sort(ignored); !slices.Equal(ignored, []string{"README", "layers.psd", "notes.md"}) || m.Samples != 2 {
				t.Errorf("ignored %v, samples %d; want README, layers.psd, notes.md and 2 samples", ignored, m.Samples)
			}
			for name := range readDir(t, dst) {
				if formats.IsTemp(name) {
					t.Errorf("%s left in DST", name)
				}
			}
		})
	}
}

// TestSIGINTThenResume interrupts the real binary mid-run: it must exit
// 130 and leave no temp file and no manifest; --resume must then give the
// bytes of an uninterrupted run.
//
// The photos come from a fake bucket. In the interrupted run, a proxy holds
// the download of the last one, whose 12 copies fill shards 14 and 15, for
// longer than the test may take: the run writes shards 0 to 12 (13 too,
// were a shard closed before the next one's first item), then certainly
// waits until the signal ends it.
func TestSIGINTThenResume(t *testing.T) {
	const src, last, before = "gs://raw/photos", "photos/space/rocket.jpg", "shard-000012.h5"
	srv := gcstest.NewServer(t, seedPhotos(t)...)
	args := func(dst string) []string {
		return []string{"convert", src, dst, "--recipe", demoRecipe, "--seed", "3", "--order", "sorted",
			"--copies", "12", "--items-per-shard", "6", "--workers", "1", "--decoder", "go"}
	}
	clean := t.TempDir()
	if _, stderr, code := prepRun(t, args(clean)...); code != 0 {
		t.Fatalf("clean run exit %d: %s", code, stderr)
	}
	want := readDir(t, clean)
	if len(want) != 18 {
		t.Fatalf("clean run wrote %d files, want 16 shards, the manifest and the input list", len(want))
	}
	direct := srv.URL
	hold := &gcstest.Proxy{StallPath: last, Stall: time.Hour}
	srv.Use(t, hold)
	dst := t.TempDir()
	cmd := exec.Command(prepBinary(t), append(args(dst), "--io-timeout", "1h", "--object-timeout", "1h")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(2 * time.Minute)
	for waiting := true; waiting; {
		select {
		case err := <-exited:
			t.Fatalf("the run ended (%v) before it wrote %s: it must wait for %s; stderr:\n%s", err, before, last, stderr.String())
		case <-timeout:
			cmd.Process.Kill()
			<-exited
			t.Fatalf("no %s after 2 minutes; %s holds %v; stderr:\n%s", before, dst, slices.Sorted(maps.Keys(readDir(t, dst))), stderr.String())
		case <-tick.C:
			_, err := os.Stat(filepath.Join(dst, before))
			waiting = err != nil
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	var err error
	select {
	case err = <-exited:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("the run did not stop within a minute of SIGINT; stderr:\n%s", stderr.String())
	}
	t.Setenv("STORAGE_EMULATOR_HOST", direct)
	if hold.Stalled() == 0 {
		t.Errorf("no request for %s was held: the signal may have come at any point", last)
	}
	partial := readDir(t, dst)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Fatalf("interrupted run: %v (want exit 130); stderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "prep: interrupted; ") || !strings.Contains(stderr.String(), "--resume") ||
		strings.Contains(stderr.String(), "context canceled") {
		t.Errorf("interrupt message: want \"prep: interrupted; ...\" naming --resume, without \"context canceled\":\n%s", stderr.String())
	}
	if _, ok := partial[manifest.FileName]; ok {
		t.Errorf("an interrupted run wrote %s", manifest.FileName)
	}
	for name, data := range partial {
		if strings.HasSuffix(name, ".tmp") {
			t.Errorf("temp file %s left behind", name)
		}
		if strings.HasPrefix(name, "shard-") && !bytes.Equal(data, want[name]) {
			t.Errorf("%s is under its final name but differs from the clean run", name)
		}
	}
	for i := range 16 {
		name := convert.ShardName(i, ".h5")
		if _, ok := partial[name]; ok != (i <= 12) && i != 13 {
			t.Errorf("the interrupted run left %s: %v; want shards 0 to 12 (13 may be), none that needs %s", name, ok, last)
		}
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
	// A second resume has nothing left to do, and says so.
	stdout, errOut, code := prepRun(t, append(args(dst), "--resume")...)
	if code != 0 || !strings.Contains(stdout, "nothing to convert: all ") {
		t.Errorf("resume of a finished run: exit %d, stdout %q, stderr %q", code, stdout, errOut)
	}
}

func TestWorkersDoNotChangeOutput(t *testing.T) {
	var runs []map[string][]byte
	for _, w := range []string{"1", "8"} {
		dst := t.TempDir()
		if _, stderr, code := prepRun(t, "convert", "../../testdata/images", dst, "--recipe", demoRecipe+",rotate=10,jitter=0.4/0.4/0.4/0.1", "--seed", "11",
			"--copies", "3", "--items-per-shard", "5", "--workers", w, "--io-workers", w); code != 0 {
			t.Fatalf("workers %s: exit %d: %s", w, code, stderr)
		}
		runs = append(runs, readDir(t, dst))
	}
	if len(runs[0]) != 7 {
		t.Fatalf("expected 5 shards + manifest + input list, got %d files", len(runs[0]))
	}
	for name, data := range runs[0] {
		if !bytes.Equal(data, runs[1][name]) {
			t.Errorf("%s differs between --workers 1 and 8", name)
		}
	}
}

// TestThreeTasksEqualOneProcess runs three tasks as separate processes
// into one folder; after merge-manifest the folder must equal, byte for
// byte, what one process writes.
func TestThreeTasksEqualOneProcess(t *testing.T) {
	base := []string{"../../testdata/images", "", "--recipe", demoRecipe, "--seed", "5", "--copies", "3", "--items-per-shard", "4"}
	one := t.TempDir()
	args := append([]string{"convert"}, base...)
	args[2] = one
	if _, stderr, code := prepRun(t, args...); code != 0 {
		t.Fatalf("one process: exit %d: %s", code, stderr)
	}
	split := t.TempDir()
	for _, i := range []string{"2", "0", "1"} {
		args := append([]string{"convert"}, base...)
		args[2] = split
		// --no-merge: merge-manifest alone writes manifest.json here.
		cmd := exec.Command(prepBinary(t), append(args, "--task-count", "3", "--no-merge")...)
		cmd.Env = append(os.Environ(), "BATCH_TASK_INDEX="+i)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("task %s: %v\n%s", i, err, out)
		}
	}
	if out, stderr, code := prepRun(t, "merge-manifest", split); code != 0 || !strings.Contains(out, "merged 6 shards") {
		t.Fatalf("merge-manifest exit %d: %s %s", code, out, stderr)
	}
	got := readDir(t, split)
	for name := range got {
		if strings.HasPrefix(name, "manifest-task-") {
			delete(got, name)
		}
	}
	want := readDir(t, one)
	if len(got) != len(want) {
		t.Fatalf("%d files after merge, %d from one process", len(got), len(want))
	}
	for name, data := range want {
		if !bytes.Equal(data, got[name]) {
			t.Errorf("%s differs", name)
		}
	}
	os.Remove(filepath.Join(split, "manifest-task-00001.json"))
	if _, stderr, code := prepRun(t, "merge-manifest", split); code != exitFailure || !strings.Contains(stderr, "missing tasks 1") {
		t.Fatalf("merge with a missing part: exit %d: %s", code, stderr)
	}
}

// TestRoundTripRecipe converts the test photos with the demo recipe and
// checks every stored sample, byte for byte, against a decode through
// the same imgdec path as convert's default --decoder auto and the parsed
// recipe applied with the sample's own generator
// hash(seed, key, copy); and the labels and keys datasets against the class
// folders and input keys.
func TestRoundTripRecipe(t *testing.T) {
	for _, order := range []string{"sorted", "shuffle"} {
		t.Run(order, func(t *testing.T) { roundTripRecipe(t, order) })
	}
}

// roundTripRecipe checks one conversion. Under --order sorted the samples
// follow the plan item by item; under shuffle, round r (positions
// [r·E, (r+1)·E) for E inputs) holds copy r of every input once, and each
// sample is checked against the input its key names.
func roundTripRecipe(t *testing.T, order string) {
	const src, seed, copies = "../../testdata/images", 7, 2
	dst := filepath.Join(t.TempDir(), "out")
	if _, stderr, code := prepRun(t, "convert", src, dst, "--recipe", demoRecipe, "--seed", strconv.Itoa(seed),
		"--copies", strconv.Itoa(copies), "--items-per-shard", "5", "--order", order); code != 0 {
		t.Fatalf("convert exit %d: %s", code, stderr)
	}
	m, err := manifest.Read(dst)
	if err != nil {
		t.Fatal(err)
	}
	if m.Order != order {
		t.Fatalf("manifest order %q, want %q", m.Order, order)
	}
	recipe, err := augment.Parse(demoRecipe)
	if err != nil {
		t.Fatal(err)
	}
	// convert's decoder for --decoder auto: libjpeg-turbo scaled in the
	// DCT domain, reporting the full-size geometry the resize maps.
	decode := convert.ImgdecDecoder(imgdec.Options{Decoder: imgdec.DecoderAuto})

	// The plan, independently: sorted class folders give the labels,
	// sorted keys the order, each input its copies in turn.
	type item struct {
		key   string // input key
		copy  int
		label int64
	}
	var want []item
	classes, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for ci, c := range classes { // os.ReadDir sorts by name
		names = append(names, c.Name())
		files, err := os.ReadDir(filepath.Join(src, c.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			for k := range copies {
				want = append(want, item{c.Name() + "/" + f.Name(), k, int64(ci)})
			}
		}
	}
	if !slices.Equal(m.Classes, names) {
		t.Fatalf("manifest classes %q, folders %q", m.Classes, names)
	}
	byKey := map[string]item{}
	for _, w := range want {
		byKey[w.key+"#c"+strconv.Itoa(w.copy)] = w
	}
	inputs := len(want) / copies
	seen := map[string]bool{}

	n := 0
	for _, s := range m.Shards {
		path := filepath.Join(dst, s.File)
		ds := map[string]formats.DatasetInfo{}
		for _, d := range s.Datasets {
			ds[d.Name] = d
		}
		data, labels, keys := ds["data"], ds["labels"], ds["keys"]
		if data.Shape[0] != s.Count || labels.Shape[0] != s.Count || keys.Shape[0] != s.Count {
			t.Fatalf("%s: %d samples, datasets %+v", s.File, s.Count, s.Datasets)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		labelBytes := make([]byte, 8*s.Count)
		if err := hdf5.ReadDataset(path, "labels", labelBytes); err != nil {
			t.Fatal(err)
		}
		width, err := strconv.Atoi(strings.TrimPrefix(string(keys.DType), "S"))
		if err != nil {
			t.Fatalf("%s: keys dtype %s", s.File, keys.DType)
		}
		keyBytes := make([]byte, width*s.Count)
		if err := hdf5.ReadDataset(path, "keys", keyBytes); err != nil {
			t.Fatal(err)
		}
		size := data.Size / int64(s.Count)
		for i := range s.Count {
			if n >= len(want) {
				t.Fatalf("more samples than the %d planned", len(want))
			}
			w := want[n]
			gotKey := string(bytes.TrimRight(keyBytes[i*width:(i+1)*width], "\x00"))
			if order == "shuffle" {
				var ok bool
				if w, ok = byKey[gotKey]; !ok || seen[gotKey] || w.copy != n/inputs {
					t.Fatalf("%s sample %d: key %q unknown, seen before, or not of round %d", s.File, i, gotKey, n/inputs)
				}
				seen[gotKey] = true
			}
			n++
			if got := int64(binary.LittleEndian.Uint64(labelBytes[8*i:])); got != w.label {
				t.Errorf("%s sample %d (%s): label %d, want %d", s.File, i, w.key, got, w.label)
			}
			wantKey := w.key + "#c" + strconv.Itoa(w.copy)
			if gotKey != wantKey {
				t.Errorf("%s sample %d: key %q, want %q", s.File, i, gotKey, wantKey)
			}
			file, err := os.ReadFile(filepath.Join(src, w.key))
			if err != nil {
				t.Fatal(err)
			}
			img, scaled, err := decode(file, recipe.MinSide())
			if err != nil {
				t.Fatalf("%s: %v", w.key, err)
			}
			out, _ := recipe.ApplyScaled(img, scaled, convert.NewRand(seed, w.key, w.copy), new(augment.Buffers))
			wantPix := convert.RGBTensor(out)
			if !slices.Equal(data.Shape[1:], wantPix.Shape) {
				t.Fatalf("%s: sample shape %v, recipe gives %v", wantKey, data.Shape[1:], wantPix.Shape)
			}
			off := data.Offset + int64(i)*size
			if !bytes.Equal(raw[off:off+size], wantPix.Data) {
				t.Errorf("%s sample %d (%s): pixels differ from decode + recipe", s.File, i, wantKey)
			}
		}
	}
	if n != len(want) {
		t.Fatalf("shards hold %d samples, want %d", n, len(want))
	}
}

// TestProgressLog: off a terminal, convert logs one line per interval;
// the interval is shortened, not waited for.
func TestProgressLog(t *testing.T) {
	defer func(d time.Duration) { progressEvery = d }(progressEvery)
	var buf bytes.Buffer
	progressEvery = time.Hour
	progress, done := newProgress(&buf)
	progress(convert.Progress{Items: 1, TotalItems: 10, Samples: 1, Bytes: 1e6})
	done()
	if buf.Len() != 0 {
		t.Fatalf("logged before the interval passed: %q", buf.String())
	}
	progressEvery = 0
	progress, done = newProgress(&buf)
	progress(convert.Progress{Items: 3, TotalItems: 10, Samples: 6, Bytes: 3e6, Skipped: 1})
	progress(convert.Progress{Items: 10, TotalItems: 10, Samples: 19, Bytes: 9e6, Skipped: 1})
	done()
	done() // may be called twice
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %q", buf.String())
	}
	for i, want := range []string{"prep: 3/10 items, 6 samples, ", "prep: 10/10 items, 19 samples, "} {
		if !strings.HasPrefix(lines[i], want) || !strings.Contains(lines[i], " MB/s, ") || !strings.HasSuffix(lines[i], ", 1 skipped") {
			t.Errorf("line %d = %q, want %q... MB/s, 1 skipped", i, lines[i], want)
		}
	}
}

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{{0, "0 shards"}, {1, "1 shard"}, {2, "2 shards"}} {
		if got := count(tc.n, "shard"); got != tc.want {
			t.Errorf("count(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
