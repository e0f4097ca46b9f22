#!/usr/bin/python3
"""Training equivalence: online augmentation vs prep offline copies vs the split recipe.

    /usr/bin/python3 scripts/bench-train.py [--prep bin/prep] [--train 10000] [--epochs 10]
        [--seeds 0 1 2] [--json out/bench-train.json]

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
    """prep convert; for the split recipe on a prep without '|', the online part is written into
    the manifest as prep would write it (format_version 3, online_recipe)."""
    shutil.rmtree(dst, ignore_errors=True)
    cmd = [prep, "convert", src, dst, "--seed", "1", "--copies", str(copies), "--workers", "2"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd + ["--recipe", recipe], capture_output=True, text=True)
    if p.returncode != 0 and "|" in recipe:
        offline, online = (s.strip() for s in recipe.split("|"))
        shutil.rmtree(dst, ignore_errors=True)
        p = subprocess.run(cmd + ["--recipe", offline], capture_output=True, text=True)
        if p.returncode == 0:
            path = os.path.join(dst, "manifest.json")
            m = json.load(open(path))
            m["online_recipe"], m["format_version"] = online, 3
            json.dump(m, open(path, "w"))
            print(f"  ({prep} has no split recipe: wrote online_recipe {online!r} into the manifest)")
    if p.returncode != 0:
        sys.exit(f"prep convert failed:\n{p.stderr}")
    return time.perf_counter() - t0


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 7 * 7, 10)

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


def train(arm, batches, epochs, seed, test):
    """batches(epoch) yields (x float (N,1,28,28) in [0,1], y); returns (accuracy, seconds per
    epoch, seconds per epoch the loop waited for its batches)."""
    torch.manual_seed(seed)
    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
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


def prep_batches(ds, seed, epoch_indices=None):
    """Per epoch: ds.loader over the epoch's indices (all, or one copy's), shuffled by (seed, epoch)."""
    def batches(e):
        ds.set_epoch(e)
        sub = np.arange(len(ds)) if epoch_indices is None else epoch_indices(e)
        g = torch.Generator()
        g.manual_seed(seed * 1000 + e)
        order = sub[torch.randperm(len(sub), generator=g).numpy()]
        for x, y in ds.loader(128, sampler=order.tolist()):
            yield x[..., :1].permute(0, 3, 1, 2).float().div_(255), y
    return batches


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prep", default=os.path.join(REPO, "bin", "prep"))
    ap.add_argument("--out", default=os.path.join(REPO, "out", "bench-train"))
    ap.add_argument("--train", type=int, default=10000, help="training images (class-balanced subset)")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--arms", nargs="+", default=["torchvision", "copies=1", "copies=E", "split"])
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    torch.set_num_threads(2)
    E = a.epochs
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
        copy_of = np.array([int(k.rsplit("#c", 1)[1].split("#")[0]) for k in dE.keys])
        arms["copies=E"] = lambda seed: prep_batches(dE, seed, lambda e: np.flatnonzero(copy_of == e % E))
    if "split" in a.arms:
        conv["split"] = convert(a.prep, pngs, os.path.join(a.out, "split"), f"{OFFLINE} | {ONLINE}", 1)
        ds = ps.ShardDataset(os.path.join(a.out, "split"))
        assert ds.online is not None
        arms["split"] = lambda seed: prep_batches(ds, seed)
    for k, v in conv.items():
        print(f"  convert {k}: {v:.1f} s")

    results = {name: {"acc": [], "epoch_s": [], "wait_s": [], "convert_s": conv.get(name)} for name in arms}
    for seed in a.seeds:  # seeds outside, arms inside: a change in the machine's load hits every arm
        for name, make in arms.items():
            acc, t, w = train(name, make(seed), E, seed, test)
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
