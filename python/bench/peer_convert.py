#!/usr/bin/python3
"""The typical Python conversion script that prep is measured against.

    /usr/bin/python3 python/bench/peer_convert.py SRC OUT.h5 [--workers 2] [--draft]

SRC is an ImageFolder (SRC/<class>/<file>; sorted class names are the
labels). Each file, in a multiprocessing Pool(--workers): PIL open ->
convert('RGB') -> resize the shorter side to --size, bilinear -> centre crop
--crop -> horizontal flip with probability --hflip (0.5; seeded per file) -> uint8
array, sent back to the parent, which writes it into one HDF5 file with h5py:
data (N, crop, crop, 3) uint8 and labels (N,) int64, in file order.

--draft first calls img.draft('RGB', (size, size)), as the scripts that know
Pillow do: a JPEG then decodes at the smallest DCT scale (1/2, 1/4 or 1/8)
that keeps both sides at least `size`, and the resize has less to do.

Prints one line: images, seconds, images/s (measured from before the pool
starts to after the HDF5 file is closed), or that line as JSON with --json.
"""

import argparse
import json
import os
import random
import sys
import time
from multiprocessing import Pool

import h5py
import numpy as np
from PIL import Image

# Set in each worker by the pool initializer.
_opts = None


def list_images(src):
    """ImageFolder listing: sorted (path, label) pairs."""
    classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    items = []
    for label, cls in enumerate(classes):
        folder = os.path.join(src, cls)
        for name in sorted(os.listdir(folder)):
            items.append((os.path.join(folder, name), label))
    return items


def init(opts):
    global _opts
    _opts = opts


def load(job):
    """Decode and augment one file: (index, uint8 array)."""
    index, path = job
    size, crop, draft, hflip, seed = _opts
    img = Image.open(path)
    if draft:
        img.draft("RGB", (size, size))
    img = img.convert("RGB")
    w, h = img.size
    # torchvision's Resize(size): shorter side to size, the other truncated
    if w <= h:
        nw, nh = size, int(size * h / w)
    else:
        nw, nh = int(size * w / h), size
    img = img.resize((nw, nh), Image.BILINEAR)
    # torchvision's CenterCrop(crop)
    left = int(round((nw - crop) / 2.0))
    top = int(round((nh - crop) / 2.0))
    img = img.crop((left, top, left + crop, top + crop))
    if random.Random(seed * 1_000_003 + index).random() < hflip:
        img = img.transpose(Image.FLIP_LEFT_RIGHT)
    return index, np.asarray(img, dtype=np.uint8)


def convert(items, out, workers, size, crop, draft, hflip, seed):
    with h5py.File(out, "w") as f:
        data = f.create_dataset("data", (len(items), crop, crop, 3), dtype=np.uint8)
        f.create_dataset("labels", data=np.array([l for _, l in items], dtype=np.int64))
        jobs = [(i, p) for i, (p, _) in enumerate(items)]
        with Pool(workers, initializer=init, initargs=((size, crop, draft, hflip, seed),)) as pool:
            for i, arr in pool.imap(load, jobs, chunksize=4):
                data[i] = arr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--crop", type=int, default=224)
    ap.add_argument("--draft", action="store_true", help="img.draft('RGB', (size, size)) first")
    ap.add_argument("--hflip", type=float, default=0.5, help="probability of a horizontal flip")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    items = list_images(a.src)
    if not items:
        sys.exit(f"peer_convert: no files in {a.src}: expected SRC/<class>/<file>")
    t0 = time.perf_counter()
    convert(items, a.out, a.workers, a.size, a.crop, a.draft, a.hflip, a.seed)
    dt = time.perf_counter() - t0
    r = {"images": len(items), "seconds": round(dt, 3), "images_per_s": round(len(items) / dt, 1),
         "draft": a.draft, "workers": a.workers}
    print(json.dumps(r) if a.json else
          f"{r['images']} images in {r['seconds']:.2f} s: {r['images_per_s']:.1f} images/s")


if __name__ == "__main__":
    main()
