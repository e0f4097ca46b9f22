"""Per-process file descriptors and positional reads.

A descriptor opened before a fork would be shared with the children
(DataLoader workers): harmless for pread, which has no file position, but
a worker that closes it or a parent that reopens it would race. So every
descriptor is owned by the process that opened it: ``Files.fd`` reopens
lazily after a fork (``os.getpid()`` changed) and never closes the
parent's copy from the child.
"""

import os

from .manifest import check_size

try:
    _preadv = os.preadv
except AttributeError:  # pragma: no cover - non-Linux
    _preadv = None


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


class Files:
    """Lazily opened read-only descriptors, one per shard, per process."""

    def __init__(self, shards, manifest_path):
        self._shards = shards
        self._manifest_path = manifest_path
        self._pid = None
        self._fds = {}

    def __getstate__(self):
        return {"_shards": self._shards, "_manifest_path": self._manifest_path, "_pid": None, "_fds": {}}

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
            fd = os.open(s["path"], os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            try:
                check_size(s["path"], s["bytes"], self._manifest_path, os.fstat(fd).st_size)
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
    """Fill the writable buffer ``buf`` from ``fd`` at ``offset``, exactly."""
    mv = memoryview(buf).cast("B")
    n = len(mv)
    done = 0
    while done < n:
        if _preadv is not None:
            k = _preadv(fd, [mv[done:]], offset + done)
        else:  # pragma: no cover
            b = os.pread(fd, n - done, offset + done)
            k = len(b)
            mv[done:done + k] = b
        if k <= 0:
            raise EOFError(f"{path}: short read at offset {offset + done} ({done} of {n} bytes)")
        done += k
