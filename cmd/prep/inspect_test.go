package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prep-dev/prep/formats/manifest"
)

var idLine = regexp.MustCompile(`(?m)^dataset id: ([0-9a-f]{64})$`)

// TestDatasetIDAcrossRuns converts one dataset with 1 and 3 workers and
// as 3 tasks (merged by the last to finish, and again by merge-manifest):
// every manifest carries the same dataset ID, the one its shards give,
// and inspect prints it; another seed gives another ID.
func TestDatasetIDAcrossRuns(t *testing.T) {
	base := []string{"../../testdata/images", "", "--recipe", demoRecipe, "--seed", "5", "--copies", "3", "--items-per-shard", "4"}
	run := func(dst string, extra ...string) {
		t.Helper()
		args := append([]string{"convert"}, base...)
		args[2] = dst
		if _, stderr, code := prepRun(t, append(args, extra...)...); code != 0 {
			t.Fatalf("convert %v: exit %d: %s", extra, code, stderr)
		}
	}
	var dirs []string
	for _, w := range []string{"1", "3"} {
		dst := t.TempDir()
		run(dst, "--workers", w)
		dirs = append(dirs, dst)
	}
	split := t.TempDir()
	for _, i := range []string{"2", "0", "1"} {
		args := append([]string{"convert"}, base...)
		args[2] = split
		cmd := exec.Command(prepBinary(t), append(args, "--task-count", "3")...)
		cmd.Env = append(os.Environ(), "BATCH_TASK_INDEX="+i)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("task %s: %v\n%s", i, err, out)
		}
	}
	dirs = append(dirs, split)
	var ids []string
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, manifest.FileName)); err != nil {
			// The last task did not merge (an older convert): merge here.
			if _, stderr, code := prepRun(t, "merge-manifest", dir); code != 0 {
				t.Fatalf("merge-manifest: exit %d: %s", code, stderr)
			}
		}
		m, err := manifest.Read(dir)
		if err != nil {
			t.Fatal(err)
		}
		if m.DatasetID == "" || m.DatasetID != manifest.DatasetID(m) {
			t.Fatalf("%s: dataset_id %q, its shards give %q", dir, m.DatasetID, manifest.DatasetID(m))
		}
		stdout, stderr, code := prepRun(t, "inspect", dir)
		got := idLine.FindStringSubmatch(stdout)
		if code != 0 || got == nil || got[1] != m.DatasetID {
			t.Fatalf("inspect %s: exit %d, want the line \"dataset id: %s\":\n%s%s", dir, code, m.DatasetID, stdout, stderr)
		}
		ids = append(ids, m.DatasetID)
	}
	if ids[0] != ids[1] || ids[0] != ids[2] {
		t.Errorf("dataset ids differ: --workers 1 %s, --workers 3 %s, 3 tasks %s", ids[0], ids[1], ids[2])
	}
	// merge-manifest run by hand writes the same ID.
	if _, stderr, code := prepRun(t, "merge-manifest", split); code != 0 {
		t.Fatalf("merge-manifest: exit %d: %s", code, stderr)
	}
	if m, err := manifest.Read(split); err != nil || m.DatasetID != ids[0] {
		t.Errorf("after merge-manifest: id %v, %v; want %s", m.DatasetID, err, ids[0])
	}
	for _, part := range []string{"manifest-task-00000.json", "manifest-task-00002.json"} {
		data, err := os.ReadFile(filepath.Join(split, part))
		if err != nil || strings.Contains(string(data), "dataset_id") {
			t.Errorf("%s: %v; a task's part must carry no dataset id of its own", part, err)
		}
	}
	other := t.TempDir()
	args := append([]string{"convert"}, base...)
	args[2] = other
	args[6] = "6" // --seed
	if _, stderr, code := prepRun(t, args...); code != 0 {
		t.Fatalf("seed 6: exit %d: %s", code, stderr)
	}
	if m, _ := manifest.Read(other); m == nil || m.DatasetID == ids[0] {
		t.Errorf("another seed kept the dataset id %s", ids[0])
	}

	// --verify catches a manifest whose id does not match its shards.
	m, _ := manifest.Read(dirs[0])
	m.DatasetID = strings.Repeat("0", 64)
	if err := manifest.Write(dirs[0], m); err != nil {
		t.Fatal(err)
	}
	if stdout, _, code := prepRun(t, "inspect", dirs[0], "--verify"); code != exitFailure || !strings.Contains(stdout, "the manifest was edited") {
		t.Errorf("inspect --verify of an edited dataset_id: exit %d:\n%s", code, stdout)
	}
}

