#!/usr/bin/python3
"""Makes testdata/images (real photographs) and testdata/edge (crafted cases).

Run with Debian's python3 (python3-pil, python3-numpy) from the repository root:

    /usr/bin/python3 testdata/make_images.py SKIMAGE_DATA_DIR
    /usr/bin/python3 testdata/make_images.py --progressive   (testdata/progressive only)

SKIMAGE_DATA_DIR is skimage/data from Debian's python3-skimage package (0.19.3-8):
    apt-get download python3-skimage && dpkg-deb -x python3-skimage_*.deb x
    SKIMAGE_DATA_DIR=x/usr/lib/python3/dist-packages/skimage/data
Every photograph used is public domain or CC0 according to skimage/data/_fetchers.py
in that package; testdata/README.md lists each one. The output is deterministic.
"""
import io
import os
import struct
import sys
import zlib

import numpy as np
from PIL import Image

ROOT = os.path.dirname(os.path.abspath(__file__))
IMAGES = os.path.join(ROOT, "images")
EDGE = os.path.join(ROOT, "edge")


def save_photo(src, cls, name, size=None, mode=None, **kw):
    im = Image.open(src)
    im.load()
    if mode:
        im = im.convert(mode)
    elif im.mode not in ("RGB", "L"):
        im = im.convert("RGB")
    if size:
        im = im.resize(size, Image.LANCZOS)
    os.makedirs(os.path.join(IMAGES, cls), exist_ok=True)
    path = os.path.join(IMAGES, cls, name)
    im.save(path, "PNG" if name.endswith(".png") else "JPEG", **kw)
    return path


def make_photos(sk):
    j = lambda n: os.path.join(sk, n)
    # space: NASA / SpaceX, public domain.
    save_photo(j("astronaut.png"), "space", "astronaut.jpg", quality=85)
    save_photo(j("rocket.jpg"), "space", "rocket.jpg", quality=85, progressive=True)
    save_photo(j("hubble_deep_field.jpg"), "space", "hubble.jpg", size=(800, 698), quality=75,
               subsampling=0)  # 4:4:4
    # everyday: CC0 by the photographers.
    save_photo(j("chelsea.png"), "everyday", "chelsea.jpg", quality=90)
    save_photo(j("coffee.png"), "everyday", "coffee.png", size=(300, 200), optimize=True)
    save_photo(j("camera.png"), "everyday", "camera.jpg", quality=85)  # greyscale JPEG
    # science: CC0.
    save_photo(j("retina.jpg"), "science", "retina.jpg", size=(1200, 1200), quality=75)
    save_photo(j("gravel.png"), "science", "gravel.png", size=(320, 320), optimize=True)


def png_chunk(kind, data):
    c = kind + data
    return struct.pack(">I", len(data)) + c + struct.pack(">I", zlib.crc32(c) & 0xFFFFFFFF)


def write_png(path, w, h, depth, ctype, raw_rows, extra=b""):
    """Writes a PNG by hand so bit depths and colour types PIL cannot save are covered."""
    ihdr = struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 0)
    data = b"".join(b"\x00" + r for r in raw_rows)  # filter 0 on every row
    out = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + extra
    out += png_chunk(b"IDAT", zlib.compress(data, 9)) + png_chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(out)


def tiff_orientation(value, big_endian):
    """A minimal TIFF block (the EXIF payload) with IFD0 holding only Orientation."""
    e = ">" if big_endian else "<"
    head = (b"MM" if big_endian else b"II") + struct.pack(e + "HI", 42, 8)
    ifd = struct.pack(e + "H", 2)
    ifd += struct.pack(e + "HHI", 0x010F, 2, 4) + b"cam\x00"  # Make, inline ASCII
    ifd += struct.pack(e + "HHIHH", 0x0112, 3, 1, value, 0)
    ifd += struct.pack(e + "I", 0)
    return head + ifd


