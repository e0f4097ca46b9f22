"""Filling preallocated batch buffers from runs of samples."""

import math

import numpy as np

from . import _native
from ._io import pread_into, read_error
from .errors import ShardFormatError


class FieldSpec:
    __slots__ = ("name", "dtype", "shape")

    def __init__(self, name, dtype, shape):
        self.name, self.dtype, self.shape = name, np.dtype(dtype), tuple(shape)

    def __repr__(self):
        return f"FieldSpec({self.name!r}, {self.dtype}, {self.shape})"


def fixed_specs(ss, fields):
    """Per-field (dtype, sample shape) shared by every sample, or ShardError."""
    specs = []
    if ss.manifest.format == "hdf5":
        for name in fields:
            spec = None
            for s in ss.shards:
                if not s.count:
                    continue
                f = s.field[name]
                if f.ragged:
                    raise ShardFormatError(
                        f"{s.where}: field {name} is ragged (samples differ in shape); batches "
                        "need one shape: read it per sample with ShardDataset / ShardStream")
                if spec is None:
                    spec = FieldSpec(name, f.dtype, f.sample_shape)
                elif (spec.dtype, spec.shape) != (f.dtype, f.sample_shape):
                    raise ShardFormatError(
                        f"{s.where}: field {name} is {f.dtype}{list(f.sample_shape)} here but "
                        f"{spec.dtype}{list(spec.shape)} in an earlier shard; batches need one shape")
            specs.append(spec)
        return specs
    first = next((s for s in ss.shards if s.count), None)
    if first is None:
        return [FieldSpec(n, np.uint8, ()) for n in fields]
    for name in fields:
        a = first.read_field(name, 0)
        specs.append(FieldSpec(name, a.dtype, a.shape))
    return specs


def runs_of(ss, indices):
    """Group global indices into (shard, start, stop, position in batch) runs."""
    idx = np.asarray(indices, dtype=np.int64)
    if idx.size == 0:
        return []
    if idx.min() < 0 or idx.max() >= ss.total:
        raise IndexError(f"sample index out of range ({ss.total} samples)")
    ks = np.searchsorted(ss.starts, idx, side="right") - 1
    local = idx - ss.starts[ks]
    # a run breaks where the shard changes or the next index is not the next sample
    brk = np.flatnonzero((np.diff(ks) != 0) | (np.diff(local) != 1)) + 1
    bounds = np.concatenate([[0], brk, [idx.size]])
    return [(int(ks[a]), int(local[a]), int(local[a]) + int(b - a), int(a))
            for a, b in zip(bounds[:-1], bounds[1:])]


def fill(ss, specs, runs, outs, labels_out, aug=None):
    """Read the runs into outs (one numpy array per field, batch-first) and labels_out.

    ``aug``: (online, epoch, stored specs) to apply the online ops to field
    ``data`` (its spec in ``specs`` is then the augmented one).
    """
    if aug is not None and any(sp.name == "data" for sp in specs):
        online, epoch, stored = aug
        i = next(i for i, sp in enumerate(specs) if sp.name == "data")
        fill_augmented(ss, specs[i], stored[i], runs, outs[i], (online, epoch))
        specs, outs = specs[:i] + specs[i + 1:], outs[:i] + outs[i + 1:]
    h5 = ss.manifest.format == "hdf5"
    for k, start, stop, pos in runs:
        s = ss.shards[k]
        n = stop - start
        if labels_out is not None:
            labels_out[pos:pos + n] = s.labels()[start:stop]
        for spec, out in zip(specs, outs):
            if h5:
                f = s.field[spec.name]
                if f.sample_nbytes == 0:
                    continue
                dst = out[pos:pos + n]
                if f.offset < 0:
                    s._h5read(spec.name, dst, slice(start, stop))
                else:
                    pread_into(s.files.fd(k), dst, f.offset + start * f.sample_nbytes, s.path)
                continue
            for j in range(n):
                dst = out[pos + j]
                a = s.read_field(spec.name, start + j, out=dst if spec.name == "data" else None)
                if a is not dst:
                    if a.shape != spec.shape or a.dtype != spec.dtype:
                        raise ShardFormatError(
                            f"{s.where}: sample {start + j} field {spec.name} is {a.dtype}{list(a.shape)}, "
                            f"the batch's first sample {spec.dtype}{list(spec.shape)}; batches need one shape")
                    dst[...] = a
                elif a.shape != spec.shape:
                    raise ShardFormatError(
                        f"{s.where}: sample {start + j} field {spec.name} has shape {list(a.shape)}, "
                        f"the batch's first sample {list(spec.shape)}; batches need one shape")


