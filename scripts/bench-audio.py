#!/usr/bin/python3
"""prep convert against sox and ffmpeg run once per file, on real audio.

    /usr/bin/python3 scripts/bench-audio.py [--prep bin/prep] [--runs 3] [--workers 2]

Makes the clip set first (scripts/benchaudio.py: skipped when made), reads
every file once so the page cache is warm, then, for the whole set and for
each of its formats (mp3, wav, flac, ogg), runs --runs times in a rotating order:

  prep    prep convert SET DST --rate 16000 --channels 1 --sample-format s16 --format wav
  sox     python/bench/peer_audio.py --tool sox: sox IN -r 16000 -c 1 -b 16 OUT.wav
  ffmpeg  the same with ffmpeg -ar 16000 -ac 1 -c:a pcm_s16le (what prep ran per
          file before), on the whole set only: it takes minutes

all with --workers processes or workers at a time. Each run is timed from
outside, process start to exit, on the wall clock and in CPU seconds (user
+ sys of the process and its children). Prints the median clips/s of each
case and the ratios prep/sox (goal 1.5, moonshot 5) and prep/ffmpeg, with the
CPU model and its SIMD flags.
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PEER = os.path.join(REPO, "python", "bench", "peer_audio.py")
MAKE_SET = os.path.join(REPO, "scripts", "benchaudio.py")
GOAL, MOONSHOT = 1.5, 5.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prep", default=os.path.join(REPO, "bin", "prep"))
    ap.add_argument("--set", default=os.path.join(REPO, "out", "benchaudio"))
    ap.add_argument("--out", default=os.path.join(REPO, "out", "bench-audio"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", action="store_true", help="also print the results as one JSON line")
    a = ap.parse_args()

    subprocess.run([sys.executable, MAKE_SET, "--out", a.set], check=True)
    print_machine(a.prep)
    results = {}
    for part in ["", "mp3", "wav", "flac", "ogg"]:
        src = os.path.join(a.set, part)
        files = sorted(os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs)
        benchlib.warm(files)
        cases = build_cases(a, src, with_ffmpeg=not part)
        runs = {c["name"]: [] for c in cases}
        for r in range(a.runs):
            k = r % len(cases)
            for c in cases[k:] + cases[:k]:
                runs[c["name"]].append(timed(c, len(files)))
        results[part or "all"] = report(part or "all", runs, len(files), seconds(files))
    if a.json:
        print(json.dumps({"workers": a.workers, "runs": a.runs, "sets": results}))


def print_machine(prep):
    print(benchlib.cpu_line(["avx2", "fma", "avx512f", "avx512bw"]))
    v = subprocess.run([prep, "version"], capture_output=True, text=True, check=True)
    print("\n".join("  " + l for l in v.stdout.splitlines()))
    for tool in ("sox", "ffmpeg"):
        r = subprocess.run([tool, "--version" if tool == "sox" else "-version"],
                           capture_output=True, text=True)
        print("  " + (r.stdout.strip().splitlines() or ["?"])[0])


def seconds(files):
    r = subprocess.run(["soxi", "-D", *files], capture_output=True, text=True, check=True)
    return sum(float(x) for x in r.stdout.split()[:len(files)])


def build_cases(a, src, with_ffmpeg):
    dst = os.path.join(a.out, "prep")
    prep = [a.prep, "convert", src, dst, "--rate", "16000", "--channels", "1",
            "--sample-format", "s16", "--format", "wav", "--workers", str(a.workers)]
    cases = [dict(name="prep", cmd=prep, clean=dst)]
    for tool in ("sox", "ffmpeg") if with_ffmpeg else ("sox",):
        out = os.path.join(a.out, tool)
        cases.append(dict(name=tool, cmd=[sys.executable, PEER, src, out, "--tool", tool,
                                          "--workers", str(a.workers)], clean=out))
    return cases


def timed(case, n):
    """Run one case; return (wall seconds, CPU seconds) after checking it wrote n clips."""
    shutil.rmtree(case["clean"], ignore_errors=True)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(case["cmd"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"bench-audio: {case['name']} failed ({' '.join(case['cmd'])}):\n{r.stderr}")
    if case["name"] == "prep":
        with open(os.path.join(case["clean"], "manifest.json")) as f:
            got = json.load(f)["samples"]
    else:
        got = int(r.stdout.split()[-1])
    if got != n:
        sys.exit(f"bench-audio: {case['name']} wrote {got} clips, want {n}")
    return wall, (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)


def report(part, runs, n, audio_s):
    print(f"{part}: {n} clips, {audio_s:.0f} s of audio")
    med = {}
    for name, rs in runs.items():
        rates = [n / w for w, _ in rs]
        cpu = statistics.median(c for _, c in rs)
        med[name] = (statistics.median(rates), n / cpu)
        print(f"  {name:<7} {med[name][0]:>7.1f} clips/s ({', '.join(f'{r:.1f}' for r in rates)}); "
              f"{cpu:.2f} CPU s, {med[name][1]:.1f} clips/CPU-s")
    out = {"clips": n, "audio_s": round(audio_s), "rates": {k: round(v[0], 1) for k, v in med.items()},
           "ratios": {}}
    for peer in [p for p in ("sox", "ffmpeg") if p in med]:
        wall = med["prep"][0] / med[peer][0]
        cpu = med["prep"][1] / med[peer][1]
        out["ratios"][peer] = {"wall": round(wall, 2), "cpu": round(cpu, 2)}
        goal = f"; goal >= {GOAL}, moonshot {MOONSHOT}" if peer == "sox" else ""
        print(f"  prep/{peer}: {wall:.2f} (by CPU time {cpu:.2f}{goal})")
    return out


if __name__ == "__main__":
    main()
