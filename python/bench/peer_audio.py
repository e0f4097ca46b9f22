#!/usr/bin/python3
"""Convert every audio file under SRC to 16-bit mono WAV with a command-line
tool, one process per file, WORKERS at a time: how a typical data script
calls sox or ffmpeg.

    /usr/bin/python3 python/bench/peer_audio.py SRC OUT --tool sox|ffmpeg
        [--workers N] [--rate 16000]

Prints the number of files converted.
"""

import argparse
import concurrent.futures
import os
import subprocess
import sys


def command(tool, src, dst, rate):
    if tool == "sox":
        return ["sox", "-V1", src, "-r", str(rate), "-c", "1", "-b", "16", dst]
    return ["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", src,
            "-ar", str(rate), "-ac", "1", "-c:a", "pcm_s16le", dst]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--tool", choices=["sox", "ffmpeg"], default="sox")
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("--rate", type=int, default=16000)
    a = ap.parse_args()
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(a.src) for f in fs)
    os.makedirs(a.out, exist_ok=True)
    jobs = [(f, os.path.join(a.out, f"{i:06d}.wav")) for i, f in enumerate(files)]

    def run(job):
        r = subprocess.run(command(a.tool, job[0], job[1], a.rate), capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"peer_audio: {a.tool} {job[0]}: {r.stderr.strip()}")

    # Threads only wait on the processes: the parallelism is the tool's.
    with concurrent.futures.ThreadPoolExecutor(a.workers) as pool:
        list(pool.map(run, jobs))
    print(len(jobs))


if __name__ == "__main__":
    main()
