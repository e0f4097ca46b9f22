"""Loading and checking prep's manifest.json."""

import hashlib
import json
import math
import os
import re
import stat

import numpy as np

from .errors import (
    ManifestError,
    ManifestNotFoundError,
    ManifestVersionError,
    ShardChecksumError,
    ShardError,
    ShardIOError,
    ShardSizeError,
    UnsafeShardPathError,
)

MANIFEST_NAME = "manifest.json"

#: The newest manifest ``format_version`` this reader understands.
SUPPORTED_FORMAT_VERSION = 3

_DTYPES = {
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
    "uint64", "float16", "float32", "float64", "complex64", "complex128",
}


def numpy_dtype(name, where="manifest"):
    """Map a manifest dtype name to a little-endian numpy dtype.

    Numeric names are numpy's ("uint8", "float16", "complex64"; bool is one
    byte 0/1); ``S<w>`` (w >= 1) is a fixed-length byte string (h5py's ``|S<w>``).
    """
    if isinstance(name, str):
        if name in _DTYPES:
            return np.dtype(name).newbyteorder("<")
        if _SDTYPE.fullmatch(name):
            return np.dtype(name)
    raise ManifestError(f"{where}: unknown dtype {_short(name)}; upgrade prepshards, "
                        f"or regenerate a damaged manifest ({_FIX_SHORT})")


# The fix for a manifest that fails a check: it was damaged or edited.
_FIX_SHORT = "prep convert --resume DST, or prep merge-manifest DST"
_FIX = ("the manifest is damaged or was edited: regenerate it (" + _FIX_SHORT + ") "
        "and check the folder with `prep inspect DST`")
_MAX_INT = (1 << 63) - 1  # file offsets and sizes are int64 on every OS prep runs on
_MAX_RANK = 32  # numpy's oldest limit on dimensions
_HEX64 = re.compile(r"[0-9a-f]{64}")
_SDTYPE = re.compile(r"S[1-9][0-9]{0,8}")


def _short(v, n=60):
    r = repr(v)
    return r if len(r) <= n else r[:n] + "..."


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _int(v, where, what, lo=0, hi=_MAX_INT):
    if not _is_int(v) or not lo <= v <= hi:
        raise ManifestError(f"{where}: {what} is {_short(v)}, not an integer from {lo} to {hi}; {_FIX}")
    return v


def _str(v, where, what, optional=False):
    if not (isinstance(v, str) or optional and v is None):
        raise ManifestError(f"{where}: {what} is {_short(v)}, not a string; {_FIX}")
    return v


