"""The online crop/flip kernels of _window.c, through ctypes (numpy does the same without them).

The library is built by ``make`` (python/prepshards/_window.so) or by pip
(setup.py: _window.cpython-*.so). It holds no Python code, so no Python
headers are needed; ``PREPSHARDS_NATIVE=0`` turns it off (tests compare
both paths).
"""

import ctypes
import glob
import os

import numpy as np

_lib = None
why_not = None  # why the numpy path runs, for tests and the bench


def _load():
    global _lib, why_not
    if os.environ.get("PREPSHARDS_NATIVE", "1") == "0":
        why_not = "PREPSHARDS_NATIVE=0"
        return
    here = os.path.dirname(os.path.abspath(__file__))
    found = sorted(glob.glob(os.path.join(here, "_window*.so")))
    if not found:
        why_not = (f"no _window*.so in {here}: build it with `make python-native`, or install "
                   "the package with pip (it needs a C compiler)")
        return
    try:
        lib = ctypes.CDLL(found[0])
    except OSError as e:
        why_not = f"{found[0]}: {e}"
        return
    sz, p, i = ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int
    lib.prep_copy_window.argtypes = [p, p, sz, sz, sz, sz, sz, i, i]
    lib.prep_copy_window.restype = None
    lib.prep_read_windows.argtypes = [sz, p, p, sz, p, sz, sz, p, sz, sz, sz, p, p, p, p, p, p]
    lib.prep_read_windows.restype = i
    lib.prep_window_path.argtypes = [sz]
    lib.prep_window_path.restype = ctypes.c_char_p
    _lib = lib


_load()


def available():
    return _lib is not None


def path(c=3):
    """Which flip the library runs for c bytes a pixel ("ssse3", "scalar"), or "numpy"."""
    return _lib.prep_window_path(c).decode() if _lib is not None else "numpy"


def copy_window(dst, src, x0, fy, fx):
    """dst = src[:, x0:x0+w] mirrored as drawn; dst packed, src rows strided."""
    h, w = dst.shape[:2]
    c = dst.itemsize
    for n in dst.shape[2:]:
        c *= n
    _lib.prep_copy_window(dst.ctypes.data, src.ctypes.data, src.strides[0], h, w, c, x0, fy, fx)


def read_windows(fds, offs, stride, dst, pos, h, w, c, x0, fy, fx, scratch):
    """prep_read_windows over numpy arrays (int32 fds, int64 offs/pos/x0, bool fy/fx), pos
    increasing: (0, None), or (-errno or 1, the failing sample's position in the arrays).
    dst: the whole batch; a sample's rows spill into the slots after its own only where
    this call fills those slots later (other slots are never touched)."""
    fds = np.ascontiguousarray(fds, np.int32)
    offs, pos, x0 = (np.ascontiguousarray(a, np.int64) for a in (offs, pos, x0))
    fy, fx = (np.ascontiguousarray(a, np.uint8) for a in (fy, fx))
    if len(pos) > 1 and not (pos[1:] > pos[:-1]).all():
        raise ValueError("read_windows: pos must increase")
    nb = dst[0].nbytes if len(dst) else 0
    over = h * stride - nb  # bytes the rows overrun their slot by
    k = -(-over // nb) if over > 0 and nb else 0  # slots overrun
    spill = np.zeros(len(pos), np.uint8)
    if len(pos) > k:  # sample t may spill if pos[t+1..t+k] are the next k slots (pos is increasing)
        spill[:len(pos) - k] = pos[k:] - pos[:len(pos) - k] == k
    failed = np.zeros(1, np.int64)
    rc = _lib.prep_read_windows(len(fds), fds.ctypes.data, offs.ctypes.data, stride, dst.ctypes.data,
                                nb, len(dst), pos.ctypes.data, h, w, c, x0.ctypes.data, fy.ctypes.data,
                                fx.ctypes.data, spill.ctypes.data, scratch.ctypes.data, failed.ctypes.data)
    return rc, (int(failed[0]) if rc else None)
