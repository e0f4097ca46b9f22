"""Reading one sample at a time from HDF5 and tar shards, without libhdf5.

``ShardSet`` is the engine under every public API: it owns the manifest,
the per-process descriptors and one reader per shard.
"""

import json
import math
import os

import numpy as np

from ._io import open_files, pread_into
from .codecs import decode_npy, decode_png, decode_wav
from .errors import ShardFormatError
from .manifest import Manifest

_RAGGED = ("offsets", "shapes", "ranks")


def _companion_names(field):
    prefix = "" if field == "data" else field + "_"
    return {c: prefix + c for c in _RAGGED}


class _H5Field:
    """One sample field of an HDF5 shard: fixed shape, or ragged.

    The manifest already checked each dataset's size against its shape
    and the file; this checks the shapes against the shard's count and
    the ragged companions' shapes and types (docs/FORMAT.md §5.6).
    """

    __slots__ = ("name", "dtype", "shape", "offset", "size", "ragged", "sample_shape",
                 "sample_nbytes", "companions", "dataset", "checked")

    def __init__(self, name, d, count, by_name, where):
        self.name = name
        self.dataset = d
        self.dtype = d["np_dtype"]
        self.shape = tuple(d["shape"])
        self.offset = int(d["offset"])
        self.size = int(d["size"])
        self.checked = False
        comps = _companion_names(name)
        self.ragged = comps["offsets"] in by_name and comps["shapes"] in by_name
        self.companions = {c: by_name[n] for c, n in comps.items() if n in by_name} if self.ragged else {}
        if self.ragged:
            self.sample_shape = None
            self.sample_nbytes = None
            want = {"offsets": [count + 1], "shapes": None, "ranks": [count]}
            for c, cd in self.companions.items():
                shp = cd["shape"]
                ok = cd["np_dtype"] == np.dtype("<i8") and (
                    shp == want[c] if want[c] else len(shp) == 2 and shp[0] == count and shp[1] <= 32)
                if not ok:
                    raise ShardFormatError(f"{where}: ragged companion {cd['name']} is {cd['dtype']} "
                                           f"{shp}, not int64 of the shape docs/FORMAT.md §5.6 gives "
                                           f"for {count} samples; {_DAMAGED}")
            if len(self.shape) != 1:
                raise ShardFormatError(f"{where}: ragged dataset {name} has shape {list(self.shape)}, "
                                       f"not one axis; {_DAMAGED}")
        else:
            if not self.shape or self.shape[0] != count:
                raise ShardFormatError(f"{where}: dataset {name} has shape {list(self.shape)}, "
                                       f"but the shard holds {count} samples; {_DAMAGED}")
            self.sample_shape = self.shape[1:]
            self.sample_nbytes = math.prod(self.sample_shape) * self.dtype.itemsize


