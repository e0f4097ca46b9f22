"""Online augmentation: the part of a split recipe that the reader applies, fresh each epoch.

``prep convert --recipe "resize=256,crop=256 | crop=224:random,hflip=0.5"``
runs the ops before ``|`` once and records the rest in the manifest as
``online_recipe``. prepshards applies those ops to image samples (uint8,
(H, W) or (H, W, C)) whenever it reads them, unless a reader is made with
``raw=True``. The random choices are a pure function of (manifest seed,
reader ``online_seed``, epoch, sample index) (docs/FORMAT.md §4.5), so any
reader, process or worker count gives the same sample.

Crops and flips of a batch are fused into the read: only the crop's rows
are read, into the batch itself, and moved into place (mirrored where
drawn), by the C kernel of _window.c (_native.py); without it, into a small
reused buffer and copied with numpy. ``rrc`` (RandomResizedCrop) resamples, so it runs as torch
ops on a batch (``apply_torch``), on CPU tensors in the readers or on a
CUDA batch read with ``raw=True``.
"""

import math

import numpy as np

from . import _native
from .errors import ManifestError, ShardError

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_DRAWS = 64  # draw slots per op: rrc uses 40 (10 tries x 4)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)  # made once: a batch mixes ~7 times
_C1, _C2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(z):
    """splitmix64's finaliser on a uint64 array (wrapping arithmetic)."""
    z = z ^ (z >> _S30)
    z *= _C1
    z ^= z >> _S27
    z *= _C2
    return z ^ (z >> _S31)


def sample_keys(seed, salt, epoch, indices):
    """The per-sample key of docs/FORMAT.md §4.5: mix(mix(mix(mix(seed) + salt) + epoch) + index), mod 2^64."""
    with np.errstate(over="ignore"):
        k = _mix(np.array([int(seed) & _M64], np.uint64))
        k = _mix(k + np.uint64(int(salt) & _M64))
        k = _mix(k + np.uint64(int(epoch) & _M64))
        idx = np.asarray(indices, np.int64).astype(np.uint64)
        return _mix(k + idx)


