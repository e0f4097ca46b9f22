#!/usr/bin/python3
"""Read speed of prepshards against h5py and prep's own bench-read, page cache warm.

    bin/prep convert testdata/images /tmp/b --recipe resize=256,crop=224 --copies 200
    /usr/bin/python3 python/bench/bench_reader.py /tmp/b [--workers 2] [--seconds 3] [--json]

Measurements (each stops after --seconds of steady state; DataLoader start-up
— forking workers, the first batch — is not counted):

  a   prepshards map-style, ds.loader(batch_size=B, shuffle=True, num_workers=W):
      a DataLoader over a BatchSampler; each worker reads a whole batch into
      one shared-memory tensor
  a1  prepshards map-style, plain DataLoader(ds, batch_size=B, shuffle=True,
      num_workers=W): per-sample __getitem__ + default_collate
  b   h5py behind a DataLoader, per-sample __getitem__ (file opened lazily per
      worker), batch_size=B, shuffle=True, num_workers=W
  c   h5py batch reads of B contiguous samples (f["data"][i:i+B]), one process
  d   prepshards BatchReader(B): contiguous batches, one preadv each, reused buffers
  e2  plain os.preadv of B samples into one reused buffer: the floor for any
      reader that hands out batches of B (a 38 MB batch does not stay in the
      CPU cache, bench-read's 16 MiB buffer may)
  e   prep bench-read DIR --json (Go; prep MB/s of its loader-style pass)

Ratios: a/b (goal >= 10) and d/e (goal >= 0.8), by MB/s.
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

import numpy as np  # noqa: E402

import prepshards as ps  # noqa: E402


def warm(ds):
    buf = bytearray(16 << 20)
    for s in ds.manifest.shards:
        with open(s["path"], "rb", buffering=0) as f:
            while f.readinto(buf):
                pass


def timed(batches, seconds, sample_bytes):
    """Iterate batches until `seconds` have passed after the first one; return rates."""
    it = iter(batches)
    first = next(it)
    del first
    n = 0
    t0 = time.perf_counter()
    t = t0
    for b in it:
        n += len(b[1])
        t = time.perf_counter()
        if t - t0 >= seconds:
            break
    dt = max(t - t0, 1e-9)
    return {"samples": n, "seconds": dt, "samples_per_s": n / dt, "mb_per_s": n * sample_bytes / dt / 1e6}


def forever(make):
    """Epoch after epoch of a loader (for datasets shorter than the time limit)."""
    epoch = 0
    while True:
        yield from make(epoch)
        epoch += 1


class H5PerSample:
    """What a typical h5py Dataset looks like: open lazily per worker, read one sample."""

    def __init__(self, path, count_per_shard):
        self.files = [s["path"] for s in path.manifest.shards]
        self.starts = np.concatenate([[0], np.cumsum(count_per_shard)])
        self.h = None

    def __len__(self):
        return int(self.starts[-1])

    def __getitem__(self, i):
        import h5py
        if self.h is None:
            self.h = [h5py.File(p, "r") for p in self.files]
        k = int(np.searchsorted(self.starts, i, side="right")) - 1
        f = self.h[k]
        j = i - int(self.starts[k])
        return f["data"][j], int(f["labels"][j])


def raw_batches(ds, B):
    """Plain preads of B samples' bytes into one reused buffer: the floor for
    any reader that hands out batch-sized arrays (bench-read's 16 MiB buffer
    stays in the CPU cache; a 256-sample batch of 224² images does not)."""
    per = ds.field_specs()[0]
    nbytes = int(np.prod(per.shape)) * per.dtype.itemsize
    buf = np.empty(B * nbytes, np.uint8)
    shards = [(s["path"], next(d for d in s["datasets"] if d["name"] == "data")["offset"], s["count"])
              for s in ds.manifest.shards if s["count"]]
    fds = [os.open(p, os.O_RDONLY) for p, _, _ in shards]
    ones = [0] * B
    while True:
        for fd, (_, off, count) in zip(fds, shards):
            for i in range(0, count, B):
                n = min(B, count - i)
                os.preadv(fd, [memoryview(buf)[:n * nbytes]], off + i * nbytes)
                yield buf, ones[:n]


def bench_h5py_batches(ds, B, seconds, sample_bytes):
    import h5py

    def gen():
        files = [h5py.File(s["path"], "r") for s in ds.manifest.shards]
        while True:
            for f in files:
                d, lab = f["data"], f["labels"]
                for i in range(0, d.shape[0], B):
                    yield d[i:i + B], lab[i:i + B]
    return timed(gen(), seconds, sample_bytes)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", help="an HDF5 shard folder written by prep convert")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="DataLoader workers (default: cores)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=3.0, help="time limit of each measurement")
    ap.add_argument("--prep", default=os.environ.get("PREP_BIN") or os.path.join(REPO, "bin", "prep"))
    ap.add_argument("--skip", default="", help="comma-separated measurements to skip (a,a1,b,c,d,e2,e)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))

    import torch
    from torch.utils.data import DataLoader

    ds = ps.ShardDataset(args.dir)
    if ds.format != "hdf5":
        sys.exit(f"{args.dir}: {ds.format} shards; this benchmark compares against h5py and needs HDF5")
    spec = ds.field_specs()
    sample_bytes = sum(int(np.prod(s.shape)) * s.dtype.itemsize for s in spec) + 8  # + the label
    warm(ds)
    B, W, S = args.batch, args.workers, args.seconds
    res = {"dir": args.dir, "samples": len(ds), "sample_bytes": sample_bytes, "batch": B, "workers": W,
           "seconds_limit": S, "torch": torch.__version__, "cores": os.cpu_count()}

    if "a" not in skip:
        dl = ds.loader(B, shuffle=True, num_workers=W, seed=0, persistent_workers=W > 0)
        res["a_prepshards_loader"] = timed(forever(lambda e: dl), S, sample_bytes)
        del dl
    if "a1" not in skip:
        dl = DataLoader(ds, batch_size=B, shuffle=True, num_workers=W, persistent_workers=W > 0)
        res["a1_prepshards_dataloader_per_sample"] = timed(forever(lambda e: dl), S, sample_bytes)
        del dl
    if "b" not in skip:
        h5ds = H5PerSample(ds, ds.manifest.counts)
        dl = DataLoader(h5ds, batch_size=B, shuffle=True, num_workers=W, persistent_workers=W > 0)
        res["b_h5py_dataloader_per_sample"] = timed(forever(lambda e: dl), S, sample_bytes)
        del dl
    if "c" not in skip:
        res["c_h5py_batches"] = bench_h5py_batches(ds, B, S, sample_bytes)
    if "d" not in skip:
        reader = ps.BatchReader(args.dir, B)
        res["d_prepshards_batch_reader"] = timed(forever(lambda e: reader), S, sample_bytes)
    if "e2" not in skip:
        res["e2_raw_batch_preads"] = timed(raw_batches(ds, B), S, sample_bytes)
    if "e" not in skip:
        try:
            out = subprocess.run([args.prep, "bench-read", args.dir, "--json"], capture_output=True,
                                 text=True, check=True, timeout=120).stdout
            e = json.loads(out)
            res["e_prep_bench_read"] = {"samples_per_s": e["samples_per_s"], "mb_per_s": e["prep"]["mb_per_s"],
                                        "raw_mb_per_s": e["raw"]["mb_per_s"]}
        except (OSError, subprocess.SubprocessError, ValueError, KeyError) as err:
            res["e_prep_bench_read"] = {"error": str(err)}

    def mb(k):
        return res.get(k, {}).get("mb_per_s")

    ratios = {}
    if mb("a_prepshards_loader") and mb("b_h5py_dataloader_per_sample"):
        ratios["a_over_b"] = mb("a_prepshards_loader") / mb("b_h5py_dataloader_per_sample")
    if mb("a1_prepshards_dataloader_per_sample") and mb("b_h5py_dataloader_per_sample"):
        ratios["a1_over_b"] = mb("a1_prepshards_dataloader_per_sample") / mb("b_h5py_dataloader_per_sample")
    if mb("d_prepshards_batch_reader") and mb("e_prep_bench_read"):
        ratios["d_over_e"] = mb("d_prepshards_batch_reader") / mb("e_prep_bench_read")
    if mb("d_prepshards_batch_reader") and mb("e2_raw_batch_preads"):
        ratios["d_over_e2"] = mb("d_prepshards_batch_reader") / mb("e2_raw_batch_preads")
    res["ratios"] = ratios

    if args.json:
        print(json.dumps(res, indent=2))
        return
    print(f"{args.dir}: {len(ds)} samples of {sample_bytes} B; batch {B}, {W} workers, "
          f"{S:g} s per measurement, page cache warm, torch {torch.__version__}, {os.cpu_count()} cores")
    names = {
        "a_prepshards_loader": "a  prepshards ds.loader (map-style, batched)",
        "a1_prepshards_dataloader_per_sample": "a1 prepshards DataLoader(ds) per-sample",
        "b_h5py_dataloader_per_sample": "b  h5py DataLoader per-sample",
        "c_h5py_batches": "c  h5py contiguous batch reads",
        "d_prepshards_batch_reader": "d  prepshards BatchReader",
        "e2_raw_batch_preads": "e2 raw preads into one batch-sized buffer",
        "e_prep_bench_read": "e  prep bench-read (Go)",
    }
    for k, label in names.items():
        r = res.get(k)
        if r is None:
            continue
        if "error" in r:
            print(f"  {label:48s} error: {r['error']}")
            continue
        print(f"  {label:48s} {r['samples_per_s']:>12,.0f} samples/s {r['mb_per_s']:>10,.0f} MB/s")
    for k, goal in (("a_over_b", 10), ("a1_over_b", None), ("d_over_e", 0.8), ("d_over_e2", None)):
        if k in ratios:
            g = f" (goal >= {goal})" if goal else ""
            print(f"  {k.replace('_over_', '/'):6s} {ratios[k]:6.2f}{g}")


if __name__ == "__main__":
    main()
