#!/usr/bin/python3
"""Sequential read speed from gs:// (fake-gcs-server with added latency) against the same shards on disk.

    bin/prep convert testdata/images /tmp/b --recipe resize=256,crop=224 --copies 400 --shard-size 16MiB
    /usr/bin/python3 python/bench/bench_gcs.py /tmp/b [--delay 20ms] [--rounds 3] [--json]

Starts python/tests/gcsserver (built with `go build` into --server's path
when missing) serving DIR as gs://b/d, every request delayed by --delay
(a network round trip), and reads one epoch each way, in one process
(with --workers N, the two streams through a DataLoader's N workers):

  stream   ShardStream(shuffle=True): per-sample reads, the default order
           (8 shards interleaved, a 1,024-sample shuffle window)
  inorder  ShardStream(shuffle=False): per-sample reads, in file order
  batch    BatchReader(256): contiguous batches, sequential
  map      ShardDataset.loader(256, shuffle=True): map-style, shuffled batches
           (random reads; not sequential, timed alongside)

Local reads run from the page cache (warmed first), the remote ones from
an empty chunk cache, so the ratio is the worst case: prefetch in the
rank's read order is what has to hide the latency. Goal: remote >= 0.8x
local samples/s. Also timed: a local first epoch from the disk (the
shards dropped from the page cache first), the fair partner of the first
epoch from gs://, and a second gs:// epoch from the filled chunk cache.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

import prepshards as ps  # noqa: E402


def epoch(make):
    """Samples/s of one full pass (the first item's wait included: that is what a cold start
    costs), and this process's CPU seconds (user + system) in it."""
    c0, t0 = os.times(), time.perf_counter()
    n = 0
    for item in make():
        n += len(item[1]) if hasattr(item[1], "__len__") else 1
    dt, c1 = time.perf_counter() - t0, os.times()
    return {"samples": n, "seconds": round(dt, 3), "samples_per_s": round(n / dt, 1),
            "cpu_s": round(c1.user + c1.system - c0.user - c0.system, 3)}


