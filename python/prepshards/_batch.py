"""Filling preallocated batch buffers from runs of samples."""

import numpy as np

from ._io import pread_into
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


def fill(ss, specs, runs, outs, labels_out):
    """Read the runs into outs (one numpy array per field, batch-first) and labels_out."""
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
