"""Per-process file descriptors and positional reads.

A descriptor opened before a fork would be shared with the children
(DataLoader workers): harmless for pread, which has no file position, but
a worker that closes it or a parent that reopens it would race. So every
descriptor is owned by the process that opened it: ``Files.fd`` reopens
lazily after a fork (``os.getpid()`` changed) and never closes the
parent's copy from the child.
"""

import os

from .errors import ShardChangedError, ShardIOError
from .manifest import check_size

try:
    _preadv = os.preadv
except AttributeError:  # pragma: no cover - non-Linux
    _preadv = None


class Closing:
    """``with reader:`` closes it at the end (its descriptors, and on gs:// its fetch
    threads, buffers and connections), as ``reader.close()`` does."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_tuned = False


def tune_malloc(mmap_threshold=32 << 20, trim_threshold=256 << 20):
    """Make glibc keep freed memory for reuse instead of returning it to the kernel.

    Per-sample reads return a fresh array each (they must: callers keep
    them), and a batch of them is freed after default_collate stacks it.
    With glibc's defaults, allocations above ~128 KiB-32 MiB are mmapped or
    trimmed back to the kernel on free, so every batch faults its memory in
    afresh; on the development VM that capped a DataLoader at 230 MB/s, and
    these settings raised it to 520 MB/s (samples of 150 KB). prepshards
    calls this once in each DataLoader worker process (never in the main
    process) unless PREPSHARDS_TUNE_MALLOC=0; call it yourself elsewhere,
    e.g. as a worker_init_fn. Returns False where glibc's mallopt is absent.
    """
    global _tuned
    try:
        import ctypes  # noqa: PLC0415
        libc = ctypes.CDLL("libc.so.6")
        ok = bool(libc.mallopt(-3, int(mmap_threshold))) and bool(libc.mallopt(-1, int(trim_threshold)))
    except (OSError, AttributeError):
        return False
    _tuned = ok
    return ok


def _maybe_tune():
    if _tuned or os.environ.get("PREPSHARDS_TUNE_MALLOC", "1") == "0":
        return
    from . import _torch  # noqa: PLC0415
    if _torch.in_worker():
        tune_malloc()


def identity(st):
    """What says a file is still the one first opened: device, inode, size, mtime.

    A shard replaced by another run (renamed over: a new inode) or
    rewritten in place (a new mtime) differs, even at the same size,
    without hashing it.
    """
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class Files:
    """Lazily opened read-only descriptors, one per shard, per process.

    Each shard's identity (``identity``) is recorded when the reader first
    sees it (``record_all`` when a reader is made, else the first open) and
    travels to DataLoader workers; every later open and every
    ``check_unchanged`` compares against it and raises ShardChangedError on
    a difference: the shards changed under the reader.
    """

    def __init__(self, shards, manifest_path):
        self._shards = shards
        self._manifest_path = manifest_path
        self._pid = None
        self._fds = {}
        self._ident = {}

    def __getstate__(self):
        return {"_shards": self._shards, "_manifest_path": self._manifest_path, "_pid": None, "_fds": {},
                "_ident": self._ident}

    def record_all(self):
        """Check every shard's size against the manifest and record its identity."""
        for k, s in enumerate(self._shards):
            check_size(s["path"], s["bytes"], self._manifest_path)
            try:
                st = os.stat(s["path"])
            except OSError:
                st = None  # raced with a removal: the open will report it
            if st is not None:
                self._ident.setdefault(k, identity(st))

    def _changed(self, k, what):
        path = self._shards[k]["path"]
        return ShardChangedError(
            f"{path}: the shards changed under the reader: this shard {what} since the reader "
            f"first opened it (another prep convert, a copy or a truncation); restart the reader "
            f"from the new manifest ({self._manifest_path}), and check the folder with "
            "`prep inspect DIR` if nothing should have changed it")

    def _compare(self, k, st):
        want = self._ident.get(k)
        if want is None:
            self._ident[k] = identity(st)
            return
        got = identity(st)
        if got == want:
            return
        if got[2] != want[2]:
            what = f"went from {want[2]} to {got[2]} bytes"
        elif got[:2] != want[:2]:
            what = "was replaced by another file of the same size"
        else:
            what = "was rewritten in place (its mtime changed)"
        raise self._changed(k, what)

    def check_unchanged(self):
        """Raise ShardChangedError if a shard seen before was replaced, rewritten or removed.

        One stat per shard: cheap enough for every epoch.
        """
        for k in list(self._ident):
            try:
                st = os.stat(self._shards[k]["path"])
            except FileNotFoundError:
                raise self._changed(k, "was removed") from None
            except OSError as e:
                raise ShardIOError(f"{self._shards[k]['path']}: cannot stat the shard "
                                   f"({e.strerror or e}); check the folder's permissions") from None
            self._compare(k, st)

    def fd(self, k):
        pid = os.getpid()
        if self._pid != pid:
            # Forked (or unpickled): the inherited descriptors belong to the
            # parent. Forget them rather than close them, so the parent's
            # reads are never affected.
            self._fds = {}
            self._pid = pid
            _maybe_tune()
        fd = self._fds.get(k)
        if fd is None:
            s = self._shards[k]
            try:
                fd = os.open(s["path"], os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except FileNotFoundError:
                if k in self._ident:
                    raise self._changed(k, "was removed") from None
                check_size(s["path"], s["bytes"], self._manifest_path)  # says it is missing
                raise
            except OSError as e:
                raise ShardIOError(f"{s['path']}: cannot open the shard ({e.strerror or e}); "
                                   "check its permissions") from None
            try:
                st = os.fstat(fd)
                check_size(s["path"], s["bytes"], self._manifest_path, st)
                self._compare(k, st)
            except Exception:
                os.close(fd)
                raise
            self._fds[k] = fd
        return fd

    def close(self):
        if self._pid == os.getpid():
            for fd in self._fds.values():
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._fds = {}

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def pread_into(fd, buf, offset, path="shard"):
    """Fill the writable buffer ``buf`` from ``fd`` at ``offset``, exactly.

    Offsets were checked against the manifest's size, and the size on
    open: a short read means the file shrank while being read.
    """
    mv = memoryview(buf).cast("B")
    if not isinstance(fd, int):  # a shard on gs:// (_gcs.RemoteFile): read through the chunk cache
        fd.readinto(mv, offset, path)
        return
    n = len(mv)
    done = 0
    while done < n:
        try:
            if _preadv is not None:
                k = _preadv(fd, [mv[done:]], offset + done)
            else:  # pragma: no cover
                b = os.pread(fd, n - done, offset + done)
                k = len(b)
                mv[done:done + k] = b
        except OSError as e:
            raise read_error(path, n, offset, e) from None
        if k <= 0:
            raise read_error(path, n, offset, None, offset + done)
        done += k


def read_error(path, n, offset, err, end=None):
    """The error for a read of n bytes at offset that failed with err (an OSError or errno)
    or, err None, found the file ending at byte ``end`` (or before the read's end)."""
    if err is not None:
        why = os.strerror(err) if isinstance(err, int) else (err.strerror or err)
        return ShardIOError(f"{path}: read of {n} bytes at offset {offset} failed ({why}); "
                            "check the disk, or copy the shard again")
    where = f"ends at byte {end}" if end is not None else f"ends before byte {offset + n}"
    return ShardChangedError(
        f"{path}: the file {where}, but {n} bytes at offset {offset} "
        "should be there: the shards changed under the reader (truncated or replaced while "
        "being read); restart the reader from the current manifest, and check the folder "
        "with `prep inspect DIR`")


def open_files(shards, manifest_path):
    """Files for local shards, _gcs.RemoteFiles for shards on gs://."""
    if manifest_path.startswith("gs://"):
        from ._gcs import RemoteFiles  # noqa: PLC0415
        return RemoteFiles(shards, manifest_path)
    return Files(shards, manifest_path)