def median_run(runs):
    """The run with the median rate, and every run's rate."""
    ranked = sorted(runs, key=lambda r: r["samples_per_s"])
    return dict(ranked[(len(ranked) - 1) // 2], runs=[r["samples_per_s"] for r in runs])


def evict(ds):
    """Drop the shards from the page cache (POSIX_FADV_DONTNEED: clean pages go; no root
    needed), so that the next local read comes from the disk."""
    for s in ds.manifest.shards:
        if not s.get("path"):  # a shard whose inputs were all skipped has no file
            continue
        fd = os.open(s["path"], os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--delay", default="20ms")
    ap.add_argument("--server", default=os.path.join(REPO, "bin", "gcsserver"))
    ap.add_argument("--cache-dir", default=None,
                    help="where the chunk cache goes (default: a new folder in the temp dir; "
                    "/dev/shm puts it in memory, sparing the disk's write path)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="times each case runs, the cases alternating; the medians are reported")
    ap.add_argument("--direct", choices=("auto", "0", "1"), default="auto",
                    help="PREPSHARDS_GCS_DIRECT: 1 serves a first epoch from the fetch buffers and writes "
                    "the cache past the page cache (auto does so for shards over half the RAM)")
    ap.add_argument("--tls", action="store_true",
                    help="serve HTTPS, as GCS does (the reader then decrypts every byte; the server encrypts "
                    "on the same cores)")
    ap.add_argument("--workers", type=int, default=0,
                    help="read the two streams through a torch DataLoader with this many workers "
                    "(ShardStream(batch_size=64), the DataLoader's batch 64; the map-style loader with them; "
                    "BatchReader is left out); "
                    "CPU seconds are then the main process's only")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not os.path.exists(a.server):
        subprocess.run(["go", "build", "-o", a.server, "./python/tests/gcsserver"], cwd=REPO, check=True,
                       env=dict(os.environ, GOEXPERIMENT="simd"))
    cache = tempfile.mkdtemp(prefix="prepshards-bench-cache-", dir=a.cache_dir)
    tls = ["-tls", os.path.join(tempfile.mkdtemp(prefix="prepshards-bench-tls-"), "server.pem")] if a.tls else []
    if a.tls:
        os.environ["SSL_CERT_FILE"] = tls[1]  # the client trusts the test server's certificate
    srv = subprocess.Popen([a.server, "-dir", a.dir, "-bucket", "b", "-prefix", "d", "-delay", a.delay, *tls],
                           stdout=subprocess.PIPE, text=True)
    try:
        os.environ["STORAGE_EMULATOR_HOST"] = srv.stdout.readline().strip()
        os.environ["PREPSHARDS_CACHE"] = cache
        os.environ["PREPSHARDS_GCS_DIRECT"] = a.direct
        local = ps.ShardDataset(a.dir)
        for s in local.manifest.shards:  # page cache warm: the local side's best case
            with open(s["path"], "rb") as f:
                while f.read(16 << 20):
                    pass
        out = {"delay": a.delay, "cache": cache, "direct": a.direct, "tls": a.tls, "samples": len(local),
               "bytes": sum(s["bytes"] for s in local.manifest.shards),
               "rounds": a.rounds}
        readers = (("stream", lambda p: lambda: ps.ShardStream(p, seed=1)),
                   ("inorder", lambda p: lambda: ps.ShardStream(p, shuffle=False)),
                   ("batch", lambda p: lambda: ps.BatchReader(p, 256)),
                   ("map", lambda p: lambda: ps.ShardDataset(p).loader(256, shuffle=True, seed=1)))
        if a.workers:
            from torch.utils.data import DataLoader

            def loader(**kw):
                return lambda p: lambda: DataLoader(ps.ShardStream(p, batch_size=64, **kw), batch_size=64,
                                                    num_workers=a.workers)
            readers = (("stream", loader(seed=1)), ("inorder", loader(shuffle=False)),
                       ("map", lambda p: lambda: ps.ShardDataset(p).loader(256, shuffle=True, seed=1,
                                                                            num_workers=a.workers)))
            out["workers"] = a.workers
        runs = {(name, case): [] for name, _ in readers for case in ("local_cold", "local", "gcs", "gcs_warm")}
        # The rounds alternate the cases: this VM's memory state (pages the host
        # took back, see docs) moves first epochs by 2x from one minute to the next.
        for _ in range(a.rounds):
            for name, make in readers:
                evict(local)  # a first epoch from the disk, as the first epoch from gs:// is
                runs[name, "local_cold"].append(epoch(make(a.dir)))
                runs[name, "local"].append(epoch(make(a.dir)))
                shutil.rmtree(cache, ignore_errors=True)  # cold: every chunk comes from the server
                runs[name, "gcs"].append(epoch(make("gs://b/d")))
                runs[name, "gcs_warm"].append(epoch(make("gs://b/d")))  # a second epoch, from the filled cache
        for name, _ in readers:
            loc, rem, loc_cold, warm = (median_run(runs[name, c]) for c in ("local", "gcs", "local_cold", "gcs_warm"))
            out[name] = {"local": loc, "gcs": rem, "ratio": round(rem["samples_per_s"] / loc["samples_per_s"], 3),
                         "local_cold": loc_cold,
                         "ratio_cold": round(rem["samples_per_s"] / loc_cold["samples_per_s"], 3),
                         "gcs_warm": warm, "ratio_warm": round(warm["samples_per_s"] / loc["samples_per_s"], 3),
                         # per round: a first epoch from gs:// against the local one just before it
                         "ratio_cold_rounds": [round(g["samples_per_s"] / c["samples_per_s"], 3) for g, c in
                                               zip(runs[name, "gcs"], runs[name, "local_cold"])]}
        if a.json:
            print(json.dumps(out, indent=1))
        else:
            print(f"{out['samples']} samples, {out['bytes'] / 1e6:.0f} MB, {a.delay} per request, cache in "
                  f"{os.path.dirname(cache)}, PREPSHARDS_GCS_DIRECT={a.direct}{', HTTPS' if a.tls else ''}"
                  f"{f', DataLoader with {a.workers} workers' if a.workers else ''}; "
                  f"medians of {a.rounds} rounds (samples/s, the process's CPU s in the median epoch)")
            for name, _ in readers:
                r = out[name]
                print(f"  {name:7s} local {r['local']['samples_per_s']:>9.0f}/s ({r['local']['cpu_s']:.2f} s)  "
                      f"gs:// cold {r['gcs']['samples_per_s']:>9.0f}/s ({r['gcs']['cpu_s']:.2f} s, ratio "
                      f"{r['ratio']:.2f})  warm cache {r['gcs_warm']['samples_per_s']:>9.0f}/s "
                      f"({r['gcs_warm']['cpu_s']:.2f} s, ratio {r['ratio_warm']:.2f})")
                print(f"  {'':7s} first epochs: local from the disk {r['local_cold']['samples_per_s']:>9.0f}/s "
                      f"({r['local_cold']['cpu_s']:.2f} s), gs:// cold / local cold {r['ratio_cold']:.2f} "
                      f"(rounds: {', '.join(f'{x:.2f}' for x in r['ratio_cold_rounds'])}; gs:// "
                      f"{', '.join(f'{x:.0f}' for x in r['gcs']['runs'])}/s, local "
                      f"{', '.join(f'{x:.0f}' for x in r['local_cold']['runs'])}/s)")
    finally:
        srv.kill()
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