class H5Shard:
    """A prep HDF5 shard read with plain positional reads at the manifest's offsets.

    libhdf5 is never used, except through h5py for a dataset whose
    manifest offset is -1 (chunked or not allocated; prep writes none with
    data in it), if h5py is installed.
    """

    def __init__(self, info, files, k, manifest_path):
        self.info = info
        self.files = files
        self.k = k
        self.path = info["path"]
        self.count = int(info["count"])
        where = f"{self.path} (in {manifest_path})"
        self.where = where
        by_name = {d["name"]: d for d in info["datasets"]}
        self.by_name = by_name
        fields = [n for n in by_name if n not in ("labels", "keys")]
        # Drop the ragged companions of fields that are present.
        comp = set()
        for n in fields:
            c = _companion_names(n)
            if c["offsets"] in by_name and c["shapes"] in by_name:
                comp.update(v for v in c.values() if v in by_name)
        self.fields = [n for n in fields if n not in comp]
        if not self.fields:
            raise ShardFormatError(f"{where}: no sample datasets in the manifest; {_DAMAGED}")
        self.field = {n: _H5Field(n, by_name[n], self.count, by_name, where) for n in self.fields}
        for n, kind in (("labels", "i"), ("keys", "S")):
            d = by_name.get(n)
            if d is not None and (d["shape"] != [self.count] or d["np_dtype"].kind != kind
                                  or kind == "i" and d["np_dtype"].itemsize != 8):
                raise ShardFormatError(f"{where}: dataset {n} is {d['dtype']} {d['shape']}, not "
                                       f"{'int64' if kind == 'i' else 'S<w>'} [{self.count}]; {_DAMAGED}")
        self._small = {}
        self._h5 = None
        self._h5pid = None

    def __getstate__(self):
        st = dict(self.__dict__)
        st["_small"] = {}
        st["_h5"] = None
        st["_h5pid"] = None
        return st

    # -- raw dataset access -------------------------------------------------

    def _fd(self):
        return self.files.fd(self.k)

    def _h5file(self):
        pid = os.getpid()
        if self._h5 is None or self._h5pid != pid:
            if self.path.startswith("gs://"):
                raise ShardFormatError(f"{self.where}: a dataset is not contiguous (manifest offset -1), "
                                       "which prepshards reads through h5py from local files only; "
                                       "copy the shards to a local disk")
            try:
                import h5py  # noqa: PLC0415
            except ImportError:
                raise ShardFormatError(
                    f"{self.where}: a dataset is not contiguous (manifest offset -1); reading it "
                    "needs h5py: pip install h5py") from None
            try:
                self._h5 = h5py.File(self.path, "r")
            except (OSError, ValueError) as e:
                raise ShardFormatError(f"{self.where}: h5py cannot open it ({e}); {_DAMAGED}") from None
            self._h5pid = pid
        return self._h5

    def _h5read(self, name, out, sel=()):
        """Read dataset ``name`` (selection ``sel``) through h5py into ``out``."""
        f = self._h5file()
        try:
            out[...] = f[name][sel] if sel != () else f[name][()]
        except (OSError, KeyError, ValueError, TypeError) as e:
            raise ShardFormatError(f"{self.where}: dataset {name} through h5py: {e}; {_DAMAGED}") from None
        return out

    def read_dataset(self, d, start=None, stop=None, out=None):
        """Read elements [start, stop) along axis 0 of dataset ``d`` (a manifest entry)."""
        dt = d["np_dtype"]
        shape = tuple(d["shape"])
        n0 = shape[0] if shape else 1
        start = 0 if start is None else start
        stop = n0 if stop is None else stop
        rest = shape[1:]
        row = math.prod(rest) * dt.itemsize
        oshape = (stop - start,) + rest if shape else ()
        if out is None:
            out = np.empty(oshape, dt)
        nbytes = (stop - start) * row if shape else dt.itemsize
        if nbytes == 0:
            return out
        if d["offset"] < 0:
            return self._h5read(d["name"], out, slice(start, stop) if shape else ())
        pread_into(self._fd(), out, d["offset"] + start * row, self.path)
        return out

    def _cached(self, name):
        a = self._small.get(name)
        if a is None:
            a = self.read_dataset(self.by_name[name])
            self._small[name] = a
        return a

    # -- samples -------------------------------------------------------------

    def labels(self):
        if "labels" not in self.by_name:
            return np.full(self.count, -1, np.int64)
        return self._cached("labels")

    def keys(self):
        if "keys" not in self.by_name:
            return [str(i) for i in range(self.count)]
        return [k.decode("utf-8", "surrogateescape") for k in self._cached("keys")]

    def key(self, i):
        if "keys" not in self.by_name:
            return str(i)
        d = self.by_name["keys"]
        if "keys" in self._small:
            return self._small["keys"][i].decode("utf-8", "surrogateescape")
        return self.read_dataset(d, i, i + 1)[0].decode("utf-8", "surrogateescape")

    def ragged_index(self, f):
        """(offsets, shapes, ranks) of a ragged field, cached per process."""
        offs = self._cached(f.companions["offsets"]["name"])
        shapes = self._cached(f.companions["shapes"]["name"])
        ranks = self._cached(f.companions["ranks"]["name"]) if "ranks" in f.companions else None
        if not f.checked:  # once per process: the offsets index the data, ranks index the shapes
            if offs[0] != 0 or offs[-1] != f.shape[0] or np.any(offs[1:] < offs[:-1]) or ranks is not None \
                    and (np.any(ranks < 0) or np.any(ranks > shapes.shape[1])):
                raise ShardFormatError(f"{self.where}: the offsets or ranks of ragged field {f.name} "
                                       f"do not index its {f.shape[0]} elements; {_DAMAGED}")
            f.checked = True
        return offs, shapes, ranks

    def sample_shape(self, f, i):
        if not f.ragged:
            return f.sample_shape
        _, shapes, ranks = self.ragged_index(f)
        r = shapes.shape[1] if ranks is None else int(ranks[i])
        return tuple(int(x) for x in shapes[i, :r])

    def read_field(self, name, i):
        f = self.field[name]
        if not f.ragged:
            out = np.empty(f.sample_shape, f.dtype)
            if f.sample_nbytes == 0:
                return out
            if f.offset < 0:
                return self._h5read(name, out, i)
            pread_into(self._fd(), out, f.offset + i * f.sample_nbytes, self.path)
            return out
        offs, _, _ = self.ragged_index(f)
        shape = self.sample_shape(f, i)
        a, b = int(offs[i]), int(offs[i + 1])
        if min(shape, default=0) < 0 or math.prod(shape) != b - a:
            raise ShardFormatError(f"{self.where}: {name} sample {i} has shape {shape} "
                                   f"but {b - a} elements; {_DAMAGED}")
        out = np.empty(shape, f.dtype)
        if b == a:
            return out
        if f.offset < 0:
            self._h5read(name, out.reshape(-1), slice(a, b))
            return out
        pread_into(self._fd(), out, f.offset + a * f.dtype.itemsize, self.path)
        return out

    def read(self, i, fields):
        return {n: self.read_field(n, i) for n in fields}