# -- online ops (prepshards.online) fused into the read ------------------------------------

_scratch = {}


def _scratch_of(nbytes):
    """A reused per-process byte buffer of at least nbytes (touched once, then warm)."""
    buf = _scratch.get("rows")
    if buf is None or buf.size < nbytes:
        buf = np.empty(max(nbytes, 1), np.uint8)
        _scratch["rows"] = buf
    return buf


def read_rows(s, name, j, y0, h, shape, dtype):
    """Rows y0..y0+h (full width) of sample j's field ``name``, stored shape ``shape``.

    HDF5 (contiguous): one read of just those rows into a reused buffer; the
    caller copies the window out of it. Otherwise the sample is read whole.
    """
    f = s.field.get(name) if hasattr(s, "field") else None
    if f is not None and not f.ragged and f.offset >= 0:
        row = math.prod(shape[1:]) * dtype.itemsize
        buf = _scratch_of(h * row)[:h * row].view(dtype).reshape((h,) + tuple(shape[1:]))
        pread_into(s.files.fd(s.k), buf, f.offset + j * f.sample_nbytes + y0 * row, s.path)
        return buf
    return s.read_field(name, j)[y0:y0 + h]


def read_augmented(s, name, j, g, aug):
    """Sample j (global index g) of field ``name``, through the online ops: (online, epoch)."""
    from .online import apply_numpy, copy_window, draw_window  # noqa: PLC0415
    online, epoch = aug
    if online.fused and hasattr(s, "field") and not s.field[name].ragged:
        f = s.field[name]
        shape = f.sample_shape
        # online_for checked the shape against the ops when the reader was made
        y0, x0, h, w, fy, fx = draw_window(online, int(epoch), int(g), shape)
        rows = read_rows(s, name, j, y0, h, shape, f.dtype)
        out = np.empty((h, w) + tuple(shape[2:]), f.dtype)
        copy_window(out, rows, x0, fy, fx)
        return out
    return apply_numpy(online, s.read_field(name, j), epoch, g)


def fill_augmented(ss, spec, stored, runs, out, aug):
    """Read field spec.name of the runs through the online ops into out (batch-first).

    ``stored``: the field's stored FieldSpec. Crops and flips: per sample,
    the window's rows into a reused buffer, copied (mirrored) into out.
    rrc: the stored samples into a reused batch, then torch ops.
    """
    from .online import apply_steps_torch, copy_window  # noqa: PLC0415
    online, epoch = aug
    # Python ranges: a shuffled batch is one run a sample, and numpy's per-call cost adds up
    starts, gids, pos = ss.starts.tolist(), [], []
    for k, a, b, p in runs:
        gids.extend(range(starts[k] + a, starts[k] + b))
        pos.extend(range(p, p + b - a))
    gids, pos = np.array(gids, np.int64), np.array(pos, np.int64)
    steps = online.draw(epoch, gids, stored.shape)
    if online.fused:
        (w,) = steps
        row = math.prod(stored.shape[1:]) * stored.dtype.itemsize
        rows = _scratch_of(w.h * row)[:w.h * row].view(stored.dtype).reshape((w.h,) + stored.shape[1:])
        if _native.available() and out.flags.c_contiguous and _fill_native(ss, spec.name, runs, w, stored, row,
                                                                           rows, out, pos):
            return
        y0s, x0s, fys, fxs, pos = w.y0.tolist(), w.x0.tolist(), w.fy.tolist(), w.fx.tolist(), pos.tolist()
        mv = memoryview(rows).cast("B")
        t = 0
        for k, a, b, _ in runs:
            s = ss.shards[k]
            f = s.field.get(spec.name) if hasattr(s, "field") else None
            direct = f is not None and not f.ragged and f.offset >= 0
            fd = s.files.fd(s.k) if direct else None
            for j in range(a, b):
                if direct:  # the window's rows alone, one read (the loop body of read_rows, hoisted)
                    pread_into(fd, mv, f.offset + j * f.sample_nbytes + y0s[t] * row, s.path)
                    src = rows
                else:
                    src = read_rows(s, spec.name, j, y0s[t], w.h, stored.shape, stored.dtype)
                copy_window(out[pos[t]], src, x0s[t], fys[t], fxs[t])
                t += 1
        return
    from . import _torch  # noqa: PLC0415
    torch = _torch.require_torch(f"{ss.manifest.path}: online_recipe {online.text!r} (rrc)")
    nbytes = len(gids) * math.prod(stored.shape) * stored.dtype.itemsize
    full = _scratch_of(nbytes)[:nbytes].view(stored.dtype).reshape((len(gids),) + stored.shape)
    fill(ss, [stored], [(k, a, b, p) for (k, a, b, _), p in zip(runs, _starts(runs))], [full], None)
    res = apply_steps_torch(torch.from_numpy(full), steps).numpy()
    out[pos] = res


