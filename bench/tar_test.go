package bench

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prep-dev/prep/formats/tarshard"
)

// tarHash hashes what a tar reader hands out, keys and members in order.
func tarHash(read func(fn func(string, map[string][]byte) error) error) (string, error) {
	h := sha256.New()
	err := read(func(key string, m map[string][]byte) error {
		fmt.Fprintf(h, "%s\x00", key)
		for _, e := range slices.Sorted(maps.Keys(m)) {
			fmt.Fprintf(h, "%s\x00%d\x00%s", e, len(m[e]), m[e])
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
}

// TestSpanScan checks that a shard read through a span, in chunks that
// split headers and members, with and without O_DIRECT, hands the
// Scanner what tarshard.Read sees; and that a shard shorter than the
// manifest says is named as truncated. (tarshard tests the parsing.)
func TestSpanScan(t *testing.T) {
	dir := t.TempDir()
	writeTar(t, dir, 1, 9, 20, 30)
	path := filepath.Join(dir, "shard-000000.tar")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := tarHash(func(fn func(string, map[string][]byte) error) error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		return tarshard.Read(f, fn)
	})
	if err != nil {
		t.Fatal(err)
	}
	var s tarshard.Scanner
	for _, chunk := range []int{align, 3 * align, DefaultChunk} {
		for _, direct := range []bool{false, true} {
			got, err := tarHash(func(fn func(string, map[string][]byte) error) error {
				f, err := openFile(path, direct)
				if err != nil {
					return err
				}
				defer f.Close()
				return s.Scan(f.span(newBuffer(chunk), 0, int64(len(data))), fn)
			})
			if err != nil || got != want {
				t.Errorf("chunk %d, direct %v: error %v, read %s, want %s", chunk, direct, err, got, want)
			}
		}
	}
	short := filepath.Join(dir, "short.tar")
	if err := os.WriteFile(short, data[:2000], 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := openFile(short, false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The manifest's size, not the file's.
	err = s.Scan(f.span(newBuffer(align), 0, int64(len(data))), func(string, map[string][]byte) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "(is the shard truncated?)") {
		t.Errorf("error %v, want one saying the shard is truncated", err)
	}
}