# -- tar ------------------------------------------------------------------------

_BLOCK = 512


_DAMAGED = ("the shard is damaged: copy it again or reconvert (prep convert --resume); "
            "`prep inspect DIR --verify` lists damaged shards")


def _octal(b, where, pos, what):
    """A tar header number: NUL/space-terminated octal, or GNU base-256 (first byte 0x80)."""
    b = bytes(b)
    if b and b[0] & 0x80:
        if b[0] != 0x80:  # 0xff starts a negative number: no size or offset is negative
            raise ShardFormatError(f"{where}: tar header at offset {pos}: {what} field {b!r} is "
                                   f"not a number; {_DAMAGED}")
        return int.from_bytes(b[1:], "big")
    s = b.split(b"\x00", 1)[0].strip(b" ")
    if s and all(48 <= c <= 55 for c in s):
        return int(s, 8)
    if not s:
        return 0
    raise ShardFormatError(f"{where}: tar header at offset {pos}: {what} field {b!r} is not an "
                           f"octal number; {_DAMAGED}")


def _check_header(hdr, where, pos):
    """Refuse a header whose checksum is wrong, as tar does: any damaged byte shows here."""
    want = _octal(hdr[148:156], where, pos, "checksum")
    unsigned = sum(hdr) - sum(hdr[148:156]) + 8 * 32
    if want == unsigned:
        return
    signed = unsigned - 256 * sum(1 for c in hdr[:148] + hdr[156:] if c & 0x80)
    if want != signed:
        raise ShardFormatError(f"{where}: tar header at offset {pos}: checksum {want} does not match "
                               f"the header's bytes ({unsigned}); {_DAMAGED}")


