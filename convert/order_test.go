package convert

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prep-dev/prep/formats/manifest"
)

func TestLayoutCoversEveryItem(t *testing.T) {
	for _, tc := range []struct{ inputs, copies, perShard int }{
		{1, 1, 1}, {1, 5, 2}, {7, 1, 3}, {10, 3, 7}, {10, 5, 4}, {64, 4, 10}, {5, 3, 100},
	} {
		for _, order := range []Order{OrderShuffle, OrderSorted} {
			name := fmt.Sprintf("%s/%d×%d/%d", order, tc.inputs, tc.copies, tc.perShard)
			l := newLayout(order, tc.inputs, tc.copies, tc.perShard, 42)
			seen := map[[2]int]bool{}
			for p := range tc.inputs * tc.copies {
				e, c := l.item(p)
				if e < 0 || e >= tc.inputs || c < 0 || c >= tc.copies || seen[[2]int{e, c}] {
					t.Fatalf("%s: position %d holds input %d copy %d (out of range or twice)", name, p, e, c)
				}
				seen[[2]int{e, c}] = true
				switch {
				case order == OrderSorted && (e != p/tc.copies || c != p%tc.copies):
					t.Fatalf("%s: position %d holds %d/%d, want key order", name, p, e, c)
				case order == OrderShuffle && c != p/tc.inputs:
					t.Fatalf("%s: position %d holds copy %d, want round %d", name, p, c, p/tc.inputs)
				}
			}
		}
	}
}

// TestLayoutCopiesApart checks that no shard holds two copies of one input
// whenever a shard is no longer than a round, also where shards straddle
// the rounds' boundaries.
func TestLayoutCopiesApart(t *testing.T) {
	for _, tc := range []struct{ inputs, copies, perShard int }{
		{10, 5, 7}, {10, 8, 3}, {10, 4, 10}, {10, 6, 9}, {33, 6, 32}, {100, 3, 64}, {2, 9, 2},
	} {
		for seed := range uint64(20) {
			l := newLayout(OrderShuffle, tc.inputs, tc.copies, tc.perShard, seed)
			inShard := map[[2]int]int{} // (shard, input) -> copy
			for p := range tc.inputs * tc.copies {
				e, c := l.item(p)
				k := [2]int{p / tc.perShard, e}
				if prev, ok := inShard[k]; ok {
					t.Fatalf("%d×%d/%d seed %d: shard %d holds copies %d and %d of input %d",
						tc.inputs, tc.copies, tc.perShard, seed, k[0], prev, c, e)
				}
				inShard[k] = c
			}
		}
	}
}

func TestLayoutDeterministic(t *testing.T) {
	order := func(seed uint64, from int) []int {
		l := newLayout(OrderShuffle, 50, 4, 16, seed)
		var out []int
		for p := from; p < 200; p++ {
			e, c := l.item(p)
			out = append(out, e*4+c)
		}
		return out
	}
	a := order(1, 0)
	if !slices.Equal(a, order(1, 0)) {
		t.Fatal("same seed, different order")
	}
	if slices.Equal(a, order(2, 0)) {
		t.Fatal("seeds 1 and 2 give the same order")
	}
	// A task that starts mid-plan, as in a distributed run or a resume,
	// must place the same items as one process going through the plan.
	if !slices.Equal(a[130:], order(1, 130)) {
		t.Fatal("starting at position 130 gives another order")
	}
	// The order must not change with the Go release or CPU that builds
	// prep: these are the first items of seed 1, drawn once and kept.
	want := []int{72, 84, 68, 116, 16, 96, 100, 188, 36, 92}
	if !slices.Equal(a[:10], want) {
		t.Fatalf("seed 1 starts %v, want %v: the shuffle changed, which changes every dataset", a[:10], want)
	}
}