def gradient(w, h):
    """An asymmetric RGB test card: every orientation gives a different picture."""
    y, x = np.mgrid[0:h, 0:w]
    r = (x * 255 // max(w - 1, 1)).astype(np.uint8)
    g = (y * 255 // max(h - 1, 1)).astype(np.uint8)
    b = (((x // 8) + (y // 8)) % 2 * 200).astype(np.uint8)
    a = np.stack([r, g, b], axis=-1)
    a[: h // 4, : w // 4] = (255, 0, 0)  # a red corner marks the top left
    return a


def make_edge(sk):
    os.makedirs(EDGE, exist_ok=True)
    e = lambda n: os.path.join(EDGE, n)
    rng = np.random.default_rng(7)

    # 16-bit RGBA and 16-bit grey, written by hand (big-endian samples).
    w, h = 37, 23
    rgba16 = rng.integers(0, 65536, size=(h, w, 4), dtype=np.uint16)
    rgba16[0, :, 3] = 65535
    write_png(e("rgba16.png"), w, h, 16, 6, [rgba16[i].astype(">u2").tobytes() for i in range(h)])
    rgb16 = rng.integers(0, 65536, size=(h, w, 3), dtype=np.uint16)
    write_png(e("rgb16.png"), w, h, 16, 2, [rgb16[i].astype(">u2").tobytes() for i in range(h)])
    grey16 = rng.integers(0, 65536, size=(h, w), dtype=np.uint16)
    write_png(e("grey16.png"), w, h, 16, 0, [grey16[i].astype(">u2").tobytes() for i in range(h)])

    # Palette with transparency (tRNS), 8-bit grey, grey+alpha.
    pal = Image.fromarray(gradient(40, 30)).quantize(16, dither=Image.Dither.NONE)
    trns = bytes([0, 64, 128, 200] + [255] * 12)
    pal.save(e("palette_trns.png"), transparency=trns)
    pal.save(e("palette.png"))
    Image.fromarray(gradient(40, 30)).convert("L").save(e("grey.png"))
    la = Image.fromarray(gradient(40, 30)).convert("LA")
    la.putalpha(Image.fromarray(rng.integers(0, 256, size=(30, 40), dtype=np.uint8)))
    la.save(e("grey_alpha.png"))
    # Truecolour and grey with a tRNS colour key.
    rgb = gradient(24, 16)
    key = struct.pack(">HHH", *rgb[0, 0].tolist())
    write_png(e("rgb_trns.png"), 24, 16, 8, 2, [rgb[i].tobytes() for i in range(16)],
              png_chunk(b"tRNS", key))

    # EXIF orientation: the same pixels, stored turned; each file says how to turn it back.
    base = Image.fromarray(gradient(64, 40))
    for o, big in [(3, False), (6, False), (8, True), (2, False), (5, True), (7, False), (4, True)]:
        base.save(e("exif_%d.jpg" % o), quality=95, subsampling=0, exif=b"Exif\0\0" + tiff_orientation(o, big))
    base.save(e("exif_1.jpg"), quality=95, subsampling=0, exif=b"Exif\0\0" + tiff_orientation(1, False))
    # PNG with an eXIf chunk (lossless: decoded pixels compare exactly with PIL's).
    a = gradient(30, 20)
    write_png(e("exif_6.png"), 30, 20, 8, 2, [a[i].tobytes() for i in range(20)],
              png_chunk(b"eXIf", tiff_orientation(6, True)))

    # CMYK JPEG (Adobe, inverted) as Photoshop writes them.
    Image.fromarray(gradient(48, 32)).convert("CMYK").save(e("cmyk.jpg"), quality=95)
    # The same with C sampled 2×2 and M, Y, K 1×1 (subsampling=2 applies to the
    # first component only): image/jpeg refuses it, libjpeg decodes it.
    Image.fromarray(gradient(48, 32)).convert("CMYK").save(e("cmyk_420.jpg"), quality=95, subsampling=2)
    # ycck_420.jpg (Adobe YCCK, Y sampled 2×2) is written by make_ycck.c: PIL cannot write YCCK.

    # Broken inputs.
    photo = open(os.path.join(IMAGES, "space", "rocket.jpg"), "rb").read()
    with open(e("truncated.jpg"), "wb") as f:
        f.write(photo[: len(photo) * 6 // 10])
    png = open(os.path.join(IMAGES, "everyday", "coffee.png"), "rb").read()
    with open(e("truncated.png"), "wb") as f:
        f.write(png[: len(png) // 2])
    open(e("empty.jpg"), "wb").close()
    with open(e("text.jpg"), "w") as f:
        f.write("this is not an image, just text saved with a .jpg name\n")
    Image.fromarray(gradient(8, 8)).save(e("tiny.gif"))
    # A 30000×20000 header over a 1×1 body: must be refused before any pixel is decoded.
    write_png(e("huge_header.png"), 30000, 20000, 8, 0, [b"\x00"])


def make_progressive():
    """Progressive JPEGs of every component layout, from a committed photo:
    a decode at 1/8 scale drops the AC scans it does not read (imgdec)."""
    out = os.path.join(ROOT, "progressive")
    os.makedirs(out, exist_ok=True)
    im = Image.open(os.path.join(IMAGES, "science", "retina.jpg")).convert("RGB").resize((328, 248), Image.LANCZOS)
    im.save(os.path.join(out, "rgb420.jpg"), quality=90, progressive=True, subsampling=2)
    im.save(os.path.join(out, "rgb422.jpg"), quality=90, progressive=True, subsampling=1)
    im.save(os.path.join(out, "rgb444.jpg"), quality=90, progressive=True, subsampling=0)
    im.convert("L").save(os.path.join(out, "grey.jpg"), quality=90, progressive=True)
    im.convert("CMYK").save(os.path.join(out, "cmyk.jpg"), quality=90, progressive=True)


def main():
    if sys.argv[1:] == ["--progressive"]:
        make_progressive()
        return
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    make_photos(sys.argv[1])
    make_edge(sys.argv[1])
    make_progressive()


if __name__ == "__main__":
    main()
