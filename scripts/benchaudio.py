#!/usr/bin/python3
"""Make the real-audio benchmark set: out/benchaudio/<format>/<file>.

    /usr/bin/python3 scripts/benchaudio.py [--out out/benchaudio] [--cache out/benchaudio-src]

Downloads four Debian packages that ship recordings (apt-get download, no
install): speech prompts (asterisk-core-sounds-en-wav, alsa-utils), music
and game sounds (frozen-bubble-data) and desktop sounds
(sound-theme-freedesktop). sox joins each kind into one long recording at
48 kHz stereo, then cuts COUNT clips of 1 to 12 s from them with a fixed
seed, written as a speech or music dataset would hold them:

  mp3   a third of the clips, 1 to 5 s (speech-corpus length, as Common Voice):
        mono at 48, 44.1, 22.05 or 16 kHz, some stereo at 44.1 kHz, CBR 32 to
        128 kbit/s or VBR, encoded by ffmpeg's libmp3lame (Xing/LAME header)
  wav   16-bit PCM at 16, 22.05, 44.1 or 48 kHz, mono or stereo; a tenth 24-bit
  flac  16- or 24-bit at 44.1 or 48 kHz
  ogg   Vorbis at 44.1 kHz stereo

Needs apt-get, dpkg-deb, sox and ffmpeg (make deps installs them). Idempotent: a set
made by the same VERSION is left alone (out/benchaudio.stamp); it is written
under OUT.tmp and renamed. scripts/benchaudio.md lists the sources and
their licences.
"""

import argparse
import glob
import os
import random
import shutil
import subprocess
import sys
import tarfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchphotos import download, read  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
VERSION = 2
SEED = 20261125
COUNT = 200

# kind -> [(package, folder in the package)]: every .wav/.ogg/.oga there.
SOURCES = {
    "speech": [("asterisk-core-sounds-en-wav", "usr/share/asterisk/sounds/en_US_f_Allison"),
               ("alsa-utils", "usr/share/sounds/alsa")],
    "music": [("frozen-bubble-data", "usr/share/games/frozen-bubble/snd")],
    "effects": [("sound-theme-freedesktop", "usr/share/sounds/freedesktop/stereo")],
}
KINDS = [("speech", 0.5), ("music", 0.35), ("effects", 0.15)]
# format -> share, and how its clips are drawn.
FORMATS = [("mp3", 1 / 3), ("wav", 0.37), ("flac", 0.2), ("ogg", 0.1)]
MP3_RATES = [(48000, 0.4), (44100, 0.25), (22050, 0.15), (16000, 0.2)]
MP3_QUALITY = [(["-b:a", "32k"], 0.2), (["-b:a", "64k"], 0.3), (["-b:a", "128k"], 0.2), (["-q:a", "5"], 0.3)]
WAV_RATES = [(16000, 0.3), (22050, 0.1), (44100, 0.35), (48000, 0.25)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "out", "benchaudio"))
    ap.add_argument("--cache", default=os.path.join(REPO, "out", "benchaudio-src"))
    a = ap.parse_args()
    for tool in ("sox", "ffmpeg"):
        if shutil.which(tool) is None:
            sys.exit(f"benchaudio: {tool} not found: apt-get install {tool} (or make deps)")
    stamp = a.out.rstrip("/") + ".stamp"
    want = f"benchaudio v{VERSION} seed {SEED} count {COUNT}\n"
    if os.path.isdir(a.out) and read(stamp) == want:
        print(f"benchaudio: {a.out} is up to date ({want.strip()})")
        return
    tapes = {kind: tape(kind, a.cache) for kind in SOURCES}
    tmp = a.out.rstrip("/") + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    made = make(tapes, tmp)
    shutil.rmtree(a.out, ignore_errors=True)
    os.rename(tmp, a.out)
    with open(stamp, "w") as f:
        f.write(want)
    seconds = sum(d for _, d in made)
    print(f"benchaudio: {len(made)} clips, {seconds:.0f} s of audio, in {a.out}")