// TestShuffleMixesClasses converts a 10-class ImageFolder and reads the
// labels and keys back from the shards. Bound: in every shard each class's
// count passes a χ² test against the global proportions at p = 0.001
// (χ² with 9 degrees of freedom < 27.88; under a uniform shuffle a shard
// fails with probability 0.001, and the seeds here are fixed); the same
// check fails for sorted order, so it tells the two apart. No shard holds
// two copies of one input.
func TestShuffleMixesClasses(t *testing.T) {
	const classes, perClass, copies, perShard = 10, 20, 2, 50
	src := t.TempDir()
	var names []string
	for i := range classes {
		names = append(names, fmt.Sprintf("class%d", i))
	}
	writeImages(t, src, names, perClass)
	for _, order := range []Order{OrderShuffle, OrderSorted} {
		dst := t.TempDir()
		m, _, err := convertDir(t, context.Background(), src, dst, func(o *Options) {
			o.Order, o.Copies, o.ItemsPerShard = order, copies, perShard
		})
		if err != nil {
			t.Fatal(err)
		}
		if m.Order != string(order) || m.FormatVersion != manifest.WriteVersion(m) {
			t.Fatalf("manifest records order %q, version %d", m.Order, m.FormatVersion)
		}
		if len(m.Shards) != classes*perClass*copies/perShard {
			t.Fatalf("%d shards", len(m.Shards))
		}
		worst := 0.0
		for _, s := range m.Shards {
			labels, keys := readLabelsKeys(t, dst, s)
			counts := make([]int, classes)
			for _, l := range labels {
				counts[l]++
			}
			expect := float64(s.Count) / classes
			chi2 := 0.0
			for _, n := range counts {
				chi2 += (float64(n) - expect) * (float64(n) - expect) / expect
			}
			worst = max(worst, chi2)
			inputs := map[string]bool{}
			for _, k := range keys {
				in, _, _ := strings.Cut(k, "#c")
				if order == OrderShuffle && inputs[in] {
					t.Errorf("shard %d holds two copies of %s", s.Index, in)
				}
				inputs[in] = true
			}
		}
		switch {
		case order == OrderShuffle && worst >= 27.88:
			t.Errorf("shuffled: a shard's class counts give χ² = %.1f, want < 27.88 in every shard", worst)
		case order == OrderSorted && worst < 27.88:
			t.Errorf("sorted: χ² %.1f: the check cannot tell a sorted plan from a shuffled one", worst)
		}
		t.Logf("%s: largest χ² over %d shards %.1f", order, len(m.Shards), worst)
	}
}

// readLabelsKeys reads a shard's labels and keys at the offsets the
// manifest records, as any reader of the format may.
func readLabelsKeys(t *testing.T, dir string, s manifest.Shard) ([]int64, []string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, s.File))
	if err != nil {
		t.Fatal(err)
	}
	var labels []int64
	var keys []string
	for _, d := range s.Datasets {
		b := raw[d.Offset : d.Offset+d.Size]
		switch d.Name {
		case "labels":
			for i := 0; i < len(b); i += 8 {
				labels = append(labels, int64(binary.LittleEndian.Uint64(b[i:])))
			}
		case "keys":
			w, err := strconv.Atoi(strings.TrimPrefix(string(d.DType), "S"))
			if err != nil {
				t.Fatalf("keys dtype %s", d.DType)
			}
			for i := 0; i < len(b); i += w {
				keys = append(keys, string(bytes.TrimRight(b[i:i+w], "\x00")))
			}
		}
	}
	if len(labels) != s.Count || len(keys) != s.Count {
		t.Fatalf("shard %d: %d labels, %d keys for %d samples", s.Index, len(labels), len(keys), s.Count)
	}
	return labels, keys
}

// TestResumeRefusesOtherOrder: shards laid out in one order cannot be
// finished in another.
func TestResumeRefusesOtherOrder(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	writeImages(t, src, []string{"a", "b"}, 3)
	if _, _, err := convertDir(t, context.Background(), src, dst, func(o *Options) { o.Order = OrderSorted }); err != nil {
		t.Fatal(err)
	}
	_, _, err := convertDir(t, context.Background(), src, dst, func(o *Options) { o.Resume = true })
	if err == nil || !strings.Contains(err.Error(), "order sorted, now shuffle") {
		t.Fatalf("resume in another order: err %v", err)
	}
}