def _check_datasets(datasets, where, nbytes):
    """Check an HDF5 shard's dataset entries; return copies with ``np_dtype`` added.

    Sizes are compared in Python integers (no overflow): size must be
    product(shape) x element size, lie inside the file's ``nbytes``, and
    not overlap another dataset's bytes.
    """
    if not isinstance(datasets, list) or not datasets:
        raise ManifestError(f"{where}: HDF5 shard lists no datasets; {_FIX}")
    out, names = [], set()
    for j, d in enumerate(datasets):
        if not isinstance(d, dict):
            raise ManifestError(f"{where}: dataset entry {j} is {_short(d)}, not an object; {_FIX}")
        for field in ("name", "dtype", "shape", "offset", "size"):
            if field not in d:
                raise ManifestError(f"{where}: dataset entry {j} has no {field!r}; {_FIX}")
        name = d["name"]
        if not isinstance(name, str) or not name:
            raise ManifestError(f"{where}: dataset entry {j} has name {_short(name)}, not a non-empty string; {_FIX}")
        here = f"{where}: dataset {name}"
        if name in names:
            raise ManifestError(f"{here} is listed twice; {_FIX}")
        names.add(name)
        dt = numpy_dtype(d["dtype"], here)
        shape = d["shape"]
        if not isinstance(shape, list) or len(shape) > _MAX_RANK:
            raise ManifestError(f"{here}: shape {_short(shape)} is not a list of at most {_MAX_RANK} "
                                f"integers; {_FIX}")
        for x in shape:
            _int(x, here, "a shape dimension")
        off = _int(d["offset"], here, "offset", lo=-1)
        size = _int(d["size"], here, "size")
        want = math.prod(shape) * dt.itemsize
        if want != size:
            raise ManifestError(f"{here}: size {size} bytes, but shape {_short(shape)} of {d['dtype']} "
                                f"needs {want}; {_FIX}")
        if off >= 0 and off + size > nbytes:
            raise ManifestError(f"{here}: bytes {off}..{off + size} lie past the end of the file "
                                f"({nbytes} bytes); {_FIX}")
        out.append(dict(d, np_dtype=dt))
    spans = sorted((d["offset"], d["offset"] + d["size"], d["name"]) for d in out if d["offset"] >= 0 and d["size"])
    for (a0, a1, an), (b0, _, bn) in zip(spans, spans[1:]):
        if b0 < a1:
            raise ManifestError(f"{where}: datasets {an} (bytes {a0}..{a1}) and {bn} (from {b0}) overlap; {_FIX}")
    return out


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
    """Return (folder, manifest path) for a shard folder or manifest path (local or gs://)."""
    path = os.fspath(path)
    if isinstance(path, str) and path.startswith("gs://"):
        if path.endswith(".json"):
            return path.rsplit("/", 1)[0], path
        return path.rstrip("/"), path.rstrip("/") + "/" + MANIFEST_NAME
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
    ("hdf5", "png", "wav"), ``format_version``, ``online_recipe``
    (the ops the reader applies each epoch, "" for none), ``order`` ("shuffle" or
    "sorted"), ``dataset_id`` (recorded, or computed for manifests of older
    preps), ``classes`` (list or None), ``shards`` (list of dicts, each
    with ``path`` added), ``counts`` (samples per shard).

    Every field a reader uses is type- and range-checked here, once, so
    that a damaged or hand-edited manifest gives a ManifestError naming
    the field rather than a TypeError, an overflow or a read at a
    nonsense offset later.
    """

    def __init__(self, path):
        self.folder, self.path = locate(path)
        try:
            if self.path.startswith("gs://"):
                from . import _gcs  # noqa: PLC0415
                try:
                    raw = json.loads(_gcs.read_manifest(self.path))
                except FileNotFoundError:
                    raise ManifestNotFoundError(
                        f"{self.path}: no such manifest; point prepshards at the DST of a finished "
                        "`prep convert` (gs://BUCKET/PREFIX, the manifest is written last)") from None
            else:
                with open(self.path, "rb") as f:
                    raw = json.load(f)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise ManifestError(f"{self.path}: not valid JSON ({str(e)[:200]}); {_FIX}") from None
        except ShardError:
            raise  # gs:// (a ShardIOError is an OSError): already names the object and the fix
        except OSError as e:
            raise ManifestError(f"{self.path}: cannot read the manifest ({e.strerror or e}); "
                                "check that it is a readable file") from None
        if not isinstance(raw, dict):
            raise ManifestError(f"{self.path}: not a prep manifest (top level is not an object); {_FIX}")
        self.raw = raw
        where = self.path
        # As prep: a missing (or 0) format_version means 1.
        version = raw.get("format_version")
        version = 1 if version is None or version == 0 and _is_int(version) else version
        _int(version, where, "format_version", lo=1)
        if version > SUPPORTED_FORMAT_VERSION:
            raise ManifestVersionError(
                f"{self.path}: manifest format_version {version} is newer than this reader "
                f"(prepshards reads up to {SUPPORTED_FORMAT_VERSION}): the reader is older than "
                "the shards; upgrade prepshards (pip install -U prepshards, or pip install ./python "
                "from the prep checkout that wrote them)")
        self.format_version = version
        if raw.get("task") is not None:
            raise ManifestError(
                f"{self.path}: this is one task's manifest part; run `prep merge-manifest "
                f"{self.folder}` and read the merged manifest.json")
        order = raw.get("order")
        _str(order, where, "order", optional=True)
        self.order = order or "sorted"
        self.format = raw.get("format")
        if not isinstance(self.format, str) or self.format not in ("hdf5", "png", "wav"):
            raise ManifestError(f"{self.path}: unknown shard format {_short(self.format)}; "
                                "upgrade prepshards, or regenerate a damaged manifest")
        classes = raw.get("classes")
        if classes is not None and not (isinstance(classes, list) and all(isinstance(c, str) for c in classes)):
            raise ManifestError(f"{where}: classes is {_short(classes)}, not a list of strings; {_FIX}")
        self.classes = classes or None
        _str(raw.get("recipe"), where, "recipe", optional=True)
        # The ops after '|' in --recipe, which the reader applies each epoch (docs/FORMAT.md §4.5);
        # parsed here so that an op this reader cannot apply is refused before any read.
        self.online_recipe = _str(raw.get("online_recipe"), where, "online_recipe", optional=True) or ""
        from .online import parse as _parse_online  # noqa: PLC0415
        _parse_online(self.online_recipe, where)
        self.seed = _int(raw.get("seed", 0), where, "seed", hi=(1 << 64) - 1)
        shards = raw.get("shards")
        if not isinstance(shards, list):
            raise ManifestError(f"{self.path}: no shards list; {_FIX}")
        self.shards = []
        seen_index, seen_file = {}, {}
        total = 0
        for k, s in enumerate(shards):
            here = f"{where}: shard entry {k}"
            if not isinstance(s, dict):
                raise ManifestError(f"{here} is {_short(s)}, not an object; {_FIX}")
            for field in ("file", "count", "bytes"):
                if field not in s:
                    raise ManifestError(f"{here} has no {field!r}; {_FIX}")
            if "index" in s:
                idx = _int(s["index"], here, "index")
                if idx in seen_index:
                    raise ManifestError(f"{here}: index {idx} already used by entry {seen_index[idx]}; "
                                        f"the shard is listed twice; {_FIX}")
                seen_index[idx] = k
            count = _int(s["count"], here, "count")
            nbytes = _int(s["bytes"], here, "bytes")
            sha = s.get("sha256")
            if sha is not None and not (isinstance(sha, str) and (sha == "" or _HEX64.fullmatch(sha))):
                raise ManifestError(f"{here}: sha256 {_short(sha)} is not 64 lowercase hex digits; {_FIX}")
            if count == 0 and s["file"] == "":
                if nbytes:
                    raise ManifestError(f"{here} names no file but says it has {nbytes} bytes; {_FIX}")
                continue  # every input of this shard was skipped: prep wrote no file
            s = dict(s)
            s["path"] = _safe_join(self.folder, s["file"], self.path)
            here = f"{where}: shard {s['file']}"
            if s["file"] in seen_file:
                raise ManifestError(f"{here} is listed twice (entries {seen_file[s['file']]} and {k}); {_FIX}")
            seen_file[s["file"]] = k
            # Every sample costs bytes in the file (a tar header; an HDF5
            # label), so a count above the size is damage, not data.
            if count > nbytes:
                raise ManifestError(f"{here}: count {count} is more than its {nbytes} bytes can hold; {_FIX}")
            total += count
            if self.format == "hdf5":
                s["datasets"] = _check_datasets(s.get("datasets"), here, nbytes)
            self.shards.append(s)
        if total > _MAX_INT:
            raise ManifestError(f"{where}: the shards hold {total} samples in all, more than a reader "
                                f"can number; {_FIX}")
        self.counts = np.array([s["count"] for s in self.shards], dtype=np.int64)
        did = raw.get("dataset_id")
        if did is not None and not (isinstance(did, str) and (did == "" or _HEX64.fullmatch(did))):
            raise ManifestError(f"{where}: dataset_id {_short(did)} is not 64 lowercase hex digits; {_FIX}")
        self.dataset_id = did or dataset_id(raw)

    @property
    def samples(self):
        return int(self.counts.sum())

    def check_sizes(self):
        """Raise ShardSizeError unless every shard has the manifest's size."""
        for s in self.shards:
            check_size(s["path"], s["bytes"], self.path)

    def verify(self, blocks=None):
        """Check every shard's size and sha256, and the dataset ID, against the manifest.

        ``blocks(k)``, when given, yields shard k's bytes (remote shards);
        sizes were then checked by the caller.
        """
        if self.dataset_id != dataset_id(self.raw):
            raise ManifestError(
                f"{self.path}: dataset_id {self.dataset_id} does not match the recipe, seed, "
                f"order and shard checksums it lists ({dataset_id(self.raw)}): the manifest "
                "was edited; regenerate it (prep convert --resume or prep merge-manifest)")
        for k, s in enumerate(self.shards):
            if blocks is None:
                check_size(s["path"], s["bytes"], self.path)
            want = s.get("sha256")
            if not want:
                continue
            h = hashlib.sha256()
            if blocks is not None:
                for b in blocks(k):
                    h.update(b)
                self._compare_sha(s, h, want)
                continue
            buf = bytearray(8 << 20)
            mv = memoryview(buf)
            try:
                with open(s["path"], "rb", buffering=0) as f:
                    while True:
                        n = f.readinto(buf)
                        if not n:
                            break
                        h.update(mv[:n])
            except OSError as e:
                raise ShardIOError(f"{s['path']}: cannot read the shard to check its sha256 "
                                   f"({e.strerror or e}); check its permissions or copy it again") from None
            self._compare_sha(s, h, want)

    def _compare_sha(self, s, h, want):
        if h.hexdigest() != want:
            raise ShardChecksumError(
                f"{s['path']}: sha256 {h.hexdigest()} differs from the manifest's {want} "
                f"({self.path}); the shard is corrupt: copy it again or reconvert "
                "(prep convert --resume redoes shards whose checksum fails)")