def uniform(keys, op, draw):
    """Draw ``draw`` of op ``op`` for every key: uniform in [0, 1), 53 bits."""
    with np.errstate(over="ignore"):
        r = _mix(keys + np.uint64(((op * _DRAWS + draw + 1) * _GOLDEN) & _M64))
    return (r >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def _below(u, n):
    """An integer uniform in [0, n) from uniforms u (n >= 1, per sample or scalar)."""
    return np.minimum((u * n).astype(np.int64), np.asarray(n, np.int64) - 1)


# -- the recipe ---------------------------------------------------------------------

class Op:
    __slots__ = ("kind", "w", "h", "random", "p", "scale", "ratio")

    def __init__(self, kind, w=0, h=0, random=False, p=0.0, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
        self.kind, self.w, self.h, self.random, self.p = kind, w, h, random, p
        self.scale, self.ratio = scale, ratio

    def __repr__(self):
        return f"Op({self.kind!r}, {self.w}x{self.h}, random={self.random}, p={self.p})"


ONLINE_OPS = "crop=S|WxH[:random], hflip=P, vflip=P, rrc=S|WxH[:scale=LO-HI][:ratio=LO-HI]"


def _size(v, bad):
    w, x, h = v.partition("x")
    try:
        w, h = int(w), int(h) if x else int(w)
    except ValueError:
        raise bad("size") from None
    if w <= 0 or h <= 0:
        raise bad("size")
    return w, h


def _range(v, bad, what):
    lo, _, hi = v.partition("-")
    try:
        lo, hi = float(lo), float(hi) if hi else float(lo)
    except ValueError:
        raise bad(what) from None
    if not 0 < lo <= hi or not math.isfinite(hi):
        raise bad(what)
    return lo, hi


def parse(text, where="manifest"):
    """Parse an online recipe (``crop=224:random,hflip=0.5``) into Ops; ManifestError if unknown."""
    ops = []
    for part in (p.strip() for p in text.split(",")) if text.strip() else ():
        name, _, val = part.partition("=")

        def bad(what, part=part):
            return ManifestError(f"{where}: online_recipe op {part!r}: bad {what}; prepshards applies "
                                 f"{ONLINE_OPS}: upgrade prepshards, or regenerate the manifest")
        if name == "crop":
            size, colon, mode = val.partition(":")
            if colon and mode != "random":
                raise bad("mode")
            w, h = _size(size, bad)
            ops.append(Op("crop", w, h, random=bool(colon)))
        elif name in ("hflip", "vflip"):
            try:
                p = float(val)
            except ValueError:
                raise bad("probability") from None
            if not 0 <= p <= 1:
                raise bad("probability")
            ops.append(Op(name, p=p))
        elif name == "rrc":
            parts = val.split(":")
            w, h = _size(parts[0], bad)
            op = Op("rrc", w, h)
            for extra in parts[1:]:
                k, _, v = extra.partition("=")
                if k == "scale":
                    op.scale = _range(v, bad, "scale")
                    if op.scale[1] > 1:
                        raise bad("scale")
                elif k == "ratio":
                    op.ratio = _range(v, bad, "ratio")
                else:
                    raise bad("parameter")
            ops.append(op)
        else:
            raise ManifestError(f"{where}: online_recipe has op {part!r}, which this prepshards cannot "
                                f"apply (it applies {ONLINE_OPS}): upgrade prepshards")
    return ops


# -- drawing each sample's parameters ----------------------------------------------------

class Window:
    """Crops and flips composed: each sample's output is stored rows y0..y0+h, columns
    x0..x0+w, mirrored top-bottom where ``fy`` and left-right where ``fx``."""

    kind = "window"

    def __init__(self, y0, x0, h, w, fy, fx):
        self.y0, self.x0, self.h, self.w, self.fy, self.fx = y0, x0, h, w, fy, fx


class Boxes:
    """rrc: each sample's box (y, x, bh, bw) in its current image, resized to oh x ow."""

    kind = "rrc"

    def __init__(self, y, x, bh, bw, oh, ow):
        self.y, self.x, self.bh, self.bw, self.oh, self.ow = y, x, bh, bw, oh, ow


def _rrc_boxes(op, j, keys, H, W):
    """torchvision's RandomResizedCrop.get_params, vectorised: 10 tries of (area, log-ratio,
    top, left), the first that fits; else the whole image, its ratio clamped into range."""
    n = len(keys)
    area = float(H * W)
    lo, hi = math.log(op.ratio[0]), math.log(op.ratio[1])
    y = np.zeros(n, np.int64)
    x = np.zeros(n, np.int64)
    bh = np.zeros(n, np.int64)
    bw = np.zeros(n, np.int64)
    done = np.zeros(n, bool)
    for t in range(10):
        target = area * (op.scale[0] + (op.scale[1] - op.scale[0]) * uniform(keys, j, 4 * t))
        ratio = np.exp(lo + (hi - lo) * uniform(keys, j, 4 * t + 1))
        w = np.rint(np.sqrt(target * ratio)).astype(np.int64)  # rint: half to even, as Python's round
        h = np.rint(np.sqrt(target / ratio)).astype(np.int64)
        ok = ~done & (w > 0) & (w <= W) & (h > 0) & (h <= H)
        if ok.any():
            yy = _below(uniform(keys, j, 4 * t + 2), np.maximum(H - h + 1, 1))
            xx = _below(uniform(keys, j, 4 * t + 3), np.maximum(W - w + 1, 1))
            y[ok], x[ok], bh[ok], bw[ok] = yy[ok], xx[ok], h[ok], w[ok]
            done |= ok
    if not done.all():
        w, h = W, H
        if W / H < op.ratio[0]:
            h = int(round(W / op.ratio[0]))
        elif W / H > op.ratio[1]:
            w = int(round(H * op.ratio[1]))
        rest = ~done
        y[rest], x[rest], bh[rest], bw[rest] = (H - h) // 2, (W - w) // 2, h, w
    return Boxes(y, x, bh, bw, op.h, op.w)


class Online:
    """An online recipe bound to a manifest's seed and a reader's ``online_seed``."""

    def __init__(self, text, seed, salt=0, where="manifest"):
        self.text = text
        self.ops = parse(text, where)
        self.seed = int(seed)
        self.salt = int(salt)
        self.where = where
        self.fused = not any(o.kind == "rrc" for o in self.ops)

    def __repr__(self):
        return f"Online({self.text!r}, seed={self.seed}, online_seed={self.salt})"

    def out_shape(self, shape):
        """The sample shape after the ops, for a stored (H, W) or (H, W, C) uint8 image."""
        shape = tuple(shape)
        if len(shape) not in (2, 3):
            raise ShardError(f"{self.where}: online_recipe {self.text!r} applies to images (H, W[, C]), "
                             f"but a sample has shape {list(shape)}; read it with raw=True")
        H, W = shape[:2]
        for o in self.ops:
            if o.kind == "crop" and (o.h > H or o.w > W):
                raise ShardError(
                    f"{self.where}: online_recipe {self.text!r}: crop {o.w}x{o.h} is larger than the "
                    f"stored image ({W}x{H}); convert with a larger offline size (the ops before '|'), "
                    "or read the stored samples with raw=True")
            if o.kind in ("crop", "rrc"):
                H, W = o.h, o.w
        return (H, W) + shape[2:]

    def draw(self, epoch, indices, shape):
        """The steps for samples ``indices`` of stored shape ``shape`` in ``epoch``:
        a list of Window and Boxes, applied in order (consecutive crops and flips composed)."""
        self.out_shape(shape)
        keys = sample_keys(self.seed, self.salt, epoch, indices)
        n = len(keys)
        H, W = shape[:2]
        steps = []
        # current image -> stored: y = ay + sy * y', x = ax + sx * x'
        ay, ax = np.zeros(n, np.int64), np.zeros(n, np.int64)
        sy, sx = np.ones(n, np.int64), np.ones(n, np.int64)
        open_window = False
        for j, o in enumerate(self.ops):
            if o.kind == "rrc":
                if open_window:
                    steps.append(_window(ay, ax, sy, sx, H, W))
                    ay, ax = np.zeros(n, np.int64), np.zeros(n, np.int64)
                    sy, sx = np.ones(n, np.int64), np.ones(n, np.int64)
                    open_window = False
                steps.append(_rrc_boxes(o, j, keys, H, W))
                H, W = o.h, o.w
                continue
            open_window = True
            if o.kind == "crop":
                if o.random:  # top, then left, as torchvision and prep's Go ops draw them
                    oy = _below(uniform(keys, j, 0), H - o.h + 1)
                    ox = _below(uniform(keys, j, 1), W - o.w + 1)
                else:  # torchvision's centre: round half to even
                    oy = np.full(n, int(round((H - o.h) / 2)), np.int64)
                    ox = np.full(n, int(round((W - o.w) / 2)), np.int64)
                ay, ax = ay + sy * oy, ax + sx * ox
                H, W = o.h, o.w
            else:
                f = uniform(keys, j, 0) < o.p
                if o.kind == "vflip":
                    ay = np.where(f, ay + sy * (H - 1), ay)
                    sy = np.where(f, -sy, sy)
                else:
                    ax = np.where(f, ax + sx * (W - 1), ax)
                    sx = np.where(f, -sx, sx)
        if open_window or not steps:
            steps.append(_window(ay, ax, sy, sx, H, W))
        return steps


def _mix_int(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def draw_window(online, epoch, index, shape):
    """``draw`` for one sample of a crop/flip recipe, in Python integers (numpy's per-call
    overhead would cost more than the read): (y0, x0, h, w, fy, fx), the same numbers."""
    key = _mix_int((_mix_int((_mix_int((_mix_int(online.seed & _M64) + online.salt) & _M64)
                              + epoch) & _M64) + index) & _M64)

    def u(j, k):
        r = _mix_int((key + (j * _DRAWS + k + 1) * _GOLDEN) & _M64)
        return (r >> 11) * (1.0 / (1 << 53))

    def below(v, n):
        return min(int(v * n), n - 1)

    H, W = shape[:2]
    ay = ax = 0
    sy = sx = 1
    for j, o in enumerate(online.ops):
        if o.kind == "crop":
            if o.random:
                oy, ox = below(u(j, 0), H - o.h + 1), below(u(j, 1), W - o.w + 1)
            else:
                oy, ox = int(round((H - o.h) / 2)), int(round((W - o.w) / 2))
            ay, ax = ay + sy * oy, ax + sx * ox
            H, W = o.h, o.w
        elif u(j, 0) < o.p:
            if o.kind == "vflip":
                ay, sy = ay + sy * (H - 1), -sy
            else:
                ax, sx = ax + sx * (W - 1), -sx
    return (ay - (H - 1) if sy < 0 else ay), (ax - (W - 1) if sx < 0 else ax), H, W, sy < 0, sx < 0


def _window(ay, ax, sy, sx, h, w):
    fy, fx = sy < 0, sx < 0
    return Window(np.where(fy, ay - (h - 1), ay), np.where(fx, ax - (w - 1), ax), h, w, fy, fx)


# -- applying: numpy (the fused CPU read) --------------------------------------------------

_masks = {}
_tmp = {}


def _scratch(name, shape, dtype):
    """A reused per-process temporary: fresh memory costs page faults on every batch."""
    n = math.prod(shape) * np.dtype(dtype).itemsize
    buf = _tmp.get(name)
    if buf is None or buf.size < n:
        buf = _tmp[name] = np.empty(n, np.uint8)
    return buf[:n].view(dtype).reshape(shape)


def _hflip_into(dst, src):
    """dst[...] = src[:, ::-1] for uint8 (h, w[, C]) images.

    numpy copies 3-byte pixels in reverse one byte at a time (~1 ns a byte);
    instead reverse each row's bytes as uint64 words plus a byteswap, then
    put each pixel's channels back in order (C = 3: swap bytes 0 and 2 of
    every pixel with masks; C = 2 or 4: a byteswap). The passes run in
    small reused buffers that stay in the CPU cache; dst, a slot of a large
    batch, is written once.
    """
    h, w = dst.shape[:2]
    c = dst.shape[2] if dst.ndim == 3 else 1
    row = w * c
    if row % 8 or c not in (1, 2, 3, 4) or dst.dtype != np.uint8:
        dst[...] = src[:, ::-1]
        return
    work = _scratch("work", (h, row), np.uint8)
    work.reshape(src.shape)[...] = src
    tmp = _scratch("words", (h, row // 8), np.uint64)
    np.copyto(tmp, work.view(np.uint64)[:, ::-1])
    tmp.byteswap(inplace=True)
    rev = tmp.view(np.uint8)
    if c == 2:
        tmp.view(np.uint16).byteswap(inplace=True)
    elif c == 4:
        tmp.view(np.uint32).byteswap(inplace=True)
    elif c == 3:
        m = _masks.get(row)
        if m is None:
            k = np.arange(row) % 3
            m = _masks[row] = tuple((k == r).astype(np.uint8) * np.uint8(255) for r in range(3))
        u = _scratch("masked", (h, row - 2), np.uint8)
        np.bitwise_and(rev, m[1], out=work)
        np.bitwise_and(rev[:, 2:], m[0][:-2], out=u)  # byte 0 of a pixel <- its byte 2
        work[:, :-2] |= u
        np.bitwise_and(rev[:, :-2], m[2][2:], out=u)  # byte 2 <- byte 0
        work[:, 2:] |= u
        rev = work
    dst.reshape(h, row)[...] = rev


def copy_window(dst, rows, x0, fy, fx):
    """dst = rows[:, x0:x0+w] (rows: the window's h stored rows, full width), mirrored as drawn."""
    w = dst.shape[1]
    if (_native.available() and dst.flags.c_contiguous and rows.dtype == dst.dtype
            and rows.shape[2:] == dst.shape[2:] and rows[0].flags.c_contiguous):
        _native.copy_window(dst, rows, x0, fy, fx)
        return
    src = rows[:, x0:x0 + w]
    if fy:
        src = src[::-1]
    if fx:
        _hflip_into(dst, src)
    else:
        dst[...] = src


def apply_numpy(online, sample, epoch, index):
    """One stored sample (numpy) -> the augmented sample (a new array)."""
    if online.fused:
        online.out_shape(sample.shape)
        y0, x0, h, w, fy, fx = draw_window(online, int(epoch), int(index), sample.shape)
        out = np.empty((h, w) + sample.shape[2:], sample.dtype)
        copy_window(out, sample[y0:y0 + h], x0, fy, fx)
        return out
    steps = online.draw(epoch, [index], sample.shape)
    torch = _require_torch(online)
    return apply_steps_torch(torch.from_numpy(np.ascontiguousarray(sample))[None], steps)[0].numpy()


# -- applying: torch (a CPU or CUDA batch) ---------------------------------------------------

def _require_torch(online):
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        raise ShardError(f"{online.where}: online_recipe {online.text!r} has rrc, which runs as torch "
                         "ops: install torch, or read the stored samples with raw=True") from None
    return torch


def apply_steps_torch(x, steps):
    """Apply drawn steps to a uint8 batch x (N, H, W[, C]) with torch ops on x's device."""
    import torch  # noqa: PLC0415
    dev = x.device
    for s in steps:
        if s.kind == "window":
            n = x.shape[0]
            ar_h = torch.arange(s.h, device=dev)
            ar_w = torch.arange(s.w, device=dev)
            fy = torch.as_tensor(s.fy, device=dev)[:, None]
            fx = torch.as_tensor(s.fx, device=dev)[:, None]
            rows = torch.as_tensor(s.y0, device=dev)[:, None] + torch.where(fy, s.h - 1 - ar_h, ar_h)
            cols = torch.as_tensor(s.x0, device=dev)[:, None] + torch.where(fx, s.w - 1 - ar_w, ar_w)
            b = torch.arange(n, device=dev)[:, None, None]
            x = x[b, rows[:, :, None], cols[:, None, :]]
        else:
            x = _rrc_torch(x, s)
    return x


def _rrc_torch(x, s):
    """Crop each box and resize it to oh x ow, bilinear, averaging over the source pixels each
    output pixel covers when shrinking (torchvision.ops.roi_align, aligned)."""
    import torch  # noqa: PLC0415
    from torchvision.ops import roi_align  # noqa: PLC0415
    grey = x.dim() == 3
    xf = (x[..., None] if grey else x).permute(0, 3, 1, 2).float()
    dev = x.device
    y = torch.as_tensor(s.y, device=dev, dtype=torch.float32)
    xx = torch.as_tensor(s.x, device=dev, dtype=torch.float32)
    bh = torch.as_tensor(s.bh, device=dev, dtype=torch.float32)
    bw = torch.as_tensor(s.bw, device=dev, dtype=torch.float32)
    idx = torch.arange(x.shape[0], device=dev, dtype=torch.float32)
    boxes = torch.stack([idx, xx, y, xx + bw, y + bh], 1)
    out = roi_align(xf, boxes, (s.oh, s.ow), spatial_scale=1.0, sampling_ratio=-1, aligned=True)
    out = out.round_().clamp_(0, 255).to(torch.uint8).permute(0, 2, 3, 1).contiguous()
    return out[..., 0] if grey else out


def apply_torch(online, x, epoch, indices):
    """The online ops on a stored uint8 batch tensor x (N, H, W[, C]) (CPU or CUDA) of samples
    ``indices`` in ``epoch``: the same pixels the CPU readers give for those samples."""
    steps = online.draw(epoch, np.asarray(indices, np.int64), tuple(x.shape[1:]))
    return apply_steps_torch(x, steps)
