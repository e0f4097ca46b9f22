package main

import (
	"path/filepath"
	"strings"
	"testing"
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
