#!/usr/bin/python3
"""Training equivalence: online augmentation vs prep offline copies vs the split recipe.

    /usr/bin/python3 scripts/bench-train.py [--prep bin/prep] [--train 10000] [--epochs 10]
        [--seeds 0 1 2] [--json out/bench-train.json] [--photos out/benchphotos]

A tiny CNN (3x3 convs of 8 and 16 channels, then one linear layer: 9k weights) is trained on a class-balanced
subset of Fashion-MNIST's training set (Debian's dataset-fashion-mnist) and
tested on its whole 10,000-image test set, with the same augmentation,
RandomCrop(28, padding=2) + RandomHorizontalFlip, given four ways:

  a  torchvision   ImageFolder over the PNGs + RandomCrop/flip/ToTensor,
                   DataLoader(num_workers=2): fresh views every epoch
  b  copies=1      prep convert --recipe "crop=32,crop=28:random,hflip=0.5" --copies 1:
                   one augmented view, seen every epoch
  c  copies=E      the same with --copies E: epoch e reads the views of copy e
  d  split         prep convert --recipe "crop=32 | crop=28:random,hflip=0.5":
                   the padded image stored once, prepshards crops/flips it per epoch

(crop=32 of a 28x28 image pads it with black, as RandomCrop's padding does.)
Every arm sees the same model initialisation, batch order seed and optimiser
(Adam, lr 2e-3, batch 128) per seed. prep's arms read with ds.loader in the
training process (num_workers=0: on 2 cores, workers would take the
training's CPU). Prints test accuracy (mean +- sd over seeds), the wall
time per epoch (mean over every epoch of every seed) and how much of it the
loop spent waiting for batches; conversion time is printed apart (paid
once).

--photos DIR trains on real photos instead: an ImageFolder of photos of
mixed sizes (make bench's out/benchphotos: 300 files cut from 66 wallpapers
in 5 classes, by the desktop they ship with), every 4th source photo of a
class held out for the test with every file cut from it; offline resize=72,crop=72 and online crop=64:random,hflip=0.5
(torchvision: Resize(72), CenterCrop(72), RandomCrop(64), flip), the same
CNN on 64x64 RGB. Each arm is tested on its own pipeline's test images
(torchvision's Resize(72)+CenterCrop(64), prep's resize=72,crop=64), as a
user of each would; the held-out set is small, so the spread is wide.
"""

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(REPO, "python"))
import prepshards as ps  # noqa: E402

