#!/usr/bin/python3
"""Make the real-photo benchmark set: out/benchphotos/<class>/<file>.

    /usr/bin/python3 scripts/benchphotos.py [--small] [--out DIR] [--cache out/benchphotos-src]

Downloads six Debian packages that ship photographs (apt-get download, no
install), extracts the 55 photos listed in SOURCES and the packages'
copyright files into out/benchphotos-src/<package>/, and derives 300 files
from them with a fixed seed: a random crop of each photo (60-100% of each
side) resized with Lanczos to a long side of 300-4000 px (never larger than
the crop), saved as JPEG q75-95 (70% baseline, 30% progressive;
4:2:0, 4:2:2 or 4:4:4), greyscale JPEG, Adobe CMYK JPEG or RGB PNG. The class
of a file is the package its photo came from. scripts/benchphotos.md lists the
photos, their authors and licences.

--small makes the second set, out/benchphotos-small: 1,000 files of the same
kinds in the same shares, from the same photos, with another seed and a long
side of 300-1600 px (web images, product photos, datasets stored at reduced
size), where per-image costs weigh more than on camera-sized photos.

Needs Debian's python3-pil and apt-get. Idempotent: a set made by the same
VERSION is left alone (out/benchphotos.stamp); the set is written under
OUT.tmp and renamed, so an interrupted run leaves no half set. The same
package versions and Pillow give the same bytes.
"""

import argparse
import collections
import glob
import math
import os
import random
import shutil
import subprocess
import sys
import tarfile

import PIL
from PIL import Image, ImageOps

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
# VERSION changes whenever the sets this script makes change (2: the small
# set added; the large one kept its bytes).
VERSION = 2
PNG_MAX_SIDE = 1600  # a 4000-px photo as PNG is ~25 MB: keep PNGs modest
PROGRESSIVE = 0.30  # share of the JPEGs
SUBSAMPLING = [("4:2:0", 2, 0.65), ("4:2:2", 1, 0.10), ("4:4:4", 0, 0.25)]

# name -> seed, file count, exact counts of each kind (the rest are colour
# JPEGs), long-side bands (lo, hi, share; log-uniform within a band).
SETS = {
    # ImageNet-like small photos, then camera-sized ones.
    "large": dict(seed=20261125, count=300, kinds={"grey": 30, "cmyk": 6, "png": 15},
                  bands=[(300, 800, 0.45), (800, 2000, 0.35), (2000, 4000, 0.20)]),
    # The photos most datasets hold: web and product images, reduced copies.
    "small": dict(seed=20261205, count=1000, kinds={"grey": 100, "cmyk": 20, "png": 50},
                  bands=[(300, 1600, 1.0)]),
}

# package -> (class, folder inside the package, [photo files]). Only
# photographs: the packages' drawings and renders are left out.
SOURCES = {
    "mate-backgrounds": ("mate", "usr/share/backgrounds/mate/nature", [
        "Aqua.jpg", "Blinds.jpg", "Dune.jpg", "FreshFlower.jpg", "Garden.jpg",
        "GreenMeadow.jpg", "LadyBird.jpg", "RainDrops.jpg", "Storm.jpg",
        "TwoWings.jpg", "Wood.jpg", "YellowFlower.jpg"]),
    "plasma-workspace-wallpapers": ("plasma", "usr/share/wallpapers", [
        d + "/contents/images/2560x1600.jpg" for d in (
            "BytheWater", "ColdRipple", "ColorfulCups", "DarkestHour",
            "EveningGlow", "FallenLeaf", "Grey", "Kite", "OneStandsOut",
            "Path", "summer_1am")]),
    "lomiri-wallpapers-16.04": ("lomiri", "usr/share/backgrounds", [
        "Bridge_by_Sander_Klootwijk.jpg", "Dragonfly_by_Bolly.jpg",
        "Picture_0B_by_freespace.jpg", "Picture_1A_by_freespace.jpg",
        "Wine_by_Jakkub_Mede.jpg", "aitzgorri_by_Aitzol_Berasategi.jpg",
        "free_by_Peter_Nerlich.jpg", "friends_by_Aitzol_Berasategi.jpg",
        "greentock_by_Peter_Nerlich.jpg", "life_by_Aitzol_Berasategi.jpg",
        "picosdeeuropa_by_Aitzol_Berasategi.jpg",
        "seeding_by_Clements_Engelhardt.jpg",
        "sunset_by_Aitzol_Berasategi.jpg"]),
    "lomiri-wallpapers-20.04": ("lomiri", "usr/share/backgrounds", [
        "Kleiber_by_Lukas_Baubkus.jpg"]),
    "lxqt-themes": ("lxqt", "usr/share/lxqt/wallpapers", [
        "Butterfly-Kenneth-Wimer.jpg", "Valendas.png", "after-the-rain.jpg",
        "appleflower.png", "beam.png", "butterfly.png", "cloud.png",
        "drop.png", "flowers.png", "fog.jpg", "this-is-not-windows.jpg"]),
    "python3-skimage": ("skimage", "usr/lib/python3/dist-packages/skimage/data", [
        "astronaut.png", "chelsea.png", "coffee.png", "hubble_deep_field.jpg",
        "ihc.png", "retina.jpg", "rocket.jpg"]),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", action="store_true",
                    help="make the small set (300-1600 px) instead of the large one")
    ap.add_argument("--out", help="where to make the set (default out/benchphotos, "
                    "or out/benchphotos-small with --small)")
    ap.add_argument("--cache", default=os.path.join(REPO, "out", "benchphotos-src"),
                    help="where the extracted photos and copyright files are kept")
    a = ap.parse_args()
    name = "small" if a.small else "large"
    spec = SETS[name]
    if a.out is None:
        a.out = os.path.join(REPO, "out", "benchphotos-small" if a.small else "benchphotos")

    stamp = a.out.rstrip("/") + ".stamp"
    want = stamp_text(name, spec)
    if os.path.isdir(a.out) and read(stamp) == want:
        print(f"benchphotos: {a.out} is up to date ({want.strip()})")
        return
    photos = fetch_photos(a.cache)
    specs = plan(photos, spec)
    tmp = a.out.rstrip("/") + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    made = make(specs, tmp)
    shutil.rmtree(a.out, ignore_errors=True)
    os.rename(tmp, a.out)
    write_list(a.out.rstrip("/") + ".txt", made)
    with open(stamp, "w") as f:
        f.write(want)
    summarise(a.out, made, spec["bands"])


