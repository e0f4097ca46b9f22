package hdf5

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/internal/testenv"
)

// spillCases are shards whose columns are gathered: ragged from the
// start, ragged after a streamed run of one shape, fixed without a hint,
// and several fields at once (a ragged one, a small fixed one, one of
// mixed ranks, one of no bytes).
func spillCases() map[string]struct {
	expect  int
	samples []*formats.Sample
} {
	var ragged, late, fixed, multi []*formats.Sample
	for i := range 12 {
		ragged = append(ragged, imageSample(fmt.Sprint("r", i), int64(i%3), 8+i, 5+2*i, byte(i)))
		h := 16
		if i >= 9 {
			h = 17 + i
		}
		late = append(late, imageSample(fmt.Sprint("l", i), 0, h, 16, byte(i)))
		fixed = append(fixed, imageSample(fmt.Sprint("f", i), 1, 16, 16, byte(i)))
		s := imageSample(fmt.Sprint("m", i), 2, 10, 3+i, byte(i))
		rank := []int{2, 3}
		if i%2 == 1 {
			rank = []int{6}
		}
		s.Fields = append(s.Fields,
			formats.Field{Name: "npz/label", Tensor: int64Tensor([]int{1}, int64(i))},
			formats.Field{Name: "npz/mixed", Tensor: int64Tensor(rank, 1, 2, 3, 4, 5, int64(i))},
			formats.Field{Name: "npz/empty", Tensor: formats.Tensor{DType: formats.Uint8, Shape: []int{0, 4}}},
		)
		multi = append(multi, s)
	}
	return map[string]struct {
		expect  int
		samples []*formats.Sample
	}{
		"ragged":         {0, ragged},
		"ragged, hinted": {len(ragged), ragged},
		"ragged late":    {len(late), late},
		"fixed":          {0, fixed},
		"several fields": {len(multi), multi},
	}
}

// writeBudget writes samples to a shard at p, told to expect expect,
// keeping at most budget gathered bytes in memory. It reports whether a
// spill file existed before Close, and the first error, after Abort.
func writeBudget(p string, expect int, budget int64, samples []*formats.Sample) (formats.ShardInfo, bool, error) {
	fw, err := Format{}.Create(p, formats.ShardMeta{Version: "test", Seed: 3, Classes: []string{"a", "b", "c"}})
	if err != nil {
		return formats.ShardInfo{}, false, err
	}
	w := fw.(*writer)
	w.budget = budget
	w.Expect(expect)
	for _, s := range samples {
		if err := w.Add(s); err != nil {
			w.Abort()
			return formats.ShardInfo{}, false, err
		}
	}
	_, err = os.Stat(formats.SpillName(p, 0))
	spilled := err == nil
	info, err := w.Close()
	return info, spilled, err
}

// writeSide writes samples to a shard at p, told to expect expect, with
// gather budget budget and whatever else setup sets; after each Add,
// held checks the writer's side records, and spilled, before Close, tells
// whether they went to their scratch files, which writeSide reports.
func writeSide(t *testing.T, p string, expect int, budget int64, samples []*formats.Sample,
	setup func(*writer), held func(*writer), spilled func(*writer) bool) (formats.ShardInfo, bool) {
	t.Helper()
	fw, err := Format{}.Create(p, formats.ShardMeta{Version: "test", Seed: 3, Classes: []string{"a", "b", "c"}})
	if err != nil {
		t.Fatal(err)
	}
	w := fw.(*writer)
	w.budget = budget
	setup(w)
	w.Expect(expect)
	for _, s := range samples {
		if err := w.Add(s); err != nil {
			w.Abort()
			t.Fatal(err)
		}
		held(w)
	}
	didSpill := spilled(w)
	info, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	return info, didSpill
}

// sideSpillEnds writes samples with the side records setup makes spill
// (their scratch files names returns), checks that those files exist and
// that IsTemp knows them, then ends the shard each way of ends (Abort,
// Close, or damage and Close; the error Close must give): checkEnd.
func sideSpillEnds(t *testing.T, samples []*formats.Sample, setup func(*writer), names func(*writer) []string,
	ends map[string]func(*writer) (error, string)) {
	for end, finish := range ends {
		t.Run(end, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "shard-000001.h5") // a name IsTemp knows
			fw, err := Format{}.Create(p, formats.ShardMeta{})
			if err != nil {
				t.Fatal(err)
			}
			w := fw.(*writer)
			setup(w)
			for _, s := range samples {
				if err := w.Add(s); err != nil {
					t.Fatal(err)
				}
			}
			for _, name := range names(w) {
				if !formats.IsTemp(filepath.Base(name)) {
					t.Errorf("IsTemp(%s) = false: a killed run would leave it", filepath.Base(name))
				}
				if _, err := os.Stat(name); err != nil {
					t.Fatalf("not spilled: %v", err)
				}
			}
			err, want := finish(w)
			checkEnd(t, dir, p, end, err, want)
		})
	}
}

// closeAfter damages w with damage, then closes it.
func closeAfter(damage func(*writer), want string) func(*writer) (error, string) {
	return func(w *writer) (error, string) {
		damage(w)
		_, err := w.Close()
		return err, want
	}
}