def tape(kind, cache):
    """One 48 kHz stereo 16-bit WAV of every recording of a kind, in name order."""
    path = os.path.join(cache, kind + ".wav")
    if os.path.exists(path):
        return path
    parts = []
    for pkg, folder in SOURCES[kind]:
        dest = os.path.join(cache, pkg)
        if not os.path.isdir(dest):
            deb = download(pkg, cache)
            extract_audio(deb, folder, pkg, dest)
            os.remove(deb)
        parts += sorted(glob.glob(os.path.join(dest, "*.*")))
    parts = [p for p in parts if p.endswith((".wav", ".ogg", ".oga"))]
    norm = []
    for i, p in enumerate(parts):
        n = os.path.join(cache, f"{kind}-{i:04d}.wav")
        sox(p, "-r", "48000", "-c", "2", "-b", "16", n)
        norm.append(n)
    sox(*norm, path)
    for n in norm:
        os.remove(n)
    return path


def extract_audio(deb, folder, pkg, dest):
    """Extract the audio files under folder, and the copyright file."""
    p = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", deb], stdout=subprocess.PIPE)
    os.makedirs(dest, exist_ok=True)
    n = 0
    with tarfile.open(fileobj=p.stdout, mode="r|") as tf:
        for m in tf:
            name = m.name.removeprefix("./")
            keep = (name.startswith(folder + "/") and name.endswith((".wav", ".ogg", ".oga"))
                    or name == f"usr/share/doc/{pkg}/copyright")
            if keep and m.isfile():
                with open(os.path.join(dest, os.path.basename(name)), "wb") as f:
                    f.write(tf.extractfile(m).read())
                n += 1
    if p.wait() != 0 or n < 2:
        sys.exit(f"benchaudio: {deb}: no audio under {folder}: update SOURCES")


def sox(*args):
    r = subprocess.run(["sox", "-V1", *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"benchaudio: sox {' '.join(args)}: {r.stderr.strip()}")


def length(path):
    r = subprocess.run(["soxi", "-D", path], capture_output=True, text=True, check=True)
    return float(r.stdout)


def pick(rng, choices):
    x, acc = rng.random(), 0.0
    for value, share in choices:
        acc += share
        if x < acc:
            return value
    return choices[-1][0]


def make(tapes, out):
    rng = random.Random(SEED)
    lengths = {k: length(p) for k, p in tapes.items()}
    made = []
    for i in range(COUNT):
        kind, fmt = pick(rng, KINDS), pick(rng, FORMATS)
        dur = round(rng.uniform(1, 5) if fmt == "mp3" else rng.uniform(1, 12), 3)
        start = round(rng.uniform(0, max(0, lengths[kind] - dur)), 3)
        if fmt == "wav":
            rate, ch = pick(rng, WAV_RATES), rng.choice([1, 2])
            bits = 24 if rng.random() < 0.1 else 16
        elif fmt == "flac":
            rate, ch, bits = rng.choice([44100, 48000]), rng.choice([1, 2]), rng.choice([16, 16, 24])
        elif fmt == "mp3":
            rate, ch, bits = pick(rng, MP3_RATES), 1, 16
            if rate == 44100 and rng.random() < 0.6:
                ch = 2
            quality = pick(rng, MP3_QUALITY)
        else:
            rate, ch, bits = 44100, 2, 16
        name = os.path.join(out, fmt, f"{kind}-{i:03d}-{rate // 1000}k{ch}.{fmt}")
        os.makedirs(os.path.dirname(name), exist_ok=True)
        # dither off: the same sox gives the same bytes.
        opts = ["-r", str(rate), "-c", str(ch)] + (["-b", str(bits)] if fmt != "ogg" else [])
        if fmt == "mp3":
            # sox cuts a WAV, ffmpeg's libmp3lame encodes it (with the
            # Xing/LAME header that gives the gapless length).
            wav = name + ".tmp.wav"
            sox("-D", tapes[kind], *opts, wav, "trim", str(start), str(dur))
            r = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", wav, "-map_metadata", "-1",
                                "-c:a", "libmp3lame", *quality, name], capture_output=True, text=True)
            os.remove(wav)
            if r.returncode != 0:
                sys.exit(f"benchaudio: ffmpeg {name}: {r.stderr.strip()}")
        else:
            sox("-D", tapes[kind], *opts, name, "trim", str(start), str(dur))
        made.append((name, dur))
    return made


if __name__ == "__main__":
    main()