def stamp_text(name, spec):
    return (f"benchphotos v{VERSION} set {name} seed {spec['seed']} count {spec['count']} "
            f"pillow {PIL.__version__}\n")


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def fetch_photos(cache):
    """Extract the listed photos (and each package's copyright file) into
    cache/<package>/, downloading a package only while some are missing;
    the .deb is deleted afterwards.

    Returns [(class, package, name, path)] sorted, so the plan does not
    depend on the file system's order.
    """
    os.makedirs(cache, exist_ok=True)
    out = []
    for pkg, (cls, folder, files) in sorted(SOURCES.items()):
        dest = os.path.join(cache, pkg)
        want = {f"./{folder}/{f}": f for f in files}
        want[f"./usr/share/doc/{pkg}/copyright"] = "copyright"
        if not all(os.path.exists(os.path.join(dest, f)) for f in want.values()):
            deb = download(pkg, cache)
            extract(deb, want, dest)
            os.remove(deb)
        for f in files:
            out.append((cls, pkg, f, os.path.join(dest, f)))
    return sorted(out)


def download(pkg, cache):
    debs = sorted(glob.glob(os.path.join(cache, f"{pkg}_*.deb")))
    if debs:
        return debs[-1]
    os.makedirs(cache, exist_ok=True)  # benchaudio.py's cache too
    r = subprocess.run(["apt-get", "download", "-q", pkg], cwd=cache,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    debs = sorted(glob.glob(os.path.join(cache, f"{pkg}_*.deb")))
    if r.returncode != 0 or not debs:
        sys.exit(f"benchphotos: apt-get download {pkg} failed: {r.stderr.strip()}\n"
                 "(run `sudo apt-get update` first; the package is in Debian 12)")
    print(f"benchphotos: downloaded {os.path.basename(debs[-1])}", flush=True)
    return debs[-1]


def extract(deb, want, dest):
    """Extract the members named in want (tar path -> file name) into dest."""
    found = {}
    p = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", deb], stdout=subprocess.PIPE)
    with tarfile.open(fileobj=p.stdout, mode="r|") as tf:
        for m in tf:
            if m.name in want and m.isfile():
                found[m.name] = tf.extractfile(m).read()
    if p.wait() != 0:
        sys.exit(f"benchphotos: dpkg-deb --fsys-tarfile {deb} failed: delete it and rerun")
    missing = sorted(set(want) - set(found))
    if missing:
        sys.exit(f"benchphotos: {deb} lacks {missing}: a newer package version? "
                 "Update SOURCES in scripts/benchphotos.py")
    for name, data in found.items():
        path = os.path.join(dest, want[name])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)


