#!/usr/bin/python3
"""prep convert against a typical PIL + h5py script, on real photos.

    /usr/bin/python3 scripts/bench-images.py [--prep bin/prep] [--runs 3] [--workers 2]
        [--sets large,small] [--variant 'avx2 GODEBUG=cpu.avx512f=off' ...]

For each photo set (large: out/benchphotos, 300 photos of 300-4000 px;
small: out/benchphotos-small, 1,000 photos of 300-1600 px), makes the set
first (scripts/benchphotos.py: skipped when made), reads every file once so
the page cache is warm, then runs, --runs times in a rotating order:

  prep     prep convert SET DST --recipe resize=256,crop=224,hflip=0.5 --workers W
  typical  python/bench/peer_convert.py SET OUT.h5 --workers W  (Pool(W), PIL, h5py)
  draft    the same with --draft (Image.draft before the resize)

and any --variant: prep again with extra environment variables (GODEBUG
turns Go's use of AVX-512 or AVX2 off, and so prep's SIMD loops). Each run is
timed from outside, process start to exit, on the wall clock and in CPU
seconds (user + sys of the process and its children). Prints the median
images/s of each case and the ratios prep/typical and prep/draft (goals 2.5
and 1.5, moonshots 4 and 2.5), with the CPU model and its SIMD flags: the VM
is shared, so the CPU-time ratios are printed too, as a check on the wall
clock ones.
"""

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time

import h5py
import PIL

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PEER = os.path.join(REPO, "python", "bench", "peer_convert.py")
MAKE_SET = os.path.join(REPO, "scripts", "benchphotos.py")
RECIPE = "resize=256,crop=224,hflip=0.5"
GOALS = {"typical": (2.5, 4.0), "draft": (1.5, 2.5)}
# name -> (folder, benchphotos.py flags)
SETS = {
    "large": (os.path.join(REPO, "out", "benchphotos"), []),
    "small": (os.path.join(REPO, "out", "benchphotos-small"), ["--small"]),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prep", default=os.path.join(REPO, "bin", "prep"))
    ap.add_argument("--sets", default="large,small",
                    help="which photo sets, comma-separated: large (out/benchphotos), "
                    "small (out/benchphotos-small)")
    ap.add_argument("--out", default=os.path.join(REPO, "out", "bench-images"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--variant", action="append", default=[], metavar="'NAME VAR=VALUE ...'",
                    help="also time prep with these environment variables")
    ap.add_argument("--json", action="store_true", help="also print the results as one JSON line")
    a = ap.parse_args()

    sets = [s.strip() for s in a.sets.split(",") if s.strip()]
    for name in sets:
        if name not in SETS:
            sys.exit(f"bench-images: unknown set {name!r} in --sets (want large, small)")
    print_machine(a.prep)
    results = {}
    for name in sets:
        path, flags = SETS[name]
        subprocess.run([sys.executable, MAKE_SET, "--out", path] + flags, check=True)
        files = photo_files(path)
        benchlib.warm(files)
        cases = build_cases(a, path)
        os.makedirs(a.out, exist_ok=True)
        runs = {c["name"]: [] for c in cases}
        load0 = os.getloadavg()[0]
        for r in range(a.runs):
            k = r % len(cases)
            for c in cases[k:] + cases[:k]:
                runs[c["name"]].append(timed(c, len(files)))
        load1 = os.getloadavg()[0]
        results[name] = report(name, runs, len(files), a, load0, load1)
    if a.json:
        print(json.dumps(results))


def photo_files(root):
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)
    if not files:
        sys.exit(f"bench-images: no photos under {root}: run scripts/benchphotos.py")
    return files


def print_machine(prep):
    print(benchlib.cpu_line(["avx2", "avx512f", "avx512bw", "avx512vl", "avx512vbmi"]))
    v = subprocess.run([prep, "version"], capture_output=True, text=True, check=True)
    print("\n".join("  " + l for l in v.stdout.splitlines()))
    print(f"  peers: Python {platform.python_version()}, Pillow {PIL.__version__}, "
          f"h5py {h5py.__version__}")


def build_cases(a, photos):
    dst = os.path.join(a.out, "prep")
    prep = [a.prep, "convert", photos, dst, "--recipe", RECIPE,
            "--workers", str(a.workers), "--seed", "1"]
    peer = [sys.executable, PEER, photos]
    cases = [
        dict(name="prep", cmd=prep, env={}, clean=dst),
        dict(name="typical", cmd=peer + [os.path.join(a.out, "typical.h5"),
                                         "--workers", str(a.workers)], env={}, clean=None),
        dict(name="draft", cmd=peer + [os.path.join(a.out, "draft.h5"),
                                       "--workers", str(a.workers), "--draft"], env={}, clean=None),
    ]
    for v in a.variant:
        name, *assigns = v.split()
        env = dict(kv.split("=", 1) for kv in assigns)
        cases.append(dict(name=f"prep {name}", cmd=prep, env=env, clean=dst))
    return cases


def timed(case, n):
    """Run one case; return (wall seconds, CPU seconds) after checking it wrote n samples."""
    if case["clean"]:
        shutil.rmtree(case["clean"], ignore_errors=True)
    env = dict(os.environ, **case["env"])
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(case["cmd"], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"bench-images: {case['name']} failed ({' '.join(case['cmd'])}):\n"
                 f"{r.stderr}")
    check_count(case, n)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return wall, cpu


def check_count(case, n):
    """The run must have written every photo: a skipped one would flatter it."""
    if case["clean"]:
        with open(os.path.join(case["clean"], "manifest.json")) as f:
            m = json.load(f)
        got = m["samples"]
    else:
        out = next(c for c in case["cmd"] if c.endswith(".h5"))
        with h5py.File(out, "r") as f:
            got = f["data"].shape[0]
    if got != n:
        sys.exit(f"bench-images: {case['name']} wrote {got} samples, want {n}")


def report(set_name, runs, n, a, load0, load1):
    print(f"set {set_name}: {n} photos, {a.runs} runs each, --workers {a.workers}, recipe {RECIPE}; "
          f"load average {load0:.1f} before, {load1:.1f} after")
    print(f"  {'case':<14} {'images/s':>9} {'runs (images/s)':<26} {'CPU s':>6} "
          f"{'images/CPU-s':>12}")
    med = {}
    for name, rs in runs.items():
        rates = [n / w for w, _ in rs]
        cpu = statistics.median(c for _, c in rs)
        med[name] = (statistics.median(rates), n / cpu)
        print(f"  {name:<14} {med[name][0]:>9.1f} {', '.join(f'{r:.1f}' for r in rates):<26} "
              f"{cpu:>6.1f} {med[name][1]:>12.1f}")
    result = {"images": n, "runs": a.runs, "workers": a.workers, "rates": {}, "ratios": {}}
    for name, (rate, per_cpu) in med.items():
        result["rates"][name] = {"images_per_s": round(rate, 1),
                                 "images_per_cpu_s": round(per_cpu, 1)}
    for name in med:
        if not name.startswith("prep"):
            continue
        for peer, (goal, moon) in GOALS.items():
            wall = med[name][0] / med[peer][0]
            cpu = med[name][1] / med[peer][1]
            result["ratios"][f"{name}/{peer}"] = {"wall": round(wall, 2), "cpu": round(cpu, 2)}
            print(f"  {name}/{peer}: {wall:.2f} (by CPU time {cpu:.2f}; "
                  f"goal >= {goal}, moonshot {moon})")
    return result


if __name__ == "__main__":
    main()
