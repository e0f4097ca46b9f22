package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prep-dev/prep/internal/testenv"
)

// TestEveryImageType converts a folder holding every image type of
// torchvision's IMG_EXTENSIONS and .gif, among them a .jpg that holds a
// WebP, and compares each sample with PIL's Image.open(f).convert("RGB");
// a truncated WebP is skipped with a reason naming the format.
func TestEveryImageType(t *testing.T) {
	src := t.TempDir()
	python(t, `
import sys, json, os
import numpy as np
from PIL import Image
d = sys.argv[1]
rng = np.random.default_rng(3)
for c in ("a", "b"):
    os.makedirs(os.path.join(d, c))
def img(w, h):
    return Image.fromarray(rng.integers(0, 256, (h, w, 3)).astype(np.uint8), "RGB")
img(30, 20).save(d + "/a/lossy.webp", quality=70)
img(30, 20).save(d + "/a/scraped.jpg", "WEBP", quality=70)
img(30, 20).quantize(32).save(d + "/a/p.gif")
img(31, 17).save(d + "/a/frames.tiff", save_all=True, append_images=[img(31, 17)], compression="tiff_lzw")
img(19, 23).convert("L").save(d + "/a/grey.pgm")
img(19, 23).convert("1").save(d + "/b/bits.pbm")
img(19, 23).save(d + "/b/rgb.ppm")
img(19, 23).save(d + "/b/rgb.bmp")
img(19, 23).save(d + "/b/rgb.tif")
img(19, 23).save(d + "/b/photo.jpeg", quality=90)
img(19, 23).save(d + "/b/x.png")
b = open(d + "/a/lossy.webp", "rb").read()
open(d + "/b/cut.webp", "wb").write(b[: len(b) // 2])
print("{}")
`, src)
	dst := t.TempDir()
	m := convertOK(t, src, dst, "--format", "png", "--order", "sorted")
	if m.Samples != 11 || len(m.Skipped) != 1 || len(m.Ignored) != 0 {
		t.Fatalf("%d samples, skipped %v, ignored %v; want 11, cut.webp, none", m.Samples, m.Skipped, m.Ignored)
	}
	if s := m.Skipped[0]; s.Key != "b/cut.webp" || !strings.HasPrefix(s.Reason, "truncated WebP: ") {
		t.Errorf("skipped %+v, want b/cut.webp as a truncated WebP", s)
	}
	got := python(t, `
import sys, io, json, tarfile
import numpy as np
from PIL import Image
src, shard = sys.argv[1], sys.argv[2]
fails, n = [], 0
with tarfile.open(shard) as tf:
    for mem in tf.getmembers():
        if not mem.name.endswith(".png"):
            continue
        key = json.loads(tf.extractfile(mem.name[:-4] + ".json").read())["key"]
        got = np.asarray(Image.open(io.BytesIO(tf.extractfile(mem).read())).convert("RGB"))
        want = np.asarray(Image.open(src + "/" + key).convert("RGB"))
        n += 1
        if got.shape != want.shape or (key.endswith((".jpeg",)) and np.abs(got.astype(int) - want).mean() > 1.5) or (not key.endswith(".jpeg") and not np.array_equal(got, want)):
            fails.append("%s: differs from PIL's" % key)
print(json.dumps({"fails": fails, "n": n}))
`, src, filepath.Join(dst, m.Shards[0].File))
	for _, f := range got["fails"].([]any) {
		t.Error(f)
	}
	if got["n"] != float64(11) {
		t.Errorf("read %v samples, want 11", got["n"])
	}
}

