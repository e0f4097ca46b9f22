"""Loading and checking prep's manifest.json."""

import hashlib
import json
import os

import numpy as np

from .errors import (
    ManifestError,
    ManifestNotFoundError,
    ManifestVersionError,
    ShardChecksumError,
    ShardSizeError,
    UnsafeShardPathError,
)

MANIFEST_NAME = "manifest.json"

#: The newest manifest ``format_version`` this reader understands.
SUPPORTED_FORMAT_VERSION = 2

_DTYPES = {
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
    "uint64", "float16", "float32", "float64", "complex64", "complex128",
}


def numpy_dtype(name, where="manifest"):
    """Map a manifest dtype name to a little-endian numpy dtype.

    Numeric names are numpy's ("uint8", "float16", "complex64"; bool is one
    byte 0/1); ``S<w>`` is a fixed-length byte string (h5py's ``|S<w>``).
    """
    if name in _DTYPES:
        return np.dtype(name).newbyteorder("<")
    if isinstance(name, str) and name.startswith("S") and name[1:].isdigit():
        return np.dtype(name)
    raise ManifestError(f"{where}: unknown dtype {name!r}; upgrade prepshards")


def _safe_join(folder, name, manifest_path):
    if not isinstance(name, str) or name == "" or "\x00" in name:
        raise UnsafeShardPathError(
            f"{manifest_path}: shard file name {name!r} is empty or not a string; "
            "the manifest is damaged: regenerate it (prep convert --resume or prep merge-manifest)")
    # As prep (formats/manifest.plainName): a shard is a file directly in
    # the manifest's folder, never in a subfolder, so both readers take
    # and refuse the same manifests.
    if name in (".", "..") or "/" in name or "\\" in name or os.path.isabs(name):
        raise UnsafeShardPathError(
            f"{manifest_path}: shard file name {name!r} is not a plain file name in the shard "
            f"folder {folder}; refusing to read it (prep writes shards beside the manifest, and "
            "prep refuses this manifest too): fix the manifest or regenerate it")
    return os.path.join(folder, name)


def locate(path):
    """Return (folder, manifest path) for a shard folder or manifest path."""
    path = os.fspath(path)
    if os.path.isdir(path):
        mpath = os.path.join(path, MANIFEST_NAME)
        folder = path
    else:
        mpath = path
        folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isfile(mpath):
        if os.path.isdir(path):
            msg = (f"{mpath}: no manifest in shard folder {path}; point prepshards at the "
                   "DST folder of a finished `prep convert` (the manifest is written last; "
                   "for a distributed run, run `prep merge-manifest DST` first)")
        else:
            msg = (f"{mpath}: no such manifest; pass a shard folder or its manifest.json "
                   "written by `prep convert`")
        raise ManifestNotFoundError(msg)
    return folder, mpath