def _pax(buf, where, pos):
    """Parse PAX records "LEN KEY=VALUE\\n"; every record must advance and fit."""
    out = {}
    data = bytes(buf)
    i = 0
    while i < len(data):
        if data[i] == 0:
            break  # NUL padding after the last record
        sp = data.find(b" ", i, i + 21)
        digits = data[i:sp] if sp > i else b""
        length = int(digits) if digits and digits.isdigit() else -1
        if length <= sp - i + 1 or i + length > len(data) or data[i + length - 1] != 0x0A:
            raise ShardFormatError(f"{where}: PAX header at offset {pos}: bad record at byte {i}; {_DAMAGED}")
        k, eq, v = data[sp + 1:i + length - 1].partition(b"=")
        if not eq:
            raise ShardFormatError(f"{where}: PAX header at offset {pos}: record without '='; {_DAMAGED}")
        out[k.decode("utf-8", "surrogateescape")] = v.decode("utf-8", "surrogateescape")
        i += length
    return out


def scan_tar(fd, size, where):
    """List (name, data offset, size) of a tar's regular members, reading only headers.

    ``size`` is the file's size (checked on open); every header's checksum
    is checked, every member must lie inside the file and the archive must
    end with its zero block, so damage gives a ShardFormatError naming the
    offset, never a loop or a read past the end.
    """
    members = []
    pos = 0
    hdr = bytearray(_BLOCK)
    pending = {}
    while True:
        if pos + _BLOCK > size:
            raise ShardFormatError(f"{where}: the tar ends at byte {size} without its end-of-archive "
                                   f"block (last member ends at {pos}); {_DAMAGED}")
        pread_into(fd, hdr, pos, where)
        if not any(hdr):
            break
        _check_header(hdr, where, pos)
        name = bytes(hdr[0:100]).split(b"\x00", 1)[0]
        msize = _octal(hdr[124:136], where, pos, "size")
        typ = bytes(hdr[156:157])
        if bytes(hdr[257:262]) == b"ustar":
            prefix = bytes(hdr[345:500]).split(b"\x00", 1)[0]
            if prefix:
                name = prefix + b"/" + name
        data = pos + _BLOCK
        if typ in (b"x", b"g", b"L"):
            if msize > size - data:
                raise ShardFormatError(f"{where}: tar header at offset {pos}: a {msize}-byte extended "
                                       f"header does not fit in the file ({size} bytes); {_DAMAGED}")
            body = bytearray(msize)
            pread_into(fd, body, data, where)
            if typ == b"x":
                pending.update(_pax(body, where, pos))
            elif typ == b"L":
                pending["path"] = bytes(body).split(b"\x00", 1)[0].decode("utf-8", "surrogateescape")
            pos = data + (msize + _BLOCK - 1) // _BLOCK * _BLOCK
            continue
        if "size" in pending:
            s = pending["size"]
            if not (s.isascii() and s.isdigit()):
                raise ShardFormatError(f"{where}: PAX header before offset {pos}: size {s!r} is not "
                                       f"a number; {_DAMAGED}")
            msize = int(s)
        if msize > size - data:
            raise ShardFormatError(f"{where}: tar member at offset {pos}: {msize} bytes from {data} "
                                   f"run past the end of the file ({size} bytes); {_DAMAGED}")
        name = pending.get("path", name.decode("utf-8", "surrogateescape"))
        pending = {}
        if typ in (b"0", b"\x00", b"7"):
            members.append((name, data, msize))
        pos = data + (msize + _BLOCK - 1) // _BLOCK * _BLOCK  # > pos: the scan always advances
    return members


def group_members(members):
    """Group adjacent members by WebDataset key: (stem, {ext: (offset, size)}) in order."""
    samples = []
    cur_stem, cur = None, None
    for name, off, size in members:
        slash = name.rfind("/")
        base = name[slash + 1:]
        dot = base.find(".")
        if dot < 0:
            stem, ext = name, ""
        else:
            stem, ext = name[:slash + 1 + dot], base[dot + 1:]
        if stem != cur_stem:
            cur_stem, cur = stem, {}
            samples.append((stem, cur))
        cur[ext] = (off, size)
    return samples


