#!/usr/bin/python3
"""Samples/s delivered to a training loop: online crop/flip in prepshards vs torchvision vs none.

    /usr/bin/python3 python/bench/bench_online.py [PHOTOS] [--prep bin/prep] [--runs 3] [--seconds 3]

PHOTOS (default out/benchphotos if made, else testdata/images) is an
ImageFolder of real photos. It is converted twice, page cache warm:

  split    --recipe "resize=256,crop=256 | crop=224:random,hflip=0.5": 256x256 stored,
           prepshards crops and flips per epoch
  offline  --recipe "resize=256,crop=224": 224x224 stored, no online ops

with --copies enough for ~2,000 samples. Each case is timed for --seconds of
steady state after its first batch (worker start-up not counted), batch 64,
num_workers=2, shuffle, the loop taking uint8 batches and doing nothing else:

  tv        torchvision ImageFolder(PHOTOS) + Resize(256), CenterCrop(256),
            RandomCrop(224), RandomHorizontalFlip(), PILToTensor() in a DataLoader
  online    ShardDataset(split).loader(...): the crop and flip fused into the read
  plain     ShardDataset(offline).loader(...): 224x224 as stored (prepshards without online ops)
  raw       ShardDataset(split, raw=True).loader(...): the 256x256 stored samples

online+float and plain+float: the same, the loop making each batch NCHW
float in [0, 1] on the CPU (what a CPU training step takes).

--runs rounds in rotating order; prints each case's median samples/s with
its min-max and the ratios online/tv (goal >= 20) and online/plain (goal
>= 0.9, a cost of at most 10%).
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

import prepshards as ps  # noqa: E402

SPLIT = ("resize=256,crop=256", "crop=224:random,hflip=0.5")
OFFLINE = "resize=256,crop=224"


def convert(prep, src, dst, recipe, copies, online=None):
    """prep convert with ``recipe``, split at '|' before ``online`` when given."""
    shutil.rmtree(dst, ignore_errors=True)
    full = recipe if online is None else f"{recipe} | {online}"
    p = subprocess.run([prep, "convert", src, dst, "--seed", "1", "--copies", str(copies), "--recipe", full],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"prep convert {src} failed:\n{p.stderr}")
    for name in os.listdir(dst):  # page cache warm
        with open(os.path.join(dst, name), "rb") as f:
            while f.read(16 << 20):
                pass


def timed(make, seconds):
    """Samples/s over `seconds` after the first batch, epoch after epoch."""
    n, t0, epoch = 0, None, 0
    while True:
        for x, y in make(epoch):
            if t0 is None:
                t0 = time.perf_counter()
                continue
            n += len(y)
            if time.perf_counter() - t0 >= seconds:
                return n / (time.perf_counter() - t0)
        epoch += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    bench = os.path.join(REPO, "out", "benchphotos")
    ap.add_argument("photos", nargs="?", default=bench if os.path.isdir(bench) else os.path.join(REPO, "testdata", "images"))
    ap.add_argument("--prep", default=os.path.join(REPO, "bin", "prep"))
    ap.add_argument("--out", default=os.path.join(REPO, "out", "bench-online"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    import torch  # noqa: PLC0415
    import torchvision.transforms as T  # noqa: PLC0415
    from torchvision.datasets import ImageFolder  # noqa: PLC0415

    tv_ds = ImageFolder(a.photos, transform=T.Compose([T.Resize(256), T.CenterCrop(256), T.RandomCrop(224),
                                                       T.RandomHorizontalFlip(), T.PILToTensor()]))
    copies = max(1, -(-2000 // len(tv_ds)))
    split, offline = os.path.join(a.out, "split"), os.path.join(a.out, "offline")
    convert(a.prep, a.photos, split, SPLIT[0], copies, SPLIT[1])
    convert(a.prep, a.photos, offline, OFFLINE, copies)
    online, plain, raw = ps.ShardDataset(split), ps.ShardDataset(offline), ps.ShardDataset(split, raw=True)
    assert online.online is not None and tuple(online.field_specs()[0].shape) == (224, 224, 3)
    print(f"{a.photos}: {len(tv_ds)} photos x {copies} copies = {len(online)} samples; batch {a.batch}, "
          f"num_workers={a.workers}, {os.cpu_count()} cores, {a.seconds:g} s a case, {a.runs} rounds")
    from prepshards import _native  # noqa: PLC0415
    flags = sorted(set(open("/proc/cpuinfo").read().split()) & {"ssse3", "avx2", "avx512f", "avx512vbmi"})
    print(f"crop/flip kernel: {_native.path(3)}{'' if _native.available() else ' (' + _native.why_not + ')'}; "
          f"cpu flags: {' '.join(flags)}")

    def prep_case(ds):
        def make(epoch):
            ds.set_epoch(epoch)
            return ds.loader(a.batch, shuffle=True, num_workers=a.workers, seed=epoch)
        return make

    def tv_case(epoch):
        return torch.utils.data.DataLoader(tv_ds, batch_size=a.batch, shuffle=True, num_workers=a.workers)

    def to_float(make):
        """The same batches, made into what a CPU training step takes: NCHW float in [0, 1]."""
        def gen(epoch):
            for x, y in make(epoch):
                yield x.permute(0, 3, 1, 2).float().div_(255), y
        return gen

    cases = {"tv": tv_case, "online": prep_case(online), "plain": prep_case(plain), "raw": prep_case(raw),
             "online+float": to_float(prep_case(online)), "plain+float": to_float(prep_case(plain))}
    rates = {k: [] for k in cases}
    names = list(cases)
    for r in range(a.runs):
        for k in names[r % len(names):] + names[:r % len(names)]:
            rates[k].append(timed(cases[k], a.seconds))
    for k, v in rates.items():
        print(f"  {k:12s} {statistics.median(v):9.0f} samples/s  (min {min(v):.0f}, max {max(v):.0f})")
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"online/tv    {med['online'] / med['tv']:.1f}x (goal >= 20)")
    print(f"online/plain {med['online'] / med['plain']:.2f} (goal >= 0.9: online ops cost at most 10%)")
    print(f"online/plain {med['online+float'] / med['plain+float']:.2f} with the loop's .float().div(255) on CPU")


if __name__ == "__main__":
    main()
