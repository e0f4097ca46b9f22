package convert

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prep-dev/prep/augment"
	"github.com/prep-dev/prep/formats/hdf5"
	"github.com/prep-dev/prep/media/imgdec"
)

// writePNG writes an opaque w×h PNG at path.
func writePNG(t *testing.T, path string, w, h int) {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = byte(i * 5)
		if i%4 == 3 {
			img.Pix[i] = 255
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestResizeStripSkipped converts a 2×600 strip with resize=256, which
// would make it 256×76800, past the recipe's 16384-pixel side limit (the
// 1.3 Gpx of a 1×20000 strip is the same arithmetic): the run skips it
// with the reason and the fix, and converts the others.
func TestResizeStripSkipped(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	writePNG(t, filepath.Join(src, "x", "strip.png"), 2, 600)
	writePNG(t, filepath.Join(src, "x", "wide.png"), 40, 30)
	writePNG(t, filepath.Join(src, "y", "tall.png"), 30, 40)
	recipe, err := augment.Parse("resize=256")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := recipe.OutputSize(2, 600); err == nil {
		t.Fatal("OutputSize accepts the strip: the conversion below would make it")
	}
	h := NewScaledImageHandler(ImgdecDecoder(imgdec.Options{}), imgdec.Release, recipe, recipe.MinSide())
	m, _, err := convertDir(t, context.Background(), src, dst, func(o *Options) {
		o.Handler = func(string) Handler { return h }
		o.Recipe, o.Copies, o.ItemsPerShard = recipe.String(), 1, 10
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Skipped) != 1 || m.Skipped[0].Key != "x/strip.png" ||
		!strings.Contains(m.Skipped[0].Reason, "resize=256 would make this 2×600 image 256×76800 (19.7 Mpx), over the 16384-pixel side limit: crop it first") {
		t.Fatalf("skipped %+v, want x/strip.png refused by its size", m.Skipped)
	}
	if len(m.Shards) != 1 {
		t.Fatalf("%d shards, want 1", len(m.Shards))
	}
	r, err := hdf5.Format{}.Open(filepath.Join(dst, m.Shards[0].File), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []string
	for s, err := range r.Samples() {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s:%v", s.Key, s.Fields[0].Shape))
	}
	slices.Sort(got)
	if want := []string{"x/wide.png:[256 341 3]", "y/tall.png:[341 256 3]"}; !slices.Equal(got, want) {
		t.Errorf("samples %v, want %v", got, want)
	}
}
