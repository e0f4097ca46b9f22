package tarshard

import (
	"archive/tar"
	"bytes"
	"image"
	"image/png"
	"os"
	"testing"

	"github.com/prep-dev/prep/formats/formattest"
)

func TestConformance(t *testing.T) {
	common := formattest.Caps{Extra: true, Params: true, FieldName: fieldName, Hostile: hostileTar}
	png, wav := common, common
	png.Images, png.Ragged, png.Clips = true, true, true
	wav.Audio = true
	t.Run("png", func(t *testing.T) { formattest.Run(t, PNG(), png) })
	t.Run("wav", func(t *testing.T) { formattest.Run(t, WAV(), wav) })
}

// hostileTar writes a tar whose samples are well formed but for member
// names that leave the folder, as a crafted shard would have.
func hostileTar(t *testing.T, path string) {
	var img bytes.Buffer
	if err := png.Encode(&img, image.NewGray(image.Rect(0, 0, 2, 2))); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, name := range []string{"ok.png", "a/../../x.png"} {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(img.Len()), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(img.Bytes())
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