// abortOrClose are the ends of sideSpillEnds that damage nothing.
func abortOrClose() map[string]func(*writer) (error, string) {
	return map[string]func(*writer) (error, string){
		"abort": func(w *writer) (error, string) { return w.Abort(), "" },
		"close": closeAfter(func(*writer) {}, ""),
	}
}

// TestSpillSameBytes writes each case with memory enough for the whole
// shard, and again with budgets that make the writer spill at the first
// sample and part way: the shards must be equal byte for byte, and
// spilling must leave no scratch file behind.
func TestSpillSameBytes(t *testing.T) {
	for name, tc := range spillCases() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			ref := filepath.Join(dir, "ref.h5")
			want, spilled, err := writeBudget(ref, tc.expect, spillAfter, tc.samples)
			if err != nil || spilled {
				t.Fatalf("reference shard: %v (spilled: %v)", err, spilled)
			}
			wantBytes, err := os.ReadFile(ref)
			if err != nil {
				t.Fatal(err)
			}
			total := int64(0)
			for _, s := range tc.samples {
				total += s.Bytes()
			}
			for _, budget := range []int64{0, total / 3, total - 1} {
				p := filepath.Join(dir, fmt.Sprintf("b%d.h5", budget))
				got, spilled, err := writeBudget(p, tc.expect, budget, tc.samples)
				if err != nil {
					t.Fatal(err)
				}
				if !spilled {
					t.Errorf("budget %d of %d bytes: no spill file while writing", budget, total)
				}
				if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, wantBytes) {
					t.Errorf("budget %d: the shard differs from one gathered in memory (%v)", budget, err)
				}
				got.File = want.File
				if !jsonEqual(got, want) {
					t.Errorf("budget %d: info %+v, want %+v", budget, got, want)
				}
			}
			left, _ := filepath.Glob(filepath.Join(dir, "*.spill*"))
			tmps, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
			if len(left)+len(tmps) > 0 {
				t.Errorf("files left: %v %v", left, tmps)
			}
		})
	}
}

// TestSpillAbort: Abort removes the spill files with the temp file, and
// Close removes them once the shard is written, also when it fails.
func TestSpillAbort(t *testing.T) {
	tc := spillCases()["several fields"]
	for _, end := range []string{"abort", "close", "failed close"} {
		t.Run(end, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "s.h5")
			fw, err := Format{}.Create(p, formats.ShardMeta{})
			if err != nil {
				t.Fatal(err)
			}
			w := fw.(*writer)
			w.budget = 100
			w.Expect(len(tc.samples))
			for _, s := range tc.samples {
				if err := w.Add(s); err != nil {
					t.Fatal(err)
				}
			}
			for k := range tc.samples[0].Fields {
				if _, err := os.Stat(formats.SpillName(p, k)); err != nil {
					t.Fatalf("field %d not spilled: %v", k, err)
				}
			}
			switch end {
			case "abort":
				err = w.Abort()
			case "close":
				_, err = w.Close()
			case "failed close":
				// The spilled bytes no longer match the layout.
				w.cols[0].spill.write([]byte{1})
				_, err = w.Close()
				if err == nil || !strings.Contains(err.Error(), "spilled") {
					t.Errorf("Close after a stray byte: %v, want an error", err)
				}
				err = nil
			}
			if err != nil {
				t.Fatal(err)
			}
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if e.Name() != "s.h5" || end != "close" {
					t.Errorf("%s left %s", end, e.Name())
				}
			}
		})
	}
}

// TestSpillDiskFull points a spill file at /dev/full: the write fails
// with ENOSPC naming the shard, in Add (a sample larger than the spill
// buffer) or in Close (a small one still buffered), and Abort leaves
// nothing behind.
func TestSpillDiskFull(t *testing.T) {
	for _, side := range []int{8, 200} { // 192 bytes a sample, or 120 KB
		t.Run(fmt.Sprint(side), func(t *testing.T) {
			writeToFullDisk(t, 0, 3, func(w *writer) { w.budget = 1 },
				func(i int) *formats.Sample { return imageSample(fmt.Sprint(i), 0, side, side+i, 1) })
		})
	}
}

// writeToFullDisk adds n samples, sample(i), to a shard set up by setup
// whose scratch file k is /dev/full: the shard must fail with ENOSPC
// naming it, in Add or in Close, and Abort leave nothing behind.
func writeToFullDisk(t *testing.T, k, n int, setup func(*writer), sample func(i int) *formats.Sample) {
	t.Helper()
	testenv.NeedFile(t, "/dev/full", "create it with mknod -m 666 /dev/full c 1 7")
	dir := t.TempDir()
	p := filepath.Join(dir, "s.h5")
	if err := os.Symlink("/dev/full", formats.SpillName(p, k)); err != nil {
		t.Fatal(err)
	}
	fw, err := Format{}.Create(p, formats.ShardMeta{})
	if err != nil {
		t.Fatal(err)
	}
	w := fw.(*writer)
	setup(w)
	for i := range n {
		if err = w.Add(sample(i)); err != nil {
			break
		}
	}
	if err == nil {
		_, err = w.Close()
	} else {
		w.Abort()
	}
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), p) {
		t.Errorf("got %v, want ENOSPC naming %s", err, p)
	}
	if ents, _ := os.ReadDir(dir); len(ents) > 0 {
		t.Errorf("left %v", ents)
	}
}

