package convert

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/prep-dev/prep/cloudsrc"
)

// TestFetchPathHandler: media handlers read local files from their path,
// so fetch leaves a one-hour recording on disk; other handlers get the
// bytes; a missing file fails either way.
func TestFetchPathHandler(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.wav"), []byte("RIFF...."), 0o644)
	src := cloudsrc.Dir{Root: dir}
	ctx := context.Background()
	tests := []struct {
		name     string
		h        Handler
		key      string
		wantData bool
		wantErr  bool
	}{
		{"audio", NewAudioHandler(AudioOptions{}, nil), "a.wav", false, false},
		{"video", NewVideoHandler(VideoOptions{}, nil), "a.wav", false, false},
		{"npy", NewNPYHandler(NPYOptions{}), "a.wav", false, false},
		{"image", NewImageHandler(nil, nil, nil, 0), "a.wav", true, false},
		{"missing", NewAudioHandler(AudioOptions{}, nil), "b.wav", false, true},
	}
	for _, tt := range tests {
		in, err := fetch(ctx, Entry{Key: tt.key, Src: src}, tt.h)
		if tt.wantErr {
			if err == nil {
				t.Errorf("%s: no error for a missing file", tt.name)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if (in.Data != nil) != tt.wantData || in.Path != filepath.Join(dir, tt.key) {
			t.Errorf("%s: %d bytes read, path %q; want data %v, the file's path", tt.name, len(in.Data), in.Path, tt.wantData)
		}
	}
}
