"""Shards written by the real bin/prep once per test session, and reference readers.

The binary is $PREP_BIN, else <repo>/bin/prep (the repo root is two levels
up from this folder). A missing binary, numpy, h5py, PIL or torch skips
the tests that need it, except under CI=true, where it fails them.
"""

import importlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import wave
from concurrent.futures import ThreadPoolExecutor

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
TESTDATA = os.path.join(ROOT, "testdata")
CI = os.environ.get("CI", "").lower() == "true"


def missing(what):
    """Skip, or fail under CI=true, for a missing dependency."""
    if CI:
        pytest.fail(f"{what} is missing (CI=true: failing rather than skipping)", pytrace=False)
    pytest.skip(f"{what} is missing")


def need(module):
    try:
        return importlib.import_module(module)
    except ImportError:
        missing(f"python module {module}")


def prep_bin():
    path = os.environ.get("PREP_BIN") or os.path.join(ROOT, "bin", "prep")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        missing(f"the prep binary ({path}; build it with make, or set PREP_BIN)")
    return path


# name -> (source, extra args); sources starting with "@" are made below
CONVERSIONS = {
    "img_h5": ("images", ["--recipe", "resize=40,crop=32:random,hflip=0.5", "--copies", "3", "--items-per-shard", "10"]),
    "img_png": ("images", ["--format", "png", "--recipe", "resize=40,crop=32:random,hflip=0.5", "--copies", "2", "--items-per-shard", "6"]),
    "npy_ragged": ("@npy_ragged", []),
    "npz_h5": ("@npz", []),
    "npz_fixed": ("@npz_fixed", ["--items-per-shard", "3"]),
    "split_h5": ("@split", ["--split-axis", "0"]),
    "split_fixed": ("@split_fixed", ["--split-axis", "0", "--items-per-shard", "7"]),
    "video_h5": ("@video", ["--clip", "4", "--recipe", "resize=32,crop=32", "--max-frames", "16"]),
    "video_png": ("@video", ["--clip", "4", "--recipe", "resize=32,crop=32", "--max-frames", "16", "--format", "png"]),
    "audio_wav": ("@audio", []),
    # one item a shard: the truncated input's shard has no file ("file": "", count 0)
    "audio_wav_skipped": ("audio", ["--items-per-shard", "1", "--max-skipped", "100%"]),
    "audio_wav_f32": ("@audio", ["--sample-format", "f32", "--channels", "2", "--duration", "0.5"]),
    "audio_h5_f32": ("@audio", ["--format", "hdf5", "--sample-format", "f32", "--channels", "2", "--duration", "0.5"]),
    "audio_h5_fixed": ("@audio", ["--format", "hdf5", "--duration", "1"]),
    "audio_h5_ragged": ("@audio", ["--format", "hdf5"]),
}


def _make_inputs(base, np):
    rng = np.random.default_rng(7)
    # a few media files in class folders (each costs an ffmpeg run per conversion)
    for kind, files in (("audio", {"a": ["sine.wav"], "b": ["sine.ogg", "sine.mp3"]}),
                        ("video", {"a": ["testsrc.mp4"], "b": ["testsrc.webm"]})):
        for cls, names in files.items():
            os.makedirs(os.path.join(base, "in_" + kind, cls))
            for n in names:
                shutil.copy(os.path.join(TESTDATA, kind, n), os.path.join(base, "in_" + kind, cls))
    d = os.path.join(base, "in_npy_ragged")  # one dtype, mixed shapes and ranks
    os.makedirs(d)
    for f in ("f4_le.npy", "f4_be.npy", "f4_fortran_3d.npy", "f4_fortran_70x45.npy", "empty_f4.npy"):
        shutil.copy(os.path.join(TESTDATA, "npy", "ok", f), d)
    np.save(os.path.join(d, "scalar.npy"), np.float32(2.5))
    d = os.path.join(base, "in_npz")  # npz members, some ragged
    os.makedirs(d)
    for i in range(5):
        np.savez(os.path.join(d, f"s{i}.npz"), x=rng.standard_normal((i + 1, 3)).astype("f4"),
                 y=np.arange(4, dtype="i8") + i, m=rng.random(i + 2) > 0.5)
    d = os.path.join(base, "in_npz_fixed")
    os.makedirs(os.path.join(d, "a"))
    os.makedirs(os.path.join(d, "b"))
    for i in range(7):
        np.savez(os.path.join(d, "ab"[i % 2], f"s{i}.npz"), x=rng.standard_normal((2, 3)).astype("f4"),
                 z=(rng.standard_normal(4) + 1j * rng.standard_normal(4)).astype("c8"))
    d = os.path.join(base, "in_split")  # rows of two lengths: ragged
    os.makedirs(d)
    np.save(os.path.join(d, "rows.npy"), np.arange(60, dtype="i2").reshape(10, 6))
    shutil.copy(os.path.join(TESTDATA, "npy", "ok", "i2_le.npy"), d)
    d = os.path.join(base, "in_split_fixed")
    os.makedirs(d)
    np.save(os.path.join(d, "a.npy"), rng.integers(0, 1000, (9, 5)).astype("u2"))
    np.save(os.path.join(d, "b.npy"), rng.integers(0, 1000, (8, 5)).astype("u2"))