def _is_label(v):
    """An int64 label (labels are returned as int64 arrays)."""
    return isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < (1 << 63)


def _is_frame(ext):
    return ext.endswith(".png") and ext[:-4].isascii() and ext[:-4].isdigit()


class TarShard:
    """A WebDataset-layout tar shard (prep --format png|wav).

    The member index is built once per process, on first use, by reading
    the tar headers alone; samples are then read with one positional read
    per member. Fields: ``data`` (the PNG, the clip's frames stacked
    (T, H, W, C), or the WAV) and one per ``KEY.NAME.npy`` member, named NAME.
    """

    def __init__(self, info, files, k, manifest_path, audio):
        self.info = info
        self.files = files
        self.k = k
        self.path = info["path"]
        self.count = int(info["count"])
        self.where = f"{self.path} (in {manifest_path})"
        self.audio = audio
        self._index = None
        self._labels = None
        self._keys = None

    def __getstate__(self):
        st = dict(self.__dict__)
        st["_index"] = None
        return st

    def index(self):
        if self._index is None:
            fd = self.files.fd(self.k)
            members = scan_tar(fd, int(self.info["bytes"]), self.where)
            samples = group_members(members)
            if len(samples) != self.count:
                raise ShardFormatError(f"{self.where}: tar holds {len(samples)} samples, "
                                       f"the manifest says {self.count}; {_DAMAGED}")
            self._index = samples
        return self._index

    @property
    def fields(self):
        _, members = self.index()[0] if self.count else (None, {})
        extra = sorted(e[:-4] for e in members if e.endswith(".npy"))
        return ["data"] + extra

    def _member(self, off, size):
        buf = bytearray(size)
        if size:
            pread_into(self.files.fd(self.k), buf, off, self.path)
        return buf

    def _json(self, i):
        stem, members = self.index()[i]
        if "json" not in members:
            return {}
        try:
            meta = json.loads(bytes(self._member(*members["json"])))
        except (ValueError, RecursionError):
            meta = None
        if not isinstance(meta, dict) or not isinstance(meta.get("key", ""), str) \
                or not _is_label(meta.get("label", -1)):
            raise ShardFormatError(f"{self.where}: sample {stem}: bad json member (not an object with "
                                   f"a string key and an integer label); {_DAMAGED}")
        return meta

    def read_field(self, name, i, out=None):
        stem, members = self.index()[i]
        where = f"{self.path}: {stem}"
        if name == "data":
            if "png" in members:
                return decode_png(self._member(*members["png"]), where + ".png", out)
            if "wav" in members:
                a, _rate = decode_wav(self._member(*members["wav"]), where + ".wav")
                if out is not None:
                    if a.shape != out.shape:
                        return a  # the caller reports the mismatch
                    out[...] = a
                    return out
                return a
            frames = sorted(e for e in members if _is_frame(e))
            if not frames:
                raise ShardFormatError(f"{self.where}: sample {stem} has no png, wav or frame members; {_DAMAGED}")
            clip = None
            for t, e in enumerate(frames):
                if int(e[:-4]) != t:
                    raise ShardFormatError(f"{self.where}: sample {stem}: clip frame {e} out of sequence; {_DAMAGED}")
                buf = self._member(*members[e])
                if clip is None:
                    first = decode_png(buf, f"{where}.{e}")
                    shape = (len(frames),) + first.shape
                    fits = out is not None and out.shape == shape and out.dtype == first.dtype
                    clip = out if fits else np.empty(shape, first.dtype)
                    clip[0] = first
                else:
                    decode_png(buf, f"{where}.{e}", clip[t])
            return clip
        ext = name + ".npy"
        if ext not in members:
            raise ShardFormatError(f"{self.where}: sample {stem} has no member {stem}.{ext}; {_DAMAGED}")
        a = decode_npy(self._member(*members[ext]), f"{where}.{ext}")
        if out is not None and a.shape == out.shape:
            out[...] = a
            return out
        return a

    def read(self, i, fields):
        return {n: self.read_field(n, i) for n in fields}

    def label(self, i):
        stem, members = self.index()[i]
        if "cls" in members:
            try:
                label = int(bytes(self._member(*members["cls"])).strip())
            except ValueError:
                label = None
            if not _is_label(label):
                raise ShardFormatError(f"{self.where}: sample {stem}: bad cls member; {_DAMAGED}")
            return label
        if "json" in members:
            return self._json(i).get("label", -1)
        return -1

    def labels(self):
        if self._labels is None:
            self._labels = np.array([self.label(i) for i in range(self.count)], np.int64)
        return self._labels

    def key(self, i):
        if self._keys is not None:
            return self._keys[i]
        return self._json(i).get("key") or self.index()[i][0]

    def keys(self):
        if self._keys is None:
            self._keys = [self.key(i) for i in range(self.count)]
        return self._keys

    def sample_rate(self, i=0):
        stem, members = self.index()[i]
        if "wav" not in members:
            return None
        off, _ = members["wav"]
        return decode_wav(self._member(off, members["wav"][1]))[1]