def plan(photos, spec):
    """Draw every file's kind, size, source, crop and encoding, in order."""
    rng = random.Random(spec["seed"])
    sizes = {p[3]: Image.open(p[3]).size for p in photos}
    kinds = sum(([k] * n for k, n in spec["kinds"].items()), [])
    kinds += ["rgb"] * (spec["count"] - len(kinds))
    rng.shuffle(kinds)
    jpegs = [i for i, k in enumerate(kinds) if k != "png"]
    progressive = set(rng.sample(jpegs, round(len(jpegs) * PROGRESSIVE)))
    specs = []
    for i, kind in enumerate(kinds):
        target = draw_side(rng, spec["bands"], PNG_MAX_SIDE if kind == "png" else None)
        # never upscale: only photos at least as large as the target
        fit = [p for p in photos if max(sizes[p[3]]) >= target]
        cls, pkg, name, path = rng.choice(fit)
        w, h = sizes[path]
        box = draw_crop(rng, w, h, target)
        sub = draw_subsampling(rng) if kind == "rgb" else None
        specs.append(dict(
            index=i, kind=kind, cls=cls, pkg=pkg, name=name, path=path, box=box,
            side=min(target, max(box[2] - box[0], box[3] - box[1])),
            quality=rng.randint(75, 95), progressive=i in progressive,
            subsampling=sub))
    return specs


def draw_side(rng, bands, cap=None):
    r, acc = rng.random(), 0.0
    for lo, hi, share in bands:
        acc += share
        if r < acc or hi == bands[-1][1]:
            break
    hi = min(hi, cap or hi)
    lo = min(lo, hi)
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def draw_crop(rng, w, h, target):
    """A crop box of 60-100% of each side whose long side reaches target."""
    long_ = max(w, h)
    lo = min(1.0, max(0.6, target / long_))
    fw = rng.uniform(lo if w >= h else 0.6, 1.0)
    fh = rng.uniform(lo if h > w else 0.6, 1.0)
    cw, ch = max(1, round(w * fw)), max(1, round(h * fh))
    x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
    return (x, y, x + cw, y + ch)


def draw_subsampling(rng):
    r, acc = rng.random(), 0.0
    for name, value, share in SUBSAMPLING:
        acc += share
        if r < acc:
            return name, value
    return SUBSAMPLING[-1][:2]


def make(specs, out):
    """Write every spec, decoding each source photo once."""
    made = []
    by_path = collections.defaultdict(list)
    for s in specs:
        by_path[s["path"]].append(s)
    for path in sorted(by_path):
        src = ImageOps.exif_transpose(Image.open(path)).convert("RGB")
        for s in by_path[path]:
            made.append(write_one(src, s, out))
    return sorted(made, key=lambda m: m["file"])


def write_one(src, s, out):
    crop = src.crop(s["box"])
    cw, ch = crop.size
    scale = s["side"] / max(cw, ch)
    size = (max(1, round(cw * scale)), max(1, round(ch * scale)))
    img = crop.resize(size, Image.LANCZOS, reducing_gap=3.0) if size != crop.size else crop
    stem = os.path.splitext(os.path.basename(s["name"].split("/contents/")[0]))[0]
    ext = "png" if s["kind"] == "png" else "jpg"
    rel = f"{s['cls']}/{s['index']:03d}-{stem}.{ext}"
    path = os.path.join(out, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    desc = s["kind"]
    if s["kind"] == "png":
        img.save(path, "PNG")
    else:
        opts = dict(quality=s["quality"], progressive=s["progressive"])
        if s["kind"] == "grey":
            img = img.convert("L")
        elif s["kind"] == "cmyk":
            img = img.convert("CMYK")
        else:
            opts["subsampling"] = s["subsampling"][1]
            desc = f"rgb {s['subsampling'][0]}"
        img.save(path, "JPEG", **opts)
        desc += f" q{s['quality']} " + ("progressive" if s["progressive"] else "baseline")
    return dict(file=rel, kind=s["kind"], progressive=s["progressive"],
                subsampling=s["subsampling"][0] if s["subsampling"] else "",
                size=img.size, bytes=os.path.getsize(path), desc=desc,
                source=f"{s['pkg']}:{s['name']}")


def write_list(path, made):
    with open(path, "w") as f:
        for m in made:
            f.write(f"{m['file']}\t{m['size'][0]}x{m['size'][1]}\t{m['desc']}\t{m['source']}\n")


def summarise(out, made, size_bands):
    jpeg = [m for m in made if m["kind"] != "png"]
    rgb = [m for m in made if m["kind"] == "rgb"]
    count = collections.Counter
    longs = [max(m["size"]) for m in made]
    print(f"benchphotos: {len(made)} files in {out}, "
          f"{sum(m['bytes'] for m in made) / 1e6:.0f} MB, long side {min(longs)}-{max(longs)} px "
          f"(median {sorted(longs)[len(longs) // 2]})")
    print("  classes:", dict(sorted(count(m["file"].split("/")[0] for m in made).items())))
    print("  kinds:", dict(sorted(count(m["kind"] for m in made).items())))
    print(f"  JPEG: {sum(not m['progressive'] for m in jpeg)} baseline, "
          f"{sum(m['progressive'] for m in jpeg)} progressive; colour JPEG subsampling:",
          dict(sorted(count(m["subsampling"] for m in rgb).items())))
    bands = count(next(f"{lo}-{hi}" for lo, hi, _ in size_bands if l <= hi) for l in longs)
    print("  long side (px):", dict(bands))


if __name__ == "__main__":
    main()
