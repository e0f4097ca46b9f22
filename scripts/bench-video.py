#!/usr/bin/python3
"""prep convert against ffmpeg doing the same decode, scale and crop, on
videos made from real photos.

    /usr/bin/python3 scripts/bench-video.py [--prep bin/prep] [--runs 3] [--workers 2]

Makes the video set first, once (out/benchvideos, stamped): COUNT clips of
4 to 8 s at 30 fps, each a slow zoom and pan over one photo of the real
photo set (scripts/benchphotos.py), at 480p, 720p or 1080p, as H.264 in
.mp4 (three in four) or VP9 in .webm. Then runs, --runs times in a
rotating order, with --workers processes or workers at a time:

  prep    prep convert SET DST --recipe resize=256,crop=224 --workers W
          --items-per-shard 64 (a fixed shard plan: no probe of the first video)
  ffmpeg  ffmpeg -i V -vf scale=-2:256,crop=224:224 -f rawvideo -pix_fmt rgb24 -
          to /dev/null, once per video

Each run is timed from outside on the wall clock and in CPU seconds. Prints
frames/s and prep/ffmpeg (goal 0.9), with the CPU model and flags.
"""

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PHOTOS = os.path.join(REPO, "out", "benchphotos")
VERSION = 1
SEED = 20261125
COUNT = 12
RECIPE = "resize=256,crop=224"
GOAL = 0.9


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prep", default=os.path.join(REPO, "bin", "prep"))
    ap.add_argument("--set", default=os.path.join(REPO, "out", "benchvideos"))
    ap.add_argument("--out", default=os.path.join(REPO, "out", "bench-video"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    make_set(a.set)
    files = sorted(os.path.join(a.set, f) for f in os.listdir(a.set))
    frames = sum(count_frames(f) for f in files)
    print_machine(a.prep)
    dst = os.path.join(a.out, "prep")
    cases = {
        "prep": lambda: run([a.prep, "convert", a.set, dst, "--recipe", RECIPE, "--workers",
                             str(a.workers), "--items-per-shard", "64"], clean=dst),
        "ffmpeg": lambda: run([sys.executable, "-c", PEER, str(a.workers)] + files),
    }
    runs = {k: [] for k in cases}
    names = list(cases)
    for r in range(a.runs):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            runs[name].append(cases[name]())
    with open(os.path.join(dst, "manifest.json")) as f:
        if json.load(f)["samples"] != frames:
            sys.exit(f"bench-video: prep wrote a different number of frames than the {frames} there are")
    print(f"{len(files)} videos, {frames} frames, recipe {RECIPE}, --workers {a.workers}, {a.runs} runs")
    med = {}
    for name, rs in runs.items():
        walls = [w for w, _ in rs]
        cpu = statistics.median(c for _, c in rs)
        med[name] = (frames / statistics.median(walls), frames / cpu)
        print(f"  {name:<7} {med[name][0]:>7.1f} frames/s ({', '.join(f'{frames / w:.1f}' for w in walls)}); "
              f"{cpu:.2f} CPU s, {med[name][1]:.1f} frames/CPU-s")
    wall, cpu = med["prep"][0] / med["ffmpeg"][0], med["prep"][1] / med["ffmpeg"][1]
    print(f"  prep/ffmpeg: {wall:.2f} (by CPU time {cpu:.2f}; goal >= {GOAL})")
    if a.json:
        print(json.dumps({"frames": frames, "ratio": {"wall": round(wall, 2), "cpu": round(cpu, 2)}}))


# The peer: ffmpeg once per video, `workers` at a time, output discarded.
PEER = r"""
import concurrent.futures, subprocess, sys
def one(v):
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-i", v, "-vf", "scale=-2:256,crop=224:224",
                    "-f", "rawvideo", "-pix_fmt", "rgb24", "-"], stdout=subprocess.DEVNULL, check=True)
with concurrent.futures.ThreadPoolExecutor(int(sys.argv[1])) as pool:
    list(pool.map(one, sys.argv[2:]))
"""


def run(cmd, clean=None):
    if clean:
        shutil.rmtree(clean, ignore_errors=True)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"bench-video: {' '.join(cmd[:3])} failed:\n{r.stderr}")
    return wall, (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)


def make_set(out):
    stamp = out.rstrip("/") + ".stamp"
    want = f"benchvideos v{VERSION} seed {SEED} count {COUNT}\n"
    if os.path.isdir(out) and os.path.exists(stamp) and open(stamp).read() == want:
        return
    subprocess.run([sys.executable, os.path.join(REPO, "scripts", "benchphotos.py"), "--out", PHOTOS], check=True)
    photos = sorted(os.path.join(d, f) for d, _, fs in os.walk(PHOTOS) for f in fs if f.endswith(".jpg"))
    rng = random.Random(SEED)
    tmp = out.rstrip("/") + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    for i in range(COUNT):
        photo = rng.choice(photos)
        w, h = rng.choice([(854, 480), (1280, 720), (1280, 720), (1920, 1080)])
        frames = 30 * rng.randint(4, 8)
        ext, codec = (".webm", ["-c:v", "libvpx-vp9", "-b:v", "2M", "-deadline", "realtime", "-cpu-used", "8"]) \
            if i % 4 == 3 else (".mp4", ["-c:v", "libx264", "-preset", "veryfast", "-crf", "20"])
        vf = (f"scale={2 * w}:{2 * h}:force_original_aspect_ratio=increase,crop={2 * w}:{2 * h},"
              f"zoompan=z='min(zoom+0.0015,1.4)':x='iw/2-(iw/zoom/2)+on':y='ih/2-(ih/zoom/2)':"
              f"d={frames}:s={w}x{h}:fps=30,format=yuv420p")
        dst = os.path.join(tmp, f"{i:02d}-{h}p{ext}")
        r = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-loop", "1", "-i", photo, "-vf", vf,
                            "-frames:v", str(frames), *codec, dst], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"bench-video: making {dst}: {r.stderr.strip()}")
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    with open(stamp, "w") as f:
        f.write(want)


def count_frames(path):
    r = subprocess.run(["ffprobe", "-v", "error", "-count_packets", "-select_streams", "v:0",
                        "-show_entries", "stream=nb_read_packets", "-of", "csv=p=0", path],
                       capture_output=True, text=True, check=True)
    return int(r.stdout.strip())


def print_machine(prep):
    print(benchlib.cpu_line(["avx2", "fma", "avx512f", "avx512bw"]))
    v = subprocess.run(["ffmpeg", "-version"], capture_output=True, text=True)
    print("  " + v.stdout.splitlines()[0])


if __name__ == "__main__":
    main()
