package convert

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestScratch(t *testing.T) {
	dir := t.TempDir()
	s, err := newScratch(dir)
	if err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 && s.name == "" {
		t.Errorf("%d files in the folder of an unlinked scratch file", len(left))
	}
	a, _ := s.put([]byte("first"))
	b, _ := s.put([]byte("second"))
	got := make([]byte, 6)
	if _, err := s.f.ReadAt(got, b); err != nil || a != 0 || b != 5 || !bytes.Equal(got, []byte("second")) {
		t.Errorf("offsets %d, %d; read %q, %v", a, b, got, err)
	}
	s.close()
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("%d files left after close", len(left))
	}

	missing := filepath.Join(dir, "gone")
	_, err = newScratch(missing)
	if err == nil || !IsFatal(err) || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "--max-frames") {
		t.Errorf("scratch in a missing folder: %v; want a fatal error naming it and the fix", err)
	}
}