def _fill_native(ss, name, runs, win, stored, row, scratch, out, pos):
    """fill_augmented's crop/flip loop in one call of the C kernel (_window.c), when every
    run is of a local HDF5 shard; False (nothing read) otherwise."""
    fds, offs = [], []
    for k, a, b, _ in runs:
        s = ss.shards[k]
        f = s.field.get(name) if hasattr(s, "field") else None
        if f is None or f.ragged or f.offset < 0:
            return False
        fd = s.files.fd(s.k)
        if not isinstance(fd, int):  # gs://: through the chunk cache
            return False
        fds.extend([fd] * (b - a))
        offs.extend(range(f.offset + a * f.sample_nbytes, f.offset + b * f.sample_nbytes, f.sample_nbytes))
    if not fds:
        return True
    offs = np.array(offs, np.int64) + win.y0.astype(np.int64) * row
    fds, pos, x0, fy, fx = np.array(fds, np.int32), np.asarray(pos, np.int64), win.x0, win.fy, win.fx
    order = None
    if len(pos) > 1 and not (pos[1:] > pos[:-1]).all():  # the kernel fills slots in order
        order = np.argsort(pos, kind="stable")
        fds, offs, pos, x0, fy, fx = (a[order] for a in (fds, offs, pos, x0, fy, fx))
    rc, t = _native.read_windows(fds, offs, row, out, pos, win.h, win.w, row // stored.shape[1],
                                 x0, fy, fx, scratch)
    if rc:
        if order is not None:
            offs, t = offs[np.argsort(order)], int(order[t])
        ends = np.cumsum([b - a for _, a, b, _ in runs])
        k = runs[int(np.searchsorted(ends, t, side="right"))][0]
        raise read_error(ss.shards[k].path, win.h * row, int(offs[t]), -rc if rc < 0 else None)
    return True


def _starts(runs):
    """Each run's position in a batch of the runs alone, packed."""
    out, p = [], 0
    for _, a, b, _ in runs:
        out.append(p)
        p += b - a
    return out


def online_for(ss, fields, online_seed, raw=False):
    """The manifest's online ops bound to its seed and ``online_seed`` (None without any).

    Checked against every HDF5 shard's stored image shape now, so that a
    crop larger than the stored images fails when the reader is made.
    """
    from .online import Online  # noqa: PLC0415
    m = ss.manifest
    if not m.online_recipe:
        return None
    online = Online(m.online_recipe, m.seed, online_seed, where=m.path)
    if not raw and "data" in fields and m.format == "hdf5":
        for s in ss.shards:
            f = s.field.get("data") if s.count else None
            if f is not None and not f.ragged:
                online.out_shape(f.sample_shape)
    return online


def augmented_specs(specs, online):
    """The specs of what the reader hands out: field data's shape after the online ops."""
    return [FieldSpec(sp.name, sp.dtype, online.out_shape(sp.shape)) if sp.name == "data" else sp
            for sp in specs]
