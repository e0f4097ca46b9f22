package convert

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prep-dev/prep/cloudsrc"
	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/hdf5"
	"github.com/prep-dev/prep/formats/manifest"
)

// pngDecode is a real decoder for the pipeline tests: image/png to NRGBA.
func pngDecode(data []byte, _ int) (*image.NRGBA, error) {
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("decode png: %w", err)
	}
	out := image.NewNRGBA(img.Bounds())
	draw.Draw(out, out.Bounds(), img, img.Bounds().Min, draw.Src)
	return out, nil
}

// cropAug draws a random 4×4 crop and a flip: enough randomness to show
// that every sample gets its own generator.
type cropAug struct{}

func (cropAug) Apply(img *image.NRGBA, rng *rand.Rand) (*image.NRGBA, map[string]any) {
	b := img.Bounds()
	x, y := rng.IntN(b.Dx()-3), rng.IntN(b.Dy()-3)
	out := image.NewNRGBA(image.Rect(0, 0, 4, 4))
	draw.Draw(out, out.Bounds(), img, image.Pt(x, y), draw.Src)
	return out, map[string]any{"crop": []int{x, y, 4, 4}}
}

// writeImages makes n PNGs per class with distinct pixels.
func writeImages(t *testing.T, dir string, classes []string, n int) {
	t.Helper()
	for ci, c := range classes {
		if err := os.MkdirAll(filepath.Join(dir, c), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			img := image.NewNRGBA(image.Rect(0, 0, 9+i%3, 8))
			for p := range img.Pix {
				img.Pix[p] = byte(p*3 + i*11 + ci*29)
			}
			img.Pix[3] = 255
			var buf bytes.Buffer
			if err := png.Encode(&buf, img); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, c, fmt.Sprintf("%03d.png", i)), buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func handlerFor(aug ImageAugmenter) func(string) Handler {
	h := NewImageHandler(pngDecode, nil, aug, 0)
	return func(key string) Handler {
		if strings.HasSuffix(key, ".png") {
			return h
		}
		return nil
	}
}

func convertDir(t *testing.T, ctx context.Context, src, dst string, mod func(*Options)) (*manifest.Manifest, *Summary, error) {
	t.Helper()
	opt := Options{
		Format: hdf5.Format{}, Handler: handlerFor(cropAug{}), Recipe: "crop4", Seed: 7,
		Copies: 2, ItemsPerShard: 5, Workers: 2, IOWorkers: 3, Version: "test",
	}
	if mod != nil {
		mod(&opt)
	}
	sink, err := cloudsrc.NewLocalSink(dst)
	if err != nil {
		t.Fatal(err)
	}
	opt.Sink = sink
	l, err := ListSource(ctx, cloudsrc.Dir{Root: src}, func(k string) bool { return opt.Handler(k) != nil })
	if err != nil {
		t.Fatal(err)
	}
	return Run(ctx, l, opt)
}

// dirFiles returns name -> content for every file in dir.
func dirFiles(t *testing.T, dir string) map[string][]byte {
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

func sameFiles(t *testing.T, a, b map[string][]byte) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%d files vs %d files", len(a), len(b))
	}
	for name, data := range a {
		if !bytes.Equal(data, b[name]) {
			t.Errorf("%s differs", name)
		}
	}
}

func TestRoundTripPixels(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	writeImages(t, src, []string{"cat", "dog"}, 4)
	m, sum, err := convertDir(t, context.Background(), src, dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Samples != 16 || m.Samples != 16 || len(m.Shards) != 4 || m.ShardCount != 4 {
		t.Fatalf("samples %d/%d, shards %d: %+v", sum.Samples, m.Samples, len(m.Shards), m)
	}
	if got := strings.Join(m.Classes, ","); got != "cat,dog" {
		t.Fatalf("classes %s", got)
	}
	// Every stored sample equals the decode + augmentation of the item the
	// shuffled plan puts at its position, with the item's own generator.
	lay := newLayout(OrderShuffle, 8, 2, m.ItemsPerShard, 7)
	item := 0
	for _, s := range m.Shards {
		raw, err := os.ReadFile(filepath.Join(dst, s.File))
		if err != nil {
			t.Fatal(err)
		}
		data := s.Datasets[0]
		if data.Name != "data" || data.Shape[0] != s.Count {
			t.Fatalf("shard %d datasets %+v", s.Index, s.Datasets)
		}
		for i := 0; i < s.Count; i++ {
			in, c := lay.item(item)
			class := []string{"cat", "dog"}[in/4]
			key := fmt.Sprintf("%s/%03d.png", class, in%4)
			file, _ := os.ReadFile(filepath.Join(src, key))
			img, _ := pngDecode(file, 0)
			out, _ := cropAug{}.Apply(img, NewRand(7, key, c))
			want := RGBTensor(out).Data
			got := raw[data.Offset+int64(i*48) : data.Offset+int64((i+1)*48)]
			if !bytes.Equal(got, want) {
				t.Fatalf("shard %d sample %d (%s copy %d): pixels differ", s.Index, i, key, c)
			}
			item++
		}
	}
	if item != 16 {
		t.Fatalf("read %d samples", item)
	}
}

func TestDeterministicAcrossWorkers(t *testing.T) {
	src := t.TempDir()
	writeImages(t, src, []string{"a", "b", "c"}, 7)
	var outs []map[string][]byte
	for _, w := range []struct{ cpu, io int }{{1, 1}, {8, 16}, {3, 2}} {
		dst := t.TempDir()
		if _, _, err := convertDir(t, context.Background(), src, dst, func(o *Options) {
			o.Workers, o.IOWorkers, o.ItemsPerShard = w.cpu, w.io, 0
			o.ShardSize = 400
		}); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, dirFiles(t, dst))
	}
	if len(outs[0]) < 4 {
		t.Fatalf("expected several shards, got %d files", len(outs[0]))
	}
	sameFiles(t, outs[0], outs[1])
	sameFiles(t, outs[0], outs[2])
}

func TestBadInputsSkipped(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	writeImages(t, src, []string{"x"}, 3)
	os.WriteFile(filepath.Join(src, "x", "zero.png"), nil, 0o644)
	os.WriteFile(filepath.Join(src, "x", "text.png"), []byte("hello, not a png"), 0o644)
	os.WriteFile(filepath.Join(src, "x", "notes.txt"), []byte("ignored"), 0o644)
	m, s, err := convertDir(t, context.Background(), src, dst, func(o *Options) { o.Copies, o.Order = 1, OrderSorted })
	if err != nil {
		t.Fatal(err)
	}
	if s.Samples != 3 || len(m.Skipped) != 2 || len(m.Ignored) != 1 {
		t.Fatalf("samples %d skipped %+v ignored %+v", s.Samples, m.Skipped, m.Ignored)
	}
	if m.Skipped[0].Key != "x/text.png" || !strings.Contains(m.Skipped[0].Reason, "png") {
		t.Errorf("skipped[0] = %+v", m.Skipped[0])
	}
	if m.Ignored[0].Key != "x/notes.txt" || !strings.Contains(m.Ignored[0].Reason, "unsupported") {
		t.Errorf("ignored = %+v", m.Ignored)
	}
	_, _, err = convertDir(t, context.Background(), src, t.TempDir(), func(o *Options) { o.Copies, o.Strict, o.Order = 1, true, OrderSorted })
	if err == nil || !strings.Contains(err.Error(), "text.png") || !strings.Contains(err.Error(), "--strict") {
		t.Fatalf("strict: err = %v", err)
	}
}

// TestSkippedInOrder checks that the summary lists skipped inputs in the
// manifest's order, input order under OrderSorted, when they fall in
// different shards.
func TestSkippedInOrder(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	writeImages(t, src, []string{"x"}, 2)
	for i := range 6 {
		os.WriteFile(filepath.Join(src, "x", fmt.Sprintf("bad%d.png", i)), []byte("not a png"), 0o644)
	}
	m, s, err := convertDir(t, context.Background(), src, dst, func(o *Options) { o.Copies, o.ItemsPerShard, o.Order = 1, 1, OrderSorted })
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, sk := range s.Skipped {
		keys = append(keys, sk.Key)
	}
	if len(m.Skipped) != 6 || !slices.Equal(s.Skipped, m.Skipped) || !slices.IsSorted(keys) {
		t.Errorf("summary skipped %v, manifest %v: want the same, in input order", s.Skipped, m.Skipped)
	}
}

func TestDestinationChecks(t *testing.T) {
	src := t.TempDir()
	writeImages(t, src, []string{"x"}, 2)
	dst := t.TempDir()
	os.WriteFile(filepath.Join(dst, "precious.txt"), []byte("keep"), 0o644)
	if _, _, err := convertDir(t, context.Background(), src, dst, nil); err == nil || !strings.Contains(err.Error(), "precious.txt") {
		t.Fatalf("foreign files: err = %v", err)
	}
	dst2 := t.TempDir()
	if _, _, err := convertDir(t, context.Background(), src, dst2, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := convertDir(t, context.Background(), src, dst2, nil); err == nil || !strings.Contains(err.Error(), "--resume") {
		t.Fatalf("second run: err = %v", err)
	}
	if _, _, err := convertDir(t, context.Background(), src, dst2, func(o *Options) { o.Overwrite = true }); err != nil {
		t.Fatalf("overwrite: %v", err)
	}
	if _, _, err := convertDir(t, context.Background(), src, dst2, func(o *Options) { o.Resume, o.Seed = true, 8 }); err == nil || !strings.Contains(err.Error(), "seed 7, now 8") {
		t.Fatalf("resume with another seed: err = %v", err)
	}
}

// TestDestinationLeftovers runs into folders holding an earlier run plus
// files that only look like prep's: a user's *.tmp and shard-* files must
// survive --overwrite, a crashed run's shard temp file must not stop it.
func TestDestinationLeftovers(t *testing.T) {
	src := t.TempDir()
	writeImages(t, src, []string{"x"}, 2)
	user := map[string]string{"backup.tmp": "mine", "shard-notes.txt": "mine too", "shard-1.h5": "short number"}
	tests := []struct {
		name      string
		earlier   bool              // an earlier run wrote into the folder
		files     map[string]string // written before the run
		overwrite bool
		wantErr   string   // "" for success
		kept      []string // must hold their bytes afterwards
		gone      []string // must not exist afterwards
	}{
		{"user tmp, overwrite", true, map[string]string{"backup.tmp": "mine"}, true, "", []string{"backup.tmp"}, nil},
		{"user files, overwrite", true, user, true, "", []string{"backup.tmp", "shard-notes.txt", "shard-1.h5"}, nil},
		{"user tmp alone", false, map[string]string{"backup.tmp": "mine"}, false, "backup.tmp", []string{"backup.tmp"}, nil},
		{"crashed shard, overwrite", true, map[string]string{"shard-000005.h5.tmp": "half"}, true, "", nil, []string{"shard-000005.h5.tmp"}},
		{"crashed manifest, overwrite", true, map[string]string{"manifest.json.tmp": "{", ".prep-progress.json.tmp": "{"}, true, "",
			nil, []string{"manifest.json.tmp", ".prep-progress.json.tmp"}},
		{"crashed shard, no flag", true, map[string]string{"shard-000005.h5.tmp": "half"}, false, "--resume", nil, nil},
		{"crashed shard alone", false, map[string]string{"shard-000005.h5.tmp": "half"}, false, "", nil, []string{"shard-000005.h5.tmp"}},
		{"crashed shard's spill files", false, map[string]string{"shard-000005.h5.tmp": "half", "shard-000005.h5.tmp.spill0": "x", "shard-000005.h5.tmp.spill1": "y"},
			false, "", nil, []string{"shard-000005.h5.tmp", "shard-000005.h5.tmp.spill0", "shard-000005.h5.tmp.spill1"}},
		{"crashed spill, overwrite", true, map[string]string{"shard-000000.h5.tmp.spill0": "x", "backup.tmp.spill0": "mine"}, true, "",
			[]string{"backup.tmp.spill0"}, []string{"shard-000000.h5.tmp.spill0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := t.TempDir()
			if tt.earlier {
				if _, _, err := convertDir(t, context.Background(), src, dst, nil); err != nil {
					t.Fatal(err)
				}
			}
			for name, data := range tt.files {
				if err := os.WriteFile(filepath.Join(dst, name), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			m, _, err := convertDir(t, context.Background(), src, dst, func(o *Options) { o.Overwrite = tt.overwrite })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tt.wantErr)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if m.Samples != 4 {
					t.Errorf("%d samples, want 4", m.Samples)
				}
				for _, s := range m.Shards {
					if sum, _, err := FileSHA256(filepath.Join(dst, s.File)); err != nil || sum != s.SHA256 {
						t.Errorf("%s: sha256 %s, manifest %s (%v)", s.File, sum, s.SHA256, err)
					}
				}
			}
			for _, name := range tt.kept {
				if b, err := os.ReadFile(filepath.Join(dst, name)); err != nil || string(b) != tt.files[name] {
					t.Errorf("%s: %q, %v; want it kept as %q", name, b, err, tt.files[name])
				}
			}
			for _, name := range tt.gone {
				if _, err := os.Stat(filepath.Join(dst, name)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s was left behind (%v)", name, err)
				}
			}
		})
	}
}

// TestSourceTmpFilesListed: a source file that merely ends in .tmp is the
// user's and is listed as ignored, not hidden; only prep's own temp files
// are left out of a listing.
func TestSourceTmpFilesListed(t *testing.T) {
	src := t.TempDir()
	writeImages(t, src, []string{"x"}, 1)
	for _, name := range []string{"x/foo.tmp", "x/shard-000001.h5.tmp", "x/manifest.json.tmp"} {
		os.WriteFile(filepath.Join(src, name), []byte("?"), 0o644)
	}
	l, err := ListSource(context.Background(), cloudsrc.Dir{Root: src}, func(k string) bool { return strings.HasSuffix(k, ".png") })
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Entries) != 1 || l.Entries[0].Key != "x/000.png" {
		t.Errorf("entries %+v", l.Entries)
	}
	if len(l.Ignored) != 1 || l.Ignored[0].Key != "x/foo.tmp" || !strings.Contains(l.Ignored[0].Reason, `".tmp"`) {
		t.Errorf("ignored %+v, want x/foo.tmp alone", l.Ignored)
	}
}

func TestInterruptThenResume(t *testing.T) {
	src := t.TempDir()
	writeImages(t, src, []string{"a", "b"}, 10)
	clean := t.TempDir()
	if _, _, err := convertDir(t, context.Background(), src, clean, nil); err != nil {
		t.Fatal(err)
	}
	want := dirFiles(t, clean)

	dst := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	_, _, err := convertDir(t, ctx, src, dst, func(o *Options) {
		o.Progress = func(p Progress) {
			if p.Items >= 23 {
				cancel()
			}
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: err = %v", err)
	}
	for name := range dirFiles(t, dst) {
		if formats.IsTemp(name) {
			t.Errorf("temp file %s left behind", name)
		}
	}
	partial := dirFiles(t, dst)
	if _, ok := partial[manifest.FileName]; ok {
		t.Fatal("an interrupted run wrote the final manifest")
	}
	var kept int
	for name, data := range partial {
		if strings.HasPrefix(name, "shard-") {
			kept++
			if !bytes.Equal(data, want[name]) {
				t.Errorf("finished shard %s differs from the clean run", name)
			}
		}
	}
	if kept == 0 || kept >= 8 {
		t.Fatalf("interrupted run finished %d of 8 shards", kept)
	}
	// Damage one finished shard: resume must redo it.
	for name := range partial {
		if strings.HasPrefix(name, "shard-") {
			os.WriteFile(filepath.Join(dst, name), []byte("garbage"), 0o644)
			break
		}
	}
	_, s, err := convertDir(t, context.Background(), src, dst, func(o *Options) { o.Resume = true })
	if err != nil {
		t.Fatal(err)
	}
	if s.ShardsKept != kept-1 {
		t.Errorf("kept %d shards, want %d", s.ShardsKept, kept-1)
	}
	sameFiles(t, want, dirFiles(t, dst))
}

// TestResumeVerifyMissing: --resume keeps a local shard only once its
// file's checksum matches; one that cannot be found is redone.
func TestResumeVerifyMissing(t *testing.T) {
	r := &run{opt: Options{Sink: &cloudsrc.LocalSink{Path: t.TempDir()}}}
	s := manifest.Shard{ShardInfo: formats.ShardInfo{File: "shard-000000.h5", Count: 3, Bytes: 100, SHA256: "ab"}}
	if ok, _ := r.verify(s, nil); ok {
		t.Fatal("a missing shard counts as verified")
	}
}

func TestTasksMergeEqualsOneProcess(t *testing.T) {
	src := t.TempDir()
	writeImages(t, src, []string{"a", "b"}, 9)
	one := t.TempDir()
	if _, _, err := convertDir(t, context.Background(), src, one, nil); err != nil {
		t.Fatal(err)
	}
	split := t.TempDir()
	for i := 2; i >= 0; i-- { // any order
		if _, _, err := convertDir(t, context.Background(), src, split, func(o *Options) {
			o.TaskIndex, o.TaskCount, o.Overwrite = i, 3, true
		}); err != nil {
			t.Fatal(err)
		}
	}
	sink, _ := cloudsrc.NewLocalSink(split)
	if _, err := MergeSink(context.Background(), sink); err != nil {
		t.Fatal(err)
	}
	got := dirFiles(t, split)
	for name := range got {
		if strings.HasPrefix(name, "manifest-task-") {
			delete(got, name)
		}
	}
	sameFiles(t, dirFiles(t, one), got)

	// A missing part is named.
	os.Remove(filepath.Join(split, TaskManifestName(1)))
	if _, err := MergeSink(context.Background(), sink); err == nil || !strings.Contains(err.Error(), "missing tasks 1") {
		t.Fatalf("merge with a missing part: err = %v", err)
	}
}

func TestMergeRejectsOverlap(t *testing.T) {
	mk := func(i, first, end int) *manifest.Manifest {
		m := &manifest.Manifest{ShardCount: 4, Task: &manifest.Task{Index: i, Count: 2, First: first, End: end}}
		for s := first; s < end; s++ {
			m.Shards = append(m.Shards, manifest.Shard{Index: s})
		}
		return m
	}
	tests := []struct {
		name  string
		parts []*manifest.Manifest
		want  string
	}{
		{"ok", []*manifest.Manifest{mk(0, 0, 2), mk(1, 2, 4)}, ""},
		{"overlap", []*manifest.Manifest{mk(0, 0, 3), mk(1, 2, 4)}, "overlap"},
		{"gap", []*manifest.Manifest{mk(0, 0, 1), mk(1, 2, 4)}, "gap"},
		{"tail", []*manifest.Manifest{mk(0, 0, 2), mk(1, 2, 3)}, "gap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Merge(tt.parts)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestSymlinkedInputs: links to files and folders are inputs like any
// other, a link back up the tree is not followed forever, and a broken
// link is reported as skipped rather than dropped.
func TestSymlinkedInputs(t *testing.T) {
	elsewhere, src := t.TempDir(), t.TempDir()
	writeImages(t, elsewhere, []string{"a", "b"}, 2)
	writeImages(t, src, []string{"a"}, 1)
	for _, l := range []struct{ target, link string }{
		{filepath.Join(elsewhere, "a", "001.png"), "a/linked.png"}, // a file
		{filepath.Join(elsewhere, "b"), "b"},                       // a class folder
		{"..", "a/up"},                                             // a loop
		{filepath.Join(elsewhere, "gone.png"), "a/gone.png"},       // broken
	} {
		if err := os.Symlink(l.target, filepath.Join(src, l.link)); err != nil {
			t.Fatal(err)
		}
	}
	dst := t.TempDir()
	m, _, err := convertDir(t, context.Background(), src, dst, func(o *Options) { o.Copies = 1 })
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(m.Classes, ","); got != "a,b" {
		t.Errorf("classes %s, want a,b", got)
	}
	if m.Samples != 4 || m.Items != 5 {
		t.Errorf("%d samples of %d items, want 4 of 5", m.Samples, m.Items)
	}
	if len(m.Skipped) != 1 || m.Skipped[0].Key != "a/gone.png" || !strings.Contains(m.Skipped[0].Reason, "is a broken symbolic link (to "+filepath.Join(elsewhere, "gone.png")) {
		t.Errorf("skipped %+v, want a/gone.png: a broken symbolic link to its target", m.Skipped)
	}
	// The linked file's pixels are those of its target.
	want, err := os.ReadFile(filepath.Join(elsewhere, "a", "001.png"))
	if err != nil {
		t.Fatal(err)
	}
	img, _ := pngDecode(want, 0)
	out, _ := cropAug{}.Apply(img, NewRand(7, "a/linked.png", 0))
	got := readSample(t, dst, m, "a/linked.png")
	if !bytes.Equal(got, RGBTensor(out).Data) {
		t.Errorf("a/linked.png: stored pixels differ from its target's")
	}
}

// readSample returns the stored bytes of the sample with key, found
// through the shards' keys datasets.
func readSample(t *testing.T, dir string, m *manifest.Manifest, key string) []byte {
	t.Helper()
	for _, s := range m.Shards {
		path := filepath.Join(dir, s.File)
		var data, keys formats.DatasetInfo
		for _, d := range s.Datasets {
			switch d.Name {
			case "data":
				data = d
			case "keys":
				keys = d
			}
		}
		width := int(keys.Size) / s.Count
		kb := make([]byte, keys.Size)
		if err := hdf5.ReadDataset(path, "keys", kb); err != nil {
			t.Fatal(err)
		}
		for i := range s.Count {
			if string(bytes.TrimRight(kb[i*width:(i+1)*width], "\x00")) != key {
				continue
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			size := data.Size / int64(s.Count)
			return raw[data.Offset+int64(i)*size : data.Offset+int64(i+1)*size]
		}
	}
	t.Fatalf("no sample %s in the shards", key)
	return nil
}

// TestFatalStopsRun checks that a fatal error in either handler stage
// stops a run with many inputs in flight, naming the input, rather than
// leaving the other stages waiting on the failed sample.
func TestFatalStopsRun(t *testing.T) {
	src := t.TempDir()
	writeImages(t, src, []string{"a"}, 60)
	img := NewImageHandler(pngDecode, nil, cropAug{}, 0)
	fail := func(key string) bool { return key == "a/007.png" }
	for _, tc := range []struct {
		name string
		h    Handler
	}{
		{"samples", HandlerFunc(func(ctx context.Context, in *Input, c int, rng *rand.Rand) ([]formats.Sample, error) {
			if fail(in.Key) {
				return nil, Fatal(errors.New("broken tool"))
			}
			return img.Samples(ctx, in, c, rng)
		})},
		{"finish", failingFinish{img.(Stager), fail}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, _, err := convertDir(t, ctx, src, t.TempDir(), func(o *Options) {
				o.Handler = func(string) Handler { return tc.h }
				o.Workers, o.IOWorkers, o.Copies = 2, 2, 1
			})
			if err == nil || !strings.Contains(err.Error(), "broken tool") || !strings.Contains(err.Error(), "007.png") {
				t.Fatalf("Run: %v, want the fatal error naming a/007.png", err)
			}
		})
	}
}

// failingFinish is a Stager whose finish stage fails fatally for some keys.
type failingFinish struct {
	Stager
	fail func(key string) bool
}

func (f failingFinish) Decode(ctx context.Context, in *Input, c int) (func(*rand.Rand) ([]formats.Sample, error), error) {
	finish, err := f.Stager.Decode(ctx, in, c)
	if err != nil || !f.fail(in.Key) {
		return finish, err
	}
	return func(*rand.Rand) ([]formats.Sample, error) { return nil, Fatal(errors.New("broken tool")) }, nil
}

// refusingSink is a local destination that refuses every shard.
type refusingSink struct{ cloudsrc.Sink }

func (s refusingSink) Publish(ctx context.Context, name string) error {
	if strings.HasPrefix(name, "shard-") {
		return errors.New("upload refused")
	}
	return s.Sink.Publish(ctx, name)
}

// TestPublishFailureStopsRun checks that a shard that cannot be published
// stops the run at once, while shards close beside the sink: the sink
// fills at most the shard after the refused one, and no temporary file
// is left.
func TestPublishFailureStopsRun(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	writeImages(t, src, []string{"a"}, 100)
	local, err := cloudsrc.NewLocalSink(dst)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ListSource(context.Background(), cloudsrc.Dir{Root: src}, func(k string) bool { return strings.HasSuffix(k, ".png") })
	if err != nil {
		t.Fatal(err)
	}
	var items int
	_, _, err = Run(context.Background(), l, Options{
		Sink: refusingSink{local}, Format: hdf5.Format{}, Handler: handlerFor(cropAug{}), Recipe: "crop4",
		Copies: 2, ItemsPerShard: 5, Workers: 2, IOWorkers: 2, Version: "test",
		Progress: func(p Progress) { items = p.Items },
	})
	if err == nil || !strings.Contains(err.Error(), "upload refused") {
		t.Fatalf("Run: %v, want the refused upload", err)
	}
	if items > 2*5+2 {
		t.Errorf("the sink went on to %d of 200 items after shard 0 was refused", items)
	}
	if left, _ := filepath.Glob(filepath.Join(dst, "*.tmp")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestProbedItemReused: a run without ItemsPerShard converts its first
// item once, not once for the probe and again in the pipeline (a long
// video was converted twice): the probe goes in plan order, so that item
// is the one it converts. A task whose first item is another drops the
// probe's conversion. The shards are those of a run told the same items
// per shard.
func TestProbedItemReused(t *testing.T) {
	src := t.TempDir()
	writeImages(t, src, []string{"a", "b"}, 6) // 12 inputs, 24 items
	img := handlerFor(cropAug{})
	for _, tc := range []struct {
		name        string
		order       Order
		task, tasks int
	}{
		{"sorted", OrderSorted, 0, 1},
		{"shuffle", OrderShuffle, 0, 1},
		{"second task", OrderShuffle, 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			calls := map[string]int{}
			counting := HandlerFunc(func(ctx context.Context, in *Input, c int, rng *rand.Rand) ([]formats.Sample, error) {
				mu.Lock()
				calls[fmt.Sprint(in.Key, "#", c)]++
				mu.Unlock()
				return img(in.Key).Samples(ctx, in, c, rng)
			})
			setup := func(o *Options) {
				o.Order, o.TaskIndex, o.TaskCount = tc.order, tc.task, tc.tasks
			}
			dst := t.TempDir()
			m, _, err := convertDir(t, context.Background(), src, dst, func(o *Options) {
				setup(o)
				o.Handler = func(string) Handler { return counting }
				o.ItemsPerShard, o.ShardSize = 0, 300
			})
			if err != nil {
				t.Fatal(err)
			}
			n := (24 + m.ItemsPerShard - 1) / m.ItemsPerShard
			first, end := TaskShards(n, tc.task, tc.tasks)
			items := min(24, end*m.ItemsPerShard) - first*m.ItemsPerShard
			total := 0
			for k, c := range calls {
				if c > 1 {
					t.Errorf("%s converted %d times", k, c)
				}
				total += c
			}
			if want := items + tc.task; total != want { // the second task's probe converts an item it does not write
				t.Errorf("%d conversions for %d items, want %d", total, items, want)
			}
			told := t.TempDir()
			if _, _, err := convertDir(t, context.Background(), src, told, func(o *Options) {
				setup(o)
				o.ItemsPerShard = m.ItemsPerShard
			}); err != nil {
				t.Fatal(err)
			}
			got, want := dirFiles(t, dst), dirFiles(t, told)
			for name := range got {
				if strings.HasSuffix(name, ".json") {
					delete(got, name)
					delete(want, name)
				}
			}
			sameFiles(t, got, want)
		})
	}
}