def dataset_id(raw):
    """The dataset ID of a manifest dict, as docs/FORMAT.md §2.5 defines it."""
    text = "prep-dataset-id\n"
    text += f"format_version={raw.get('format_version') or 1}\nrecipe={raw.get('recipe', '')}\n"
    if raw.get("online_recipe"):  # only when set: IDs of runs without one stay as they were
        text += f"online_recipe={raw['online_recipe']}\n"
    text += f"seed={raw.get('seed', 0)}\norder={raw.get('order') or 'sorted'}\n"
    # A hand-written manifest may leave out index: a shard's place is its index.
    text += "".join(f"shard={s.get('index', i)}:{s.get('sha256', '')}\n"
                    for i, s in enumerate(raw.get("shards") or []))
    return hashlib.sha256(text.encode()).hexdigest()


def check_size(path, want, manifest_path, st=None):
    """Raise ShardSizeError unless ``path`` (or its stat result ``st``) is a regular file of ``want`` bytes."""
    if st is None:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise ShardSizeError(
                f"{path}: shard listed in {manifest_path} is missing; copy it again or "
                "reconvert (prep convert --resume)") from None
        except OSError as e:
            raise ShardIOError(f"{path}: cannot stat the shard listed in {manifest_path} "
                               f"({e.strerror or e}); check the folder's permissions") from None
    if not stat.S_ISREG(st.st_mode):
        raise ShardSizeError(
            f"{path}: not a regular file, but the manifest ({manifest_path}) lists it as a shard; "
            "copy the shards again or reconvert (prep convert --resume)")
    if st.st_size != want:
        raise ShardSizeError(
            f"{path}: {st.st_size} bytes on disk, the manifest ({manifest_path}) says {want}; "
            "the shard is truncated, still being copied or from another run: copy it again "
            "or reconvert (prep convert --resume)")