// copyTree copies a folder of files.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestInspectRebuild converts, re-converts every item with --rebuild
// (equal), then flips bytes in one shard's data region only, and then
// changes one input: each time --rebuild must name the sample, its shard
// and what differs, and exit 1.
func TestInspectRebuild(t *testing.T) {
	for _, format := range []string{"hdf5", "png"} {
		t.Run(format, func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "src")
			copyTree(t, "../../testdata/images", src)
			dst := filepath.Join(t.TempDir(), "out")
			if _, stderr, code := prepRun(t, "convert", src, dst, "--format", format, "--recipe", "resize=64,crop=48:random,hflip=0.5", "--copies", "2", "--items-per-shard", "5"); code != 0 {
				t.Fatalf("convert: exit %d: %s", code, stderr)
			}
			stdout, stderr, code := prepRun(t, "inspect", dst, "--rebuild", "16")
			if code != 0 || !strings.Contains(stdout, "rebuilt 16 items from "+src) || !strings.Contains(stdout, "16 samples compared byte for byte with 4 shards") || !strings.Contains(stdout, "0 mismatched") {
				t.Fatalf("rebuild of an untouched run: exit %d:\n%s%s", code, stdout, stderr)
			}

			// A manifest of an older prep names no source: --src gives it.
			m, err := manifest.Read(dst)
			if err != nil {
				t.Fatal(err)
			}
			old := *m
			old.Source = ""
			if err := manifest.Write(dst, &old); err != nil {
				t.Fatal(err)
			}
			if _, stderr, code := prepRun(t, "inspect", dst, "--rebuild", "4"); code != exitUsage || !strings.Contains(stderr, "--src SRC") {
				t.Errorf("rebuild without a source: exit %d: %s", code, stderr)
			}
			if stdout, stderr, code := prepRun(t, "inspect", dst, "--rebuild", "4", "--src", src); code != 0 || !strings.Contains(stdout, "rebuilt 4 items from "+src) {
				t.Errorf("rebuild --src: exit %d:\n%s%s", code, stdout, stderr)
			}
			if err := manifest.Write(dst, m); err != nil {
				t.Fatal(err)
			}

			// Damage one sample's pixels and nothing else.
			shard := m.Shards[1]
			path := filepath.Join(dst, shard.File)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			at := damageAt(t, format, shard, data)
			data[at] ^= 0x5a
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			// HDF5 stores the pixels as they are; a PNG's checksums
			// catch the change when it is decoded.
			want := "data: 1 of 6912 bytes differ"
			if format == "png" {
				want = "the shard's copy does not decode: sample "
			}
			stdout, stderr, code = prepRun(t, "inspect", dst, "--rebuild", "16")
			if format == "png" && !strings.Contains(stdout, "invalid checksum") {
				t.Errorf("a damaged PNG member: want its checksum named:\n%s", stdout)
			}
			if code != exitFailure || !strings.Contains(stdout, "MISMATCH "+shard.File+" ") || !strings.Contains(stdout, want) ||
				strings.Count(stdout, "MISMATCH") != 1 || !strings.Contains(stderr, "a shard was damaged") {
				t.Fatalf("rebuild after a flipped byte in %s: exit %d:\n%s%s", shard.File, code, stdout, stderr)
			}
			data[at] ^= 0x5a
			os.WriteFile(path, data, 0o644)

			// Change one input: every copy of it differs.
			if err := os.Rename(filepath.Join(src, "space", "rocket.jpg"), filepath.Join(src, "space", "old.jpg")); err != nil {
				t.Fatal(err)
			}
			copyFile(t, filepath.Join(src, "space", "hubble.jpg"), filepath.Join(src, "space", "rocket.jpg"))
			os.Remove(filepath.Join(src, "space", "old.jpg"))
			// The input list says the source changed, not the shards.
			stdout, stderr, code = prepRun(t, "inspect", dst, "--rebuild", "16")
			if code != exitFailure || strings.Count(stdout, "MISMATCH") != 2 || !strings.Contains(stdout, "space/rocket.jpg#c0: data: ") || !strings.Contains(stdout, "space/rocket.jpg#c1: data: ") ||
				!strings.Contains(stdout, "the source changed since the run (input space/rocket.jpg: ") || !strings.Contains(stderr, "the source changed since the run") {
				t.Fatalf("rebuild after space/rocket.jpg changed: exit %d:\n%s%s", code, stdout, stderr)
			}

			// An input removed changes the plan itself: refused, named.
			os.Remove(filepath.Join(src, "space", "rocket.jpg"))
			if _, stderr, code := prepRun(t, "inspect", dst, "--rebuild", "4"); code != exitFailure || !strings.Contains(stderr, "the source changed since the run (1 input gone, first space/rocket.jpg)") {
				t.Fatalf("rebuild after an input was removed: exit %d: %s", code, stderr)
			}
		})
	}
}