// checkEnd checks how a spilling shard ended (end: "abort", "close", or a
// damage whose Close error must name the shard and say want): err as
// expected, and only a closed shard left in dir, no scratch file.
func checkEnd(t *testing.T, dir, p, end string, err error, want string) {
	t.Helper()
	if want != "" {
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p) {
			t.Errorf("Close: %v, want an error naming %s and saying %q", err, p, want)
		}
		err = nil
	}
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != filepath.Base(p) || end != "close" {
			t.Errorf("%s left %s", end, e.Name())
		}
	}
}

// TestSpillDiskFullEverywhere is TestDiskFullEverywhere for a shard that
// spills: a full disk at any point (the spill files take room beside the
// shard) gives ENOSPC naming the shard and leaves no file, no scratch
// file and no descriptor behind; with room, the bytes are those of a
// shard gathered in memory.
func TestSpillDiskFullEverywhere(t *testing.T) {
	dir := t.TempDir()
	testenv.MountTmpfs(t, dir, "size=4k")
	samples := spillCases()["ragged"].samples
	ref := filepath.Join(t.TempDir(), "s.h5")
	if _, _, err := writeBudget(ref, 0, spillAfter, samples); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(ref)
	if err != nil {
		t.Fatal(err)
	}
	for _, expect := range []int{0, len(samples)} {
		full := 0 // runs that ran out of room
		for kib := 4; ; kib += 4 {
			if kib > 256 {
				t.Fatalf("expect=%d: no shard written with 256 KiB of room", expect)
			}
			if out, err := exec.Command("mount", "-o", fmt.Sprintf("remount,size=%dk", kib), dir).CombinedOutput(); err != nil {
				t.Fatalf("remount: %v: %s", err, out)
			}
			p := filepath.Join(dir, "s.h5")
			_, _, err := writeBudget(p, expect, 500, samples)
			if err == nil {
				if got, _ := os.ReadFile(p); !bytes.Equal(got, want) {
					t.Errorf("expect=%d, %d KiB: the shard differs from one gathered in memory", expect, kib)
				}
			} else if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), p) {
				t.Errorf("expect=%d, %d KiB: got %v, want ENOSPC naming %s", expect, kib, err, p)
			} else {
				full++
			}
			if ents, _ := os.ReadDir(dir); err != nil && len(ents) > 0 {
				t.Errorf("expect=%d, %d KiB: %v left %v", expect, kib, err, ents)
			}
			if fds := openFDs(t, dir, "memfd:"); len(fds) > 0 {
				t.Fatalf("expect=%d, %d KiB: descriptors left open after %v: %v", expect, kib, err, fds)
			}
			os.Remove(p)
			if err == nil {
				break
			}
		}
		if full < 3 {
			t.Errorf("expect=%d: only %d runs ran out of room", expect, full)
		}
		t.Logf("expect=%d: %d runs ran out of room", expect, full)
	}
}

// TestSpillBufferReused: a shard that spilled leaves its column buffer
// for the next shard, which takes it also when its first sample is the
// larger: a new buffer of the budget (then 64 MiB) for the few bytes between
// the two samples doubled the memory of a ragged run of two shards.
func TestSpillBufferReused(t *testing.T) {
	spare.Lock()
	saved := spare.bufs
	spare.bufs = nil
	spare.Unlock()
	defer func() {
		spare.Lock()
		spare.bufs = saved
		spare.Unlock()
	}()
	dir := t.TempDir()
	var got []*byte // where each shard's column gathers
	for i, first := range []int{8, 9} {
		fw, err := Format{}.Create(filepath.Join(dir, fmt.Sprint(i, ".h5")), formats.ShardMeta{})
		if err != nil {
			t.Fatal(err)
		}
		w := fw.(*writer)
		w.budget = 4096
		w.Expect(100)
		for k := range 100 {
			h := first
			if k%2 == 1 {
				h = 17 - first // 8 and 9 rows in turn: the column turns ragged
			}
			if err := w.Add(imageSample(fmt.Sprint(k), 0, h, 8, byte(k))); err != nil {
				t.Fatal(err)
			}
			if k == 1 { // gathered since this sample
				got = append(got, &(*w.cols[0].buf)[0])
				if c := cap(*w.cols[0].buf); c > int(w.budget) {
					t.Errorf("shard %d: a buffer of %d bytes for a budget of %d", i, c, w.budget)
				}
			}
		}
		if w.cols[0].spill == nil {
			t.Fatalf("shard %d did not spill", i)
		}
		if _, err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got[1] != got[0] {
		t.Errorf("the second shard gathers at %p, not in the first shard's buffer at %p", got[1], got[0])
	}
}