class ManifestInfo:
    """What a reader over a ShardSet (``self._ss``) tells of its manifest."""

    @property
    def manifest(self):
        """The parsed manifest (``.raw`` is the JSON dict)."""
        return self._ss.manifest

    @property
    def classes(self):
        return self._ss.manifest.classes

    @property
    def format(self):
        return self._ss.manifest.format

    @property
    def order(self):
        return self._ss.manifest.order

    @property
    def format_version(self):
        return self._ss.manifest.format_version

    @property
    def dataset_id(self):
        """What the shards are: the manifest's dataset_id (docs/FORMAT.md §2.5)."""
        return self._ss.manifest.dataset_id

    def check_unchanged(self):
        """Raise ShardChangedError if a shard was replaced, rewritten or truncated since the
        reader first saw it (one stat per shard; iterators call it at each epoch start)."""
        self._ss.check_unchanged()


class ShardSet:
    """A manifest, its shards and global sample numbering (shard order, then position)."""

    def __init__(self, path, check_sizes=True, verify=False):
        self.manifest = Manifest(path)
        m = self.manifest
        self.files = open_files(m.shards, m.path)
        self.remote = m.path.startswith("gs://")
        if verify or check_sizes or self.remote:
            self.files.record_all()  # before hashing: a change while verify reads shows later
        if verify:
            m.verify(self._blocks if self.remote else None)
        if m.format == "hdf5":
            self.shards = [H5Shard(s, self.files, k, m.path) for k, s in enumerate(m.shards)]
        else:
            self.shards = [TarShard(s, self.files, k, m.path, m.format == "wav") for k, s in enumerate(m.shards)]
            for s in self.shards:
                if not s.count:
                    s.index()  # no reader ever opens it: check now that it holds no samples
        self.counts = m.counts
        self.starts = np.concatenate([[0], np.cumsum(self.counts)]).astype(np.int64)
        self.total = int(self.starts[-1])

    def _blocks(self, k):
        """Shard k's bytes in blocks (hashing a remote shard)."""
        size = int(self.manifest.shards[k]["bytes"])
        self.files.whole([k])
        buf = bytearray(8 << 20)
        for off in range(0, size, len(buf)):
            mv = memoryview(buf)[:min(len(buf), size - off)]
            pread_into(self.files.fd(k), mv, off, self.manifest.shards[k]["path"])
            yield mv

    def plan_reads(self, gids, fields=None, hold=True):
        """Tell a remote shard set the samples to come (global indices, in read order) and the
        fields read of them (None: all), so chunks are fetched in that order; local shards need
        nothing. ``hold``: see RemoteFiles.plan (False for scattered map-style reads)."""
        if not self.remote or not len(gids):
            return
        gids = np.asarray(gids, np.int64)
        ks = np.searchsorted(self.starts, gids, side="right") - 1
        if self.manifest.format != "hdf5":
            _, first = np.unique(ks, return_index=True)  # tar: the header scan reads the whole shard
            self.files.whole(ks[np.sort(first)].tolist(), hold)
            return
        js = gids - self.starts[ks]
        self.plan_runs(np.stack([ks, js, js + 1], axis=1), fields, hold)

    def plan_runs(self, runs, fields=None, hold=True):
        """As plan_reads, for (shard, start, stop) runs of samples (HDF5: the bytes of those samples'
        fields, each shard's labels first; ragged fields: the whole shard). The plan is what is
        read: a chunk held in memory for it is let go once its planned bytes are read."""
        if not self.remote:
            return
        runs = np.asarray(runs, np.int64).reshape(-1, 3)
        if self.manifest.format != "hdf5":
            _, first = np.unique(runs[:, 0], return_index=True)
            self.files.whole(runs[np.sort(first), 0].tolist(), hold)
            return
        self.files.plan(self._byte_ranges(runs, fields), hold)

    def _byte_ranges(self, runs, fields):
        """The (shard, offset, length) reads of runs, in order: at a shard's first run its labels
        (and the whole shard if a field is ragged), then each run's fixed-size fields."""
        off, size = self._layout(fields)
        k, a, b = runs[:, 0], runs[:, 1], runs[:, 2]
        first = np.zeros(len(runs), bool)
        first[np.unique(k, return_index=True)[1]] = True
        start = off[k].copy()
        length = size[k].copy()
        length[:, :2] *= first[:, None]  # labels and whole shards once, at the shard's first run
        start[:, 2:] += a[:, None] * size[k, 2:]
        length[:, 2:] *= (b - a)[:, None]
        out = np.stack([np.broadcast_to(k[:, None], start.shape), start, length], axis=2).reshape(-1, 3)
        return out[out[:, 2] > 0]

    def _layout(self, fields):
        """Per shard, [labels, whole shard, each fixed-size field read] as (offsets, bytes per
        sample) arrays: the same every epoch, so made once per field selection."""
        cache = self.__dict__.setdefault("_layouts", {})
        key = None if fields is None else tuple(fields)
        if key not in cache:
            names = list(dict.fromkeys(n for s in self.shards for n in s.field if fields is None or n in fields))
            off = np.zeros((len(self.shards), 2 + len(names)), np.int64)
            size = np.zeros_like(off)
            for k, s in enumerate(self.shards):
                d = s.by_name.get("labels")
                if d is not None and d["offset"] >= 0:
                    off[k, 0], size[k, 0] = d["offset"], d["size"]
                if any(f.ragged for f in s.field.values()):
                    size[k, 1] = int(s.info["bytes"])
                for j, name in enumerate(names):
                    f = s.field.get(name)
                    if f is not None and not f.ragged and f.offset >= 0 and f.sample_nbytes:
                        off[k, 2 + j], size[k, 2 + j] = f.offset, f.sample_nbytes
            cache[key] = off, size
        return cache[key]

    def locate(self, i):
        """Global index -> (shard number, index in shard)."""
        if i < 0:
            i += self.total
        if not 0 <= i < self.total:
            raise IndexError(f"sample {i} out of range ({self.total} samples)")
        k = int(np.searchsorted(self.starts, i, side="right")) - 1
        return k, i - int(self.starts[k])

    def fields(self):
        """Field names common to every shard, in the first shard's order."""
        nonempty = [s for s in self.shards if s.count]
        if not nonempty:
            return []
        first = list(nonempty[0].fields)
        if self.manifest.format != "hdf5":
            return first  # checking every tar shard would scan them all here
        for s in nonempty[1:]:
            if list(s.fields) != first:
                raise ShardFormatError(f"{s.where}: fields {s.fields} differ from "
                                       f"{nonempty[0].path}'s {first}")
        return first

    def check_unchanged(self):
        """ShardChangedError if a shard was replaced, rewritten or truncated since first seen."""
        self.files.check_unchanged()

    def close(self):
        self.files.close()