// TestHEIFAVIFJXLConvert converts a folder of HEIC, AVIF and JPEG XL files
// made by libheif's and libjxl's own encoders, one of them an AVIF named
// .jpg, and compares each sample with what the library's own decoder
// (heif-convert, djxl) writes; a HEIC cut short is skipped, named.
func TestHEIFAVIFJXLConvert(t *testing.T) {
	heifEnc := testenv.NeedCommand(t, "heif-enc", "libheif-examples")
	testenv.NeedCommand(t, "heif-convert", "libheif-examples")
	cjxl := testenv.NeedCommand(t, "cjxl", "libjxl-tools")
	testenv.NeedCommand(t, "djxl", "libjxl-tools")
	src, work := t.TempDir(), t.TempDir()
	python(t, `
import sys, os
import numpy as np
from PIL import Image
d = sys.argv[1]
rng = np.random.default_rng(5)
y, x = np.mgrid[0:40, 0:52]
for name, w, h in (("p1", 52, 40), ("p2", 37, 23), ("p3", 40, 30)):
    a = np.stack([(x * 5 + y) % 256, (y * 6) % 256, (x * y) % 256], -1)[:h, :w].astype(np.uint8)
    Image.fromarray(a, "RGB").save(os.path.join(d, name + ".png"))
print("{}")
`, work)
	for _, dir := range []string{"a", "b"} {
		if err := os.MkdirAll(filepath.Join(src, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	in := func(name string) string { return filepath.Join(work, name+".png") }
	for _, c := range [][]string{
		{heifEnc, "-q", "80", in("p1"), "-o", filepath.Join(src, "a", "phone.heic")},
		{heifEnc, "-A", "-q", "70", in("p2"), "-o", filepath.Join(src, "a", "web.avif")},
		{heifEnc, "-A", "-q", "70", in("p3"), "-o", filepath.Join(src, "b", "scraped.jpg")},
		{cjxl, in("p1"), filepath.Join(src, "b", "lossy.jxl"), "-d", "1"},
		{cjxl, in("p2"), filepath.Join(src, "b", "lossless.jxl"), "-d", "0"},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	heic, err := os.ReadFile(filepath.Join(src, "a", "phone.heic"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "a", "cut.heif"), heic[:len(heic)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	m := convertOK(t, src, dst, "--format", "png", "--order", "sorted")
	if m.Samples != 5 || len(m.Skipped) != 1 || len(m.Ignored) != 0 {
		t.Fatalf("%d samples, skipped %v, ignored %v; want 5, cut.heif, none", m.Samples, m.Skipped, m.Ignored)
	}
	if s := m.Skipped[0]; s.Key != "a/cut.heif" || !strings.HasPrefix(s.Reason, "truncated HEIF: ") && !strings.HasPrefix(s.Reason, "corrupt HEIF: ") {
		t.Errorf("skipped %+v, want a/cut.heif, named as a damaged HEIF", s)
	}
	got := python(t, `
import sys, io, json, os, subprocess, tarfile, tempfile
import numpy as np
from PIL import Image
src, shard = sys.argv[1], sys.argv[2]
fails, n = [], 0
with tarfile.open(shard) as tf, tempfile.TemporaryDirectory() as tmp:
    for mem in tf.getmembers():
        if not mem.name.endswith(".png"):
            continue
        key = json.loads(tf.extractfile(mem.name[:-4] + ".json").read())["key"]
        got = np.asarray(Image.open(io.BytesIO(tf.extractfile(mem).read())).convert("RGB"))
        ref = os.path.join(tmp, "%d.png" % n)
        tool = ["djxl"] if key.endswith(".jxl") else ["heif-convert"]
        subprocess.run(tool + [os.path.join(src, key), ref], check=True, capture_output=True)
        want = np.asarray(Image.open(ref).convert("RGB"))
        n += 1
        if got.shape != want.shape or not np.array_equal(got, want):
            fails.append("%s: differs from %s's decode" % (key, tool[0]))
print(json.dumps({"fails": fails, "n": n}))
`, src, filepath.Join(dst, m.Shards[0].File))
	for _, f := range got["fails"].([]any) {
		t.Error(f)
	}
	if got["n"] != float64(5) {
		t.Errorf("read %v samples, want 5", got["n"])
	}
}