class Manifest:
    """A parsed and checked manifest.json.

    Attributes: ``path``, ``folder``, ``raw`` (the dict), ``format``
    ("hdf5", "png", "wav"), ``format_version``, ``order`` ("shuffle" or
    "sorted"), ``dataset_id`` (recorded, or computed for manifests of older
    preps), ``classes`` (list or None), ``shards`` (list of dicts, each
    with ``path`` added), ``counts`` (samples per shard).
    """

    def __init__(self, path):
        self.folder, self.path = locate(path)
        try:
            with open(self.path, "rb") as f:
                raw = json.load(f)
        except (ValueError, UnicodeDecodeError) as e:
            raise ManifestError(f"{self.path}: not valid JSON ({e}); regenerate it with prep") from None
        if not isinstance(raw, dict):
            raise ManifestError(f"{self.path}: not a prep manifest (top level is not an object)")
        self.raw = raw
        version = raw.get("format_version") or 1
        if not isinstance(version, int):
            raise ManifestError(f"{self.path}: format_version {version!r} is not an integer")
        if version > SUPPORTED_FORMAT_VERSION:
            raise ManifestVersionError(
                f"{self.path}: manifest format_version {version} is newer than this reader "
                f"(prepshards reads up to {SUPPORTED_FORMAT_VERSION}): the reader is older than "
                "the shards; upgrade prepshards (pip install -U prepshards, or pip install ./python "
                "from the prep checkout that wrote them)")
        self.format_version = version
        self.order = raw.get("order") or "sorted"
        self.format = raw.get("format")
        if self.format not in ("hdf5", "png", "wav"):
            raise ManifestError(f"{self.path}: unknown shard format {self.format!r}; upgrade prepshards")
        self.classes = raw.get("classes") or None
        self.dataset_id = raw.get("dataset_id") or dataset_id(raw)
        if raw.get("task"):
            raise ManifestError(
                f"{self.path}: this is one task's manifest part; run `prep merge-manifest "
                f"{self.folder}` and read the merged manifest.json")
        shards = raw.get("shards")
        if not isinstance(shards, list):
            raise ManifestError(f"{self.path}: no shards list")
        self.shards = []
        for k, s in enumerate(shards):
            for field in ("file", "count", "bytes"):
                if field not in s:
                    raise ManifestError(f"{self.path}: shard {k} has no {field!r}")
            if s["count"] == 0 and s["file"] == "":
                continue  # every input of this shard was skipped: prep wrote no file
            s = dict(s)
            s["path"] = _safe_join(self.folder, s["file"], self.path)
            if self.format == "hdf5":
                if not s.get("datasets"):
                    raise ManifestError(f"{self.path}: HDF5 shard {s['file']} lists no datasets")
                for d in s["datasets"]:
                    d["np_dtype"] = numpy_dtype(d["dtype"], f"{self.path}: {s['file']}: {d['name']}")
            self.shards.append(s)
        self.counts = np.array([s["count"] for s in self.shards], dtype=np.int64)

    @property
    def samples(self):
        return int(self.counts.sum())

    def check_sizes(self):
        """Raise ShardSizeError unless every shard has the manifest's size."""
        for s in self.shards:
            check_size(s["path"], s["bytes"], self.path)

    def verify(self):
        """Check every shard's size and sha256, and the dataset ID, against the manifest."""
        if self.dataset_id != dataset_id(self.raw):
            raise ManifestError(
                f"{self.path}: dataset_id {self.dataset_id} does not match the recipe, seed, "
                f"order and shard checksums it lists ({dataset_id(self.raw)}): the manifest "
                "was edited; regenerate it (prep convert --resume or prep merge-manifest)")
        for s in self.shards:
            check_size(s["path"], s["bytes"], self.path)
            want = s.get("sha256")
            if not want:
                continue
            h = hashlib.sha256()
            buf = bytearray(8 << 20)
            mv = memoryview(buf)
            with open(s["path"], "rb", buffering=0) as f:
                while True:
                    n = f.readinto(buf)
                    if not n:
                        break
                    h.update(mv[:n])
            if h.hexdigest() != want:
                raise ShardChecksumError(
                    f"{s['path']}: sha256 {h.hexdigest()} differs from the manifest's {want} "
                    f"({self.path}); the shard is corrupt: copy it again or reconvert "
                    "(prep convert --resume redoes shards whose checksum fails)")


def dataset_id(raw):
    """The dataset ID of a manifest dict, as docs/FORMAT.md §2.5 defines it."""
    text = "prep-dataset-id\n"
    text += f"format_version={raw.get('format_version') or 1}\nrecipe={raw.get('recipe', '')}\n"
    text += f"seed={raw.get('seed', 0)}\norder={raw.get('order') or 'sorted'}\n"
    # A hand-written manifest may leave out index: a shard's place is its index.
    text += "".join(f"shard={s.get('index', i)}:{s.get('sha256', '')}\n"
                    for i, s in enumerate(raw.get("shards") or []))
    return hashlib.sha256(text.encode()).hexdigest()


def check_size(path, want, manifest_path, st_size=None):
    if st_size is None:
        try:
            st_size = os.stat(path).st_size
        except FileNotFoundError:
            raise ShardSizeError(
                f"{path}: shard listed in {manifest_path} is missing; copy it again or "
                "reconvert (prep convert --resume)") from None
    if st_size != want:
        raise ShardSizeError(
            f"{path}: {st_size} bytes on disk, the manifest ({manifest_path}) says {want}; "
            "the shard is truncated, still being copied or from another run: copy it again "
            "or reconvert (prep convert --resume)")