FMNIST = "/usr/share/datasets/fashion-mnist"
# numbered so that the sorted folder names (ImageFolder's and prep's labels) keep the idx labels
CLASSES = [f"{i}-{n}" for i, n in enumerate(
    ["tshirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "boot"])]
OFFLINE, ONLINE = "crop=32", "crop=28:random,hflip=0.5"
PREP_FLAGS = []  # --prep-flag: extra flags for every prep convert


def idx(name):
    path = os.path.join(FMNIST, name)
    if not os.path.exists(path):
        sys.exit(f"{path}: missing; install Debian's dataset-fashion-mnist (make bench-train does)")
    with gzip.open(path) as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def write_pngs(out, n):
    """A class-balanced subset of n training images as OUT/<class>/<i>.png (ImageFolder layout)."""
    from PIL import Image  # noqa: PLC0415
    done = os.path.join(out, ".done")
    if os.path.exists(done) and open(done).read() == f"{n} {CLASSES[0]}":
        return
    shutil.rmtree(out, ignore_errors=True)
    x, y = idx("train-images-idx3-ubyte.gz"), idx("train-labels-idx1-ubyte.gz")
    for c, name in enumerate(CLASSES):
        os.makedirs(os.path.join(out, name))
        for i in np.flatnonzero(y == c)[:n // len(CLASSES)]:
            Image.fromarray(x[i]).save(os.path.join(out, name, f"{i:05d}.png"))
    open(done, "w").write(f"{n} {CLASSES[0]}")


def convert(prep, src, dst, recipe, copies=1):
    """prep convert; the seconds it took."""
    shutil.rmtree(dst, ignore_errors=True)
    cmd = [prep, "convert", src, dst, "--seed", "1", "--copies", str(copies), "--workers", "2"] + PREP_FLAGS
    t0 = time.perf_counter()
    p = subprocess.run(cmd + ["--recipe", recipe], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"prep convert failed:\n{p.stderr}")
    return time.perf_counter() - t0


class Net(nn.Module):
    def __init__(self, channels=1, size=28, classes=10):
        super().__init__()
        self.c1 = nn.Conv2d(channels, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * (size // 4) ** 2, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.fc(x.flatten(1))


def test_accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        right = sum(int((model(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum()) for i in range(0, len(x), 1000))
    model.train()
    return right / len(x)


def train(arm, batches, epochs, seed, test, net=Net, lr=2e-3):
    """batches(epoch) yields (x float (N,C,H,W) in [0,1], y); returns (accuracy, seconds per
    epoch, seconds per epoch the loop waited for its batches)."""
    torch.manual_seed(seed)
    model = net()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    times, waits = [], []
    for e in range(epochs):
        t0 = time.perf_counter()
        wait = 0.0
        it = iter(batches(e))
        while True:
            t1 = time.perf_counter()
            b = next(it, None)
            wait += time.perf_counter() - t1
            if b is None:
                break
            opt.zero_grad()
            F.cross_entropy(model(b[0]), b[1]).backward()
            opt.step()
        times.append(time.perf_counter() - t0)
        waits.append(wait)
    return test_accuracy(model, *test), times, waits


def prep_batches(ds, seed, epoch_indices=None, channels=1, batch=128):
    """Per epoch: ds.loader over the epoch's indices (all, or one copy's), shuffled by (seed, epoch)."""
    def batches(e):
        ds.set_epoch(e)
        sub = np.arange(len(ds)) if epoch_indices is None else epoch_indices(e)
        g = torch.Generator()
        g.manual_seed(seed * 1000 + e)
        order = sub[torch.randperm(len(sub), generator=g).numpy()]
        for x, y in ds.loader(batch, sampler=order.tolist()):
            yield x[..., :channels].permute(0, 3, 1, 2).float().div_(255), y
    return batches


def copies_of(ds):
    """Each sample's copy number, from its key (KEY#cN...)."""
    return np.array([int(k.rsplit("#c", 1)[1].split("#")[0]) for k in ds.keys])


def source_of(name):
    """The photo a bench file was cut from: its name without the NNN- prefix and extension
    (benchphotos.py cuts several files from each photo)."""
    base = os.path.splitext(name)[0]
    head, _, rest = base.partition("-")
    return rest if head.isdigit() and rest else base


def split_photos(src, out):
    """src's ImageFolder split into out/train and out/test by source photo: in each class,
    every 4th photo (in name order) with every file cut from it is held out, so the test
    asks about photos the model never saw. Hard links (symlinks across file systems)."""
    done = os.path.join(out, ".done")
    if os.path.exists(done) and open(done).read() == "by-source " + os.path.abspath(src):
        return os.path.join(out, "train"), os.path.join(out, "test")
    shutil.rmtree(out, ignore_errors=True)
    for c in sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d))):
        for part in ("train", "test"):
            os.makedirs(os.path.join(out, part, c))
        files = sorted(os.listdir(os.path.join(src, c)))
        held = set(sorted({source_of(f) for f in files})[3::4])
        for f in files:
            a, b = os.path.join(src, c, f), os.path.join(out, "test" if source_of(f) in held else "train", c, f)
            try:
                os.link(a, b)
            except OSError:
                os.symlink(os.path.abspath(a), b)
    open(done, "w").write("by-source " + os.path.abspath(src))
    return os.path.join(out, "train"), os.path.join(out, "test")


def photos(a):
    """The --photos task: (arms, conversion times, per-arm test sets, net, title)."""
    import torchvision.transforms as T  # noqa: PLC0415
    from torchvision.datasets import ImageFolder  # noqa: PLC0415
    E = a.epochs
    train_dir, test_dir = split_photos(a.photos, os.path.join(a.out, "photos"))
    interp = getattr(T.InterpolationMode, a.tv_resize.upper())
    tv_train = ImageFolder(train_dir, transform=T.Compose([
        T.Resize(72, interp), T.CenterCrop(72), T.RandomCrop(64), T.RandomHorizontalFlip(), T.ToTensor()]))
    tv_test = ImageFolder(test_dir, transform=T.Compose([T.Resize(72, interp), T.CenterCrop(64), T.ToTensor()]))
    xs, ys = zip(*(tv_test[i] for i in range(len(tv_test))))
    tests = {"torchvision": (torch.stack(xs), torch.tensor(ys))}
    conv, arms = {}, {}
    conv["test"] = convert(a.prep, test_dir, os.path.join(a.out, "photos-test"), "resize=72,crop=64")
    dt = ps.ShardDataset(os.path.join(a.out, "photos-test"))
    assert dt.classes == tv_test.classes, (dt.classes, tv_test.classes)
    x, y = dt.get_batch(list(range(len(dt))))
    tests["prep"] = (torch.from_numpy(x).permute(0, 3, 1, 2).float().div_(255), torch.from_numpy(y).long())

    def tv_arm(seed):
        def batches(e):
            g = torch.Generator()
            g.manual_seed(seed * 1000 + e)
            yield from torch.utils.data.DataLoader(tv_train, batch_size=32, shuffle=True, generator=g,
                                                   num_workers=2)
        return batches
    off, on = "resize=72,crop=72", "crop=64:random,hflip=0.5"
    if "torchvision" in a.arms:
        arms["torchvision"] = tv_arm
    if "copies=1" in a.arms:
        conv["copies=1"] = convert(a.prep, train_dir, os.path.join(a.out, "photos-copies1"), f"{off},{on}", 1)
        d1 = ps.ShardDataset(os.path.join(a.out, "photos-copies1"))
        arms["copies=1"] = lambda seed: prep_batches(d1, seed, channels=3, batch=32)
    if "copies=E" in a.arms:
        conv["copies=E"] = convert(a.prep, train_dir, os.path.join(a.out, "photos-copiesE"), f"{off},{on}", E)
        dE = ps.ShardDataset(os.path.join(a.out, "photos-copiesE"))
        cE = copies_of(dE)
        arms["copies=E"] = lambda seed: prep_batches(dE, seed, lambda e: np.flatnonzero(cE == e % E), 3, 32)
    if "split" in a.arms:
        conv["split"] = convert(a.prep, train_dir, os.path.join(a.out, "photos-split"), f"{off} | {on}", 1)
        ds = ps.ShardDataset(os.path.join(a.out, "photos-split"))
        assert ds.online is not None
        arms["split"] = lambda seed: prep_batches(ds, seed, channels=3, batch=32)
    title = (f"photos {a.photos}: {len(tv_train)} training, {len(tv_test)} test images, "
             f"{len(tv_test.classes)} classes; {E} epochs; seeds {a.seeds}")
    return arms, conv, tests, (lambda: Net(3, 64, len(tv_test.classes))), title


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prep", default=os.path.join(REPO, "bin", "prep"))
    ap.add_argument("--out", default=os.path.join(REPO, "out", "bench-train"))
    ap.add_argument("--train", type=int, default=10000, help="training images (class-balanced subset)")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--arms", nargs="+", default=["torchvision", "copies=1", "copies=E", "split"])
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--photos", help="an ImageFolder of photos to train on instead of Fashion-MNIST")
    ap.add_argument("--tv-resize", default="bilinear", choices=["bilinear", "bicubic"],
                    help="--photos: torchvision's Resize filter (bicubic: PIL's a=-0.5 cubic, as prep's)")
    ap.add_argument("--prep-flag", action="append", default=[],
                    help="an extra flag for every prep convert (--prep-flag=--decoder=go)")
    ap.add_argument("--out-suffix", default="", help="a suffix for the shard folders (runs side by side)")
    a = ap.parse_args()
    PREP_FLAGS.extend(a.prep_flag)
    a.out += a.out_suffix
    torch.set_num_threads(2)
    E = a.epochs
    if a.photos:
        arms, conv, tests, net, title = photos(a)
        print(title + f"; torch threads {torch.get_num_threads()}; {os.cpu_count()} cores")
        run(a, arms, conv, lambda name: tests["torchvision" if name == "torchvision" else "prep"], net)
        return
    pngs = os.path.join(a.out, "train")
    write_pngs(pngs, a.train)
    tx, ty = idx("t10k-images-idx3-ubyte.gz"), idx("t10k-labels-idx1-ubyte.gz")
    test = (torch.from_numpy(tx.copy()).float().div_(255)[:, None], torch.from_numpy(ty.astype(np.int64)))
    print(f"Fashion-MNIST: {a.train} training images, {len(tx)} test images; {E} epochs; seeds {a.seeds}; "
          f"torch threads {torch.get_num_threads()}; {os.cpu_count()} cores")

    aug = f"{OFFLINE},{ONLINE}"
    arms = {}
    conv = {}
    if "torchvision" in a.arms:
        import torchvision.transforms as T  # noqa: PLC0415
        from torchvision.datasets import ImageFolder  # noqa: PLC0415
        tv = ImageFolder(pngs, transform=T.Compose([T.RandomCrop(28, padding=2), T.RandomHorizontalFlip(),
                                                    T.ToTensor()]))

        def tv_arm(seed):
            def batches(e):
                g = torch.Generator()
                g.manual_seed(seed * 1000 + e)
                dl = torch.utils.data.DataLoader(tv, batch_size=128, shuffle=True, generator=g, num_workers=2)
                for x, y in dl:
                    yield x[:, :1], y
            return batches
        arms["torchvision"] = tv_arm
    if "copies=1" in a.arms:
        conv["copies=1"] = convert(a.prep, pngs, os.path.join(a.out, "copies1"), aug, 1)
        d1 = ps.ShardDataset(os.path.join(a.out, "copies1"))
        arms["copies=1"] = lambda seed: prep_batches(d1, seed)
    if "copies=E" in a.arms:
        conv["copies=E"] = convert(a.prep, pngs, os.path.join(a.out, "copiesE"), aug, E)
        dE = ps.ShardDataset(os.path.join(a.out, "copiesE"))
        copy_of = copies_of(dE)
        arms["copies=E"] = lambda seed: prep_batches(dE, seed, lambda e: np.flatnonzero(copy_of == e % E))
    if "split" in a.arms:
        conv["split"] = convert(a.prep, pngs, os.path.join(a.out, "split"), f"{OFFLINE} | {ONLINE}", 1)
        ds = ps.ShardDataset(os.path.join(a.out, "split"))
        assert ds.online is not None
        arms["split"] = lambda seed: prep_batches(ds, seed)
    run(a, arms, conv, lambda name: test, Net)


def run(a, arms, conv, test_of, net):
    """Train every arm for every seed; print the table (and write --json)."""
    for k, v in conv.items():
        print(f"  convert {k}: {v:.1f} s")
    E = a.epochs
    results = {name: {"acc": [], "epoch_s": [], "wait_s": [], "convert_s": conv.get(name)} for name in arms}
    for seed in a.seeds:  # seeds outside, arms inside: a change in the machine's load hits every arm
        for name, make in arms.items():
            acc, t, w = train(name, make(seed), E, seed, test_of(name), net)
            r = results[name]
            r["acc"].append(acc)
            r["epoch_s"] += t
            r["wait_s"] += w
            print(f"  {name:12s} seed {seed}: test accuracy {acc:.4f}, {statistics.mean(t):.2f} s/epoch, "
                  f"{statistics.mean(w):.2f} s of it waiting for data", flush=True)
    print(f"\n| arm | test accuracy (mean ± sd, {len(a.seeds)} seeds) | wall s/epoch (mean ± sd) | "
          "of which waiting for data | convert s |")
    print("|---|---|---|---|---|")
    for name, r in results.items():
        sd = statistics.stdev(r["acc"]) if len(r["acc"]) > 1 else 0.0
        cs = "" if r["convert_s"] is None else f"{r['convert_s']:.1f}"
        print(f"| {name} | {100 * statistics.mean(r['acc']):.2f} ± {100 * sd:.2f} % | "
              f"{statistics.mean(r['epoch_s']):.2f} ± {statistics.stdev(r['epoch_s']) if len(r['epoch_s']) > 1 else 0:.2f} | "
              f"{statistics.mean(r['wait_s']):.2f} | {cs} |")
    if a.json:
        json.dump(results, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