@pytest.fixture(scope="session")
def shards(tmp_path_factory):
    """name -> shard folder, for every entry of CONVERSIONS."""
    np = need("numpy")
    binary = prep_bin()
    base = str(tmp_path_factory.mktemp("prep"))
    _make_inputs(base, np)

    def run(item):
        name, (src, args) = item
        src = os.path.join(base, "in_" + src[1:]) if src.startswith("@") else os.path.join(TESTDATA, src)
        dst = os.path.join(base, name)
        p = subprocess.run([binary, "convert", src, dst, "--workers", "1"] + args,
                           capture_output=True, text=True)
        return name, dst, p

    out = {}
    with ThreadPoolExecutor(4) as ex:
        for name, dst, p in ex.map(run, CONVERSIONS.items()):
            if p.returncode != 0:
                if "ffmpeg" in p.stderr and "PATH" in p.stderr:
                    continue  # reported by the fixture that needs it
                raise RuntimeError(f"prep convert for {name} failed ({p.returncode}):\n{p.stderr}")
            out[name] = dst
    return out


@pytest.fixture
def shard(shards, request):
    name = request.param
    if name not in shards:
        missing(f"ffmpeg (needed for {name})")
    return shards[name]


# -- reference readers: h5py, tarfile + PIL / wave / np.load --------------------------


def h5_reference(folder):
    """Yield (fields dict, label, key) per sample, read with h5py as a user would."""
    h5py = need("h5py")
    np = need("numpy")
    m = json.load(open(os.path.join(folder, "manifest.json")))
    for s in (s for s in m["shards"] if s["count"]):
        with h5py.File(os.path.join(folder, s["file"]), "r") as f:
            names = []
            f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
            fields = [n for n in names if n not in ("labels", "keys", "offsets", "shapes", "ranks")
                      and not n.endswith(("_offsets", "_shapes", "_ranks"))]
            cache = {n: f[n][()] for n in names}
            for i in range(s["count"]):
                sample = {}
                for n in fields:
                    pre = "" if n == "data" else n + "_"
                    if pre + "offsets" in cache:
                        o = cache[pre + "offsets"]
                        shp = cache[pre + "shapes"][i]
                        r = cache[pre + "ranks"][i] if pre + "ranks" in cache else len(shp)
                        sample[n] = cache[n][o[i]:o[i + 1]].reshape(tuple(shp[:r]))
                    else:
                        sample[n] = cache[n][i]
                yield sample, int(cache["labels"][i]), cache["keys"][i].decode()


def tar_reference(folder):
    """Yield (fields dict, label, key) per sample, read with tarfile + PIL / wave / np.load."""
    np = need("numpy")
    Image = need("PIL.Image")
    m = json.load(open(os.path.join(folder, "manifest.json")))
    for s in (s for s in m["shards"] if s["count"]):
        with tarfile.open(os.path.join(folder, s["file"])) as t:
            groups, order = {}, []
            for mem in t.getmembers():
                base = mem.name.rsplit("/", 1)[-1]
                stem = mem.name[:len(mem.name) - len(base)] + base.split(".", 1)[0]
                ext = base.split(".", 1)[1]
                if stem not in groups:
                    groups[stem] = {}
                    order.append(stem)
                groups[stem][ext] = t.extractfile(mem).read()
        for stem in order:
            g = groups[stem]
            sample = {}
            if "png" in g:
                sample["data"] = np.asarray(Image.open(io.BytesIO(g["png"])))
            elif "wav" in g:
                sample["data"] = wav_reference(g["wav"], np)
            else:
                frames = sorted(e for e in g if e.endswith(".png"))
                sample["data"] = np.stack([np.asarray(Image.open(io.BytesIO(g[e]))) for e in frames])
            for e in sorted(g):
                if e.endswith(".npy") and not e[:-4].isdigit():
                    sample[e[:-4]] = np.load(io.BytesIO(g[e]))
            label = int(g["cls"]) if "cls" in g else -1
            yield sample, label, json.loads(g["json"])["key"]


def wav_reference(b, np):
    """16-bit PCM through the wave module; float WAV (which wave cannot read) through a chunk walk."""
    try:
        w = wave.open(io.BytesIO(b))
        a = np.frombuffer(w.readframes(w.getnframes()), "<i2")
        ch = w.getnchannels()
    except wave.Error:
        # Python 3.11's wave reads PCM only: find fmt and data by hand.
        import struct
        pos, ch, a = 12, 1, None
        while pos < len(b):
            cid, size = struct.unpack_from("<4sI", b, pos)
            if cid == b"fmt ":
                ch = struct.unpack_from("<H", b, pos + 10)[0]
            if cid == b"data":
                a = np.frombuffer(b, "<f4", size // 4, pos + 8)
                break
            pos += 8 + size + (size & 1)
    return a.reshape(-1, ch) if ch > 1 else a


def reference(folder):
    m = json.load(open(os.path.join(folder, "manifest.json")))
    return list(h5_reference(folder) if m["format"] == "hdf5" else tar_reference(folder))