// damageAt is a byte of the second sample's pixels in a shard: in the
// data dataset of an HDF5 shard, in the PNG's stored pixels of a tar.
func damageAt(t *testing.T, format string, s manifest.Shard, data []byte) int {
	t.Helper()
	if format == "hdf5" {
		for _, d := range s.Datasets {
			if d.Name == "data" {
				return int(d.Offset) + 6912 + 100
			}
		}
		t.Fatal("no data dataset")
	}
	// The second PNG member's first IDAT: past its zlib and stored-block
	// headers (2 + 5 bytes) and a row's filter byte.
	i := strings.Index(string(data), "IDAT")
	i = strings.Index(string(data[i+4:]), "IDAT") + i + 4
	return i + 4 + 2 + 5 + 1 + 10
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestInspectRebuildGCS converts a bucket into a bucket on fake-gcs-server
// and rebuilds from both, the source taken from the manifest; then one
// input object is replaced and the rebuild names its samples.
func TestInspectRebuildGCS(t *testing.T) {
	_, direct := photoServer(t)
	if _, stderr, code := prepRun(t, "convert", "gs://raw/photos", "gs://out/a", "--recipe", demoRecipe, "--seed", "9", "--copies", "2", "--items-per-shard", "5"); code != 0 {
		t.Fatalf("gs run: exit %d: %s", code, stderr)
	}
	stdout, stderr, code := prepRun(t, "inspect", "gs://out/a", "--rebuild", "16")
	if code != 0 || !strings.Contains(stdout, "source: gs://raw/photos") || !strings.Contains(stdout, "16 samples compared byte for byte with 4 shards, 0 skipped as the run skipped them, 0 mismatched") {
		t.Fatalf("rebuild from the bucket: exit %d:\n%s%s", code, stdout, stderr)
	}
	hubble := bucketFiles(t, direct, "raw", "photos")["space/hubble.jpg"]
	w := direct.Bucket("raw").Object("photos/space/rocket.jpg").NewWriter(context.Background())
	w.Write(hubble)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = prepRun(t, "inspect", "gs://out/a", "--rebuild", "16", "--json")
	if code != exitFailure || !strings.Contains(stdout, `"key": "space/rocket.jpg#c0"`) || !strings.Contains(stdout, `"key": "space/rocket.jpg#c1"`) ||
		!strings.Contains(stdout, `"source_changed": "input space/rocket.jpg: `) {
		t.Fatalf("rebuild after an input object changed: exit %d:\n%s%s", code, stdout, stderr)
	}
	if _, stderr, code := prepRun(t, "inspect", "gs://out/a", "--verify"); code != exitUsage || !strings.Contains(stderr, "--rebuild K") {
		t.Errorf("inspect gs:// --verify: exit %d: %s", code, stderr)
	}
}

// TestInspectRebuildVideoFrames converts a video frame by frame, then
// cuts the video to its first 3 frames: --rebuild finds those equal and
// names each frame the shard holds that the video no longer gives.
func TestInspectRebuildVideoFrames(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	copyFile(t, "../../testdata/video/testsrc.mkv", filepath.Join(src, "clip.mkv"))
	dst := filepath.Join(dir, "out")
	if _, stderr, code := prepRun(t, "convert", src, dst, "--max-frames", "6", "--recipe", "resize=32,crop=32"); code != 0 {
		t.Fatalf("convert: exit %d: %s", code, stderr)
	}
	short := filepath.Join(dir, "short.mkv")
	if out, err := exec.Command("ffmpeg", "-v", "error", "-i", filepath.Join(src, "clip.mkv"), "-frames:v", "3", "-c", "copy", short).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg (apt-get install ffmpeg): %v: %s", err, out)
	}
	copyFile(t, short, filepath.Join(src, "clip.mkv"))
	stdout, _, code := prepRun(t, "inspect", dst, "--rebuild", "1")
	if code != exitFailure || !strings.Contains(stdout, "3 samples compared byte for byte") || strings.Count(stdout, "MISMATCH") != 3 ||
		!strings.Contains(stdout, "MISMATCH shard-000000.h5 clip.mkv#f5: the shard holds this sample of the item, the rebuild does not make it") {
		t.Fatalf("rebuild of a video cut to 3 frames: exit %d:\n%s", code, stdout)
	}
}
