"""Batched sequential reading into reused buffers: BatchReader, iter_batches."""

import numpy as np

from . import _torch
from ._batch import augmented_specs, fill, fixed_specs, online_for
from ._io import Closing
from ._order import check_settings, resume_history, stages
from .dataset import _select_fields
from .errors import ShardError
from .online import apply_torch
from .shards import ShardSet
from .stream import epoch_sequence

_STATE_VERSION = 1


class BatchReader(Closing):
    """Read runs of contiguous samples, one read per field and batch, into reused buffers.

    Iterating yields ``(data, labels)``: ``data`` a batch-first array (or a
    dict of them for several fields), ``labels`` int64. Both are views of
    a ring of ``num_buffers`` preallocated buffers: a batch stays valid
    while the next ``num_buffers - 1`` are read, then is overwritten (pass
    ``copy=True`` for fresh arrays). Reusing memory matters: faulting in
    fresh pages for every batch caps reads far below disk speed.

    HDF5 shards: each batch is one ``preadv`` per field straight into the
    buffer (two where it spans a shard boundary). Tar shards: members are
    decoded into the buffer sample by sample. Every sample must have the
    same shape per field (ragged shards: use ShardDataset or ShardStream).

    ``as_tensor=True`` gives torch tensors; ``pin_memory=True`` puts the
    buffers in pinned memory for fast ``.cuda(non_blocking=True)`` copies,
    and where torch cannot pin (no CUDA) it warns once and uses ordinary
    memory. ``rank``/``world_size`` (default: torch.distributed, else 0/1)
    give each rank an equal contiguous share of the epoch's sequence (the
    remainder dropped, as in ShardStream, unless ``pad=True``);
    ``shuffle=True`` shuffles the shard order per epoch (``set_epoch``),
    not the samples within a shard, to keep reads sequential.

    Resume, at this or another world size, as ShardStream's: the epoch's
    sequence depends on (seed, epoch, shuffle) only; ``state_dict()``
    records how many samples every rank took, and a reader that loads it
    yields the rest of its run (same world size), or the samples not yet
    taken cut anew into equal runs (another), with the same drop/pad rule.

    Online ops (the manifest's ``online_recipe``) are applied to field
    ``data`` as in ShardDataset, drawn from (manifest seed, ``online_seed``,
    epoch, index); crops and flips read only the crop's rows. ``raw=True``
    gives the stored samples; ``return_indices=True`` yields
    ``(data, labels, indices)`` for ``augment(batch, indices)`` on a GPU.
    """

    def __init__(self, path, batch_size, fields=None, shuffle=False, seed=0, rank=None, world_size=None,
                 pad=False, drop_last=False, as_tensor=False, pin_memory=False, num_buffers=2, copy=False,
                 verify=False, check_sizes=True, raw=False, online_seed=0, return_indices=False):
        if isinstance(path, ShardSet):
            self._ss = path
        else:
            self._ss = ShardSet(path, check_sizes=check_sizes, verify=verify)
        self.fields, self._as_dict = _select_fields(self._ss, fields)
        self.batch_size = int(batch_size)
        if self.batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.shuffle, self.seed = bool(shuffle), int(seed)
        self.rank, self.world_size = _torch.dist_rank_world(rank, world_size)
        self.pad, self.drop_last = bool(pad), bool(drop_last)
        self.as_tensor = bool(as_tensor or pin_memory)
        self.pin_memory = bool(pin_memory)
        self.num_buffers = max(1, int(num_buffers))
        self.copy = bool(copy)
        self.epoch = 0
        self.raw = bool(raw)
        self.online_seed = int(online_seed)
        self.return_indices = bool(return_indices)
        self._online = online_for(self._ss, self.fields, self.online_seed, self.raw)
        self.online = None if self.raw else self._online
        self.stored_specs = fixed_specs(self._ss, self.fields)
        self.specs = self.stored_specs if self.online is None else augmented_specs(self.stored_specs, self.online)
        self._ring = None
        self._fresh()

    @property
    def manifest(self):
        return self._ss.manifest

    def _fresh(self):
        # this epoch's stages: [world size, samples every rank took] each; the last is current
        self._history = [[self.world_size, 0]]
        self._seen = 0  # samples yielded by the current pass
        self._done = False  # a pass finished the epoch

    def set_epoch(self, epoch):
        epoch = int(epoch)
        if epoch != self.epoch:
            self._fresh()
        self.epoch = epoch
        self._seen = 0

    def augment(self, batch, indices, epoch=None):
        """The online ops on a stored uint8 batch tensor of samples ``indices``, on its device."""
        if self._online is None:
            return batch
        return apply_torch(self._online, batch, self.epoch if epoch is None else epoch, indices)

    def _stage(self, history):
        """The Stage of history's last world size (read order: the epoch's sequence)."""
        n = self._ss.total
        return stages(n, np.arange(n, dtype=np.float64), history, self.pad)

    def _per(self):
        """Samples per rank in the current stage."""
        if len(self._history) > 1:
            return self._stage(self._history).per
        n, w = self._ss.total, self.world_size
        return -(-n // w) if self.pad else n // w

    def _segments(self):
        """This rank's (shard, start, stop) runs for the rest of the epoch's stage, in order."""
        ss = self._ss
        start = self._history[-1][1]
        if len(self._history) > 1:  # resumed at another world size: what is left, cut anew
            seq = epoch_sequence(ss, self.epoch, self.seed, self.shuffle)
            st = self._stage(self._history)
            return _runs(ss.starts, seq[st.pos[st.plan(self.rank)[start:]]])
        n, w = ss.total, self.world_size
        per = -(-n // w) if self.pad else n // w
        lo, hi = self.rank * per + start, (self.rank + 1) * per
        # the sequence is made of whole shards: walk them instead of materialising indices
        order = np.arange(len(ss.shards))
        if self.shuffle:
            order = np.random.default_rng([self.seed, self.epoch, 0x5EED]).permutation(len(ss.shards))
        segs, pos = [], 0
        if not n or hi <= lo:
            return segs
        while pos < hi:  # with pad, a second round repeats the sequence from its start
            for k in order:
                c = int(ss.counts[k])
                a, b = max(lo, pos), min(hi, pos + c)
                if a < b:
                    segs.append((int(k), a - pos, b - pos))
                pos += c
                if pos >= hi:
                    break
        return segs

    def __len__(self):
        """Batches the next pass yields (from the resume point, after load_state_dict)."""
        per = self._per() - (0 if self._done else self._history[-1][1])
        return per // self.batch_size if self.drop_last else -(-per // self.batch_size)

    def _buffers(self):
        if self._ring is None:
            b = self.batch_size
            self._ring = []
            for _ in range(self.num_buffers):
                outs = [_torch.alloc((b,) + sp.shape, sp.dtype, self.as_tensor, self.pin_memory) for sp in self.specs]
                lab = _torch.alloc((b,), np.dtype(np.int64), self.as_tensor, self.pin_memory)
                self._ring.append((outs, lab))
        return self._ring

    def check_unchanged(self):
        """Raise ShardChangedError if a shard was replaced, rewritten or truncated since first seen."""
        self._ss.check_unchanged()

    def __iter__(self):
        self._ss.check_unchanged()  # each epoch: refuse shards replaced under the reader
        if self._done:
            self._fresh()  # the last pass finished the epoch: this one starts from its beginning
        self._seen = 0
        ring = self._buffers()
        b = self.batch_size
        slot = 0
        runs, filled = [], 0
        segments = self._segments()
        self._ss.plan_runs(segments, self.fields)  # shards on gs://: fetch in this order
        for k, start, stop in segments:
            while start < stop:
                n = min(stop - start, b - filled)
                runs.append((k, start, start + n, filled))
                filled += n
                start += n
                if filled == b:
                    self._seen += b
                    yield self._emit(ring[slot], runs, b)
                    slot = (slot + 1) % len(ring)
                    runs, filled = [], 0
        if filled and not self.drop_last:
            self._seen += filled
            yield self._emit(ring[slot], runs, filled)
        self._done = True

    def state_dict(self, samples_seen=None):
        """Where this epoch stands, to resume from at this or another world size.

        Counts the samples of the batches this pass yielded (``samples_seen``:
        another count, e.g. the batches a training step finished). An elastic
        resume needs every rank to have taken the same number; any rank's
        state then serves every new rank.
        """
        history = [list(h) for h in self._history]
        history[-1][1] += self._seen if samples_seen is None else int(samples_seen)
        return {"version": _STATE_VERSION, "epoch": self.epoch, "stages": history, "position": history[-1][1],
                "rank": self.rank, "world_size": self.world_size, **self._settings()}

    def _settings(self):
        return {"seed": self.seed, "shuffle": self.shuffle, "pad": self.pad, "samples": self._ss.total,
                "online_recipe": "" if self.online is None else self.online.text, "online_seed": self.online_seed}

    def load_state_dict(self, state):
        where = self._ss.manifest.path
        if state.get("version") != _STATE_VERSION or "buffer_size" in state:
            raise ShardError(f"{where}: {state.get('version')!r} is not a BatchReader state of version "
                             f"{_STATE_VERSION} (a ShardStream's, or another prepshards'): start the "
                             "epoch afresh (set_epoch) instead of resuming it")
        check_settings(state, self._settings(), where, "reader")
        self._history = resume_history(state.get("stages"), self.world_size, where,
                                       lambda h: self._stage(h).per)
        self.epoch = int(state["epoch"])
        self._seen = 0
        self._done = False

    def _emit(self, bufs, runs, n):
        outs, lab = bufs
        aug = None if self.online is None else (self.online, self.epoch, self.stored_specs)
        fill(self._ss, self.specs, runs, [o[1] for o in outs], lab[1], aug)
        data = [o[0][:n] for o in outs]
        labels = lab[0][:n]
        if self.return_indices:
            st = self._ss.starts
            idx = np.concatenate([np.arange(st[k] + a, st[k] + b, dtype=np.int64) for k, a, b, _ in runs])
            return self._pack(data, labels) + (idx,)
        return self._pack(data, labels)

    def _pack(self, data, labels):
        if self.copy:
            data = [d.clone() if hasattr(d, "clone") else d.copy() for d in data]
            labels = labels.clone() if hasattr(labels, "clone") else labels.copy()
        if self._as_dict:
            return {sp.name: d for sp, d in zip(self.specs, data)}, labels
        return data[0], labels

    def close(self):
        self._ss.close()


def _runs(starts, ids):
    """(shard, start, stop) runs of consecutive global indices ids, in order."""
    if not len(ids):
        return []
    ks = np.searchsorted(starts, ids, side="right") - 1
    cut = (np.flatnonzero((np.diff(ids) != 1) | (np.diff(ks) != 0)) + 1).tolist()
    out = []
    for a, b in zip([0] + cut, cut + [len(ids)]):
        k = int(ks[a])
        s0 = int(ids[a] - starts[k])
        out.append((k, s0, s0 + b - a))
    return out


def iter_batches(path, batch_size, **kwargs):
    """Iterate over ``BatchReader(path, batch_size, **kwargs)``: (data, labels) batches."""
    return iter(BatchReader(path, batch_size, **kwargs))
