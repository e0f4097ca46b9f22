"""Sequential, sharded, resumable reading: ShardStream."""

import numpy as np

from . import _torch
from ._batch import online_for, read_augmented
from ._io import Closing
from ._order import check_settings, epoch_order, reorder, resume_history, stages, worker_part
from .dataset import _select_fields
from .online import apply_torch
from .errors import ShardError
from .shards import ManifestInfo, ShardSet

# 2: elastic stages; version 1 states (one world size, another order) are refused
_STATE_VERSION = 2


def epoch_sequence(ss, epoch, seed, shuffle):
    """BatchReader's epoch: shards in a seeded order, samples in file order (no interleave)."""
    order = np.arange(len(ss.shards))
    if shuffle:
        order = np.random.default_rng([seed, epoch, 0x5EED]).permutation(len(ss.shards))
    parts = [np.arange(ss.starts[k], ss.starts[k + 1], dtype=np.int64) for k in order]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


class ShardStream(ManifestInfo, Closing, _torch.IterBase):
    """Iterate over prep shards in a seeded, sharded, elastic, resumable order.

    Yields ``(sample, label)`` like ShardDataset (``(sample, label, index)``
    with ``yield_index=True``, index being the ShardDataset index). Works as
    a plain iterator without torch; with torch it is a
    ``torch.utils.data.IterableDataset``.

    The epoch's order is a function of (seed, epoch) and the settings
    ``shuffle``, ``interleave`` and ``buffer_size`` only, never of the world
    size or the workers (``prepshards._order``):

    1. read order: shards in a seeded order, dealt to ``interleave`` lanes
       read side by side, each shard front to back;
    2. yield order: each sample is delayed from its read position by a
       seeded exponential time of mean ``buffer_size``, as in a shuffle
       buffer of that size, so samples of ``interleave`` shards mix; the
       reader holds on average ``buffer_size`` samples.

    A rank's share: the epoch's samples in read order are cut into
    ``world_size`` equal contiguous runs (each rank reads its own shards);
    each rank yields its run in yield order. Drop (default): the last
    ``len % world_size`` in read order are not read (``dropped()``);
    ``pad=True``: the run is filled by repeating samples from the start, the
    copies yielded last. DataLoader workers take alternate blocks of
    ``batch_size`` of the rank's order: with ``batch_size`` equal to the
    DataLoader's, the DataLoader yields exactly ``plan()``.

    Elastic resume: ``state_dict()`` records how many samples every rank
    took at each world size this epoch. Loaded into a stream with another
    world size, the samples not yet taken (in read order) are cut again
    into the new ``world_size`` runs, with the same drop/pad rule applied to
    what is left: the new ranks together yield exactly the epoch's samples
    not yet taken (less the new remainder, with drop). At the same world
    size, a stream continues exactly where it stopped.

    Call ``set_epoch(e)`` before each epoch (as with DistributedSampler).

    Online ops (the manifest's ``online_recipe``) are applied to field
    ``data`` as it is read, drawn from (manifest seed, ``online_seed``,
    epoch, index): the sample of index g in epoch e is the one
    ``ShardDataset`` gives at that epoch, whatever the order, rank or
    worker, and a resumed stream yields the same pixels. ``raw=True``:
    the stored samples (``augment(batch, indices)`` applies the ops later).
    """

    def __init__(self, path, fields=None, transform=None, shuffle=True, seed=0, buffer_size=1024,
                 rank=None, world_size=None, pad=False, batch_size=1, verify=False,
                 check_sizes=True, yield_index=False, interleave=8, raw=False, online_seed=0):
        self._ss = ShardSet(path, check_sizes=check_sizes, verify=verify)
        self.fields, self._as_dict = _select_fields(self._ss, fields)
        self.raw = bool(raw)
        self.online_seed = int(online_seed)
        self._online = online_for(self._ss, self.fields, self.online_seed, self.raw)
        self.online = None if self.raw else self._online
        self.transform = transform
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.buffer_size = int(buffer_size)
        self.interleave = int(interleave)
        if self.interleave < 1:
            raise ValueError("interleave must be at least 1")
        self.rank, self.world_size = _torch.dist_rank_world(rank, world_size)
        self.pad = bool(pad)
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.batch_size = int(batch_size)
        self.yield_index = yield_index
        self.epoch = 0
        # this epoch's stages: [world size, samples every rank took] each; the last is current
        self._history = [[self.world_size, 0]]
        self._seen = 0  # samples yielded by the current in-process iteration
        self._done = False  # an in-process pass finished the epoch
        self._cache = None

    def __getstate__(self):
        st = dict(self.__dict__)
        st["_cache"] = None  # workers recompute the order rather than unpickle it
        return st

    @property
    def _start(self):
        return self._history[-1][1]

    def _fresh(self):
        self._history = [[self.world_size, 0]]
        self._seen = 0
        self._done = False

    def set_epoch(self, epoch):
        epoch = int(epoch)
        if epoch != self.epoch:
            self._fresh()
        self.epoch = epoch
        self._seen = 0

    # -- order: pure functions of the settings and the stage history -----------

    def _stage(self, epoch=None):
        """(ids, stage): global index per read position, and the current stage's cut."""
        epoch = self.epoch if epoch is None else int(epoch)
        history = self._history if epoch == self.epoch else [[self.world_size, 0]]
        key = (epoch, tuple(tuple(h) for h in history[:-1]), history[-1][0])
        if self._cache is None or self._cache[0] != key:
            ids, keys = epoch_order(self._ss.counts, self.seed, epoch, self.shuffle, self.interleave,
                                    self.buffer_size if self.shuffle else 0)
            self._cache = (key, ids, stages(len(ids), keys, history, self.pad))
        return self._cache[1], self._cache[2]

    def __len__(self):
        """Samples this rank yields in the epoch's current stage (all workers together)."""
        if len(self._history) == 1:
            n, w = self._ss.total, self.world_size
            return -(-n // w) if self.pad else n // w
        return self._stage()[1].per

    def plan(self, epoch=None, rank=None):
        """This rank's global sample indices in the order they are yielded (the current stage's)."""
        rank = self.rank if rank is None else int(rank)
        ids, st = self._stage(epoch)
        return ids[st.pos[st.plan(rank)]]

    def dropped(self, epoch=None):
        """Global indices no rank reads in the current stage (the remainder; empty with pad=True)."""
        ids, st = self._stage(epoch)
        return ids[st.dropped]

    # -- the sample pipeline: order -> read -> yield ------------------------------

    def _my_slots(self):
        """The slots this process yields, in yield order: the rank's plan from the
        resume point, then this DataLoader worker's blocks of it."""
        ids, st = self._stage()
        wid, nw = _torch.worker_info()
        return ids, st, worker_part(st.plan(self.rank)[self._start:], wid, nw, self.batch_size)

    def augment(self, batch, indices, epoch=None):
        """The online ops on a stored uint8 batch tensor (N, H, W[, C]) of samples ``indices``
        (``yield_index=True``), on its device: what a stream without raw=True yields."""
        if self._online is None:
            return batch
        return apply_torch(self._online, batch, self.epoch if epoch is None else epoch, indices)

    def _read_one(self, g):
        """(sample, label) of global index g: as stored, then the online ops (crops read fused)."""
        k, j = self._ss.locate(g)
        s = self._ss.shards[k]
        aug = None if self.online is None else (self.online, self.epoch)
        if self._as_dict:
            on = aug is not None and "data" in self.fields
            sample = s.read(j, [n for n in self.fields if n != "data"] if on else self.fields)
            if on:
                sample["data"] = read_augmented(s, "data", j, g, aug)
                sample = {n: sample[n] for n in self.fields}  # the fields' order
        elif aug is not None and self.fields[0] == "data":
            sample = read_augmented(s, "data", j, g, aug)
        else:
            sample = s.read_field(self.fields[0], j)
        label = int(s.labels()[j]) if self._ss.manifest.format == "hdf5" else s.label(j)
        return sample, label

    def _read(self, gids):
        """Read stage: (position, (g, sample, label)) for global indices in read order."""
        self._ss.plan_reads(gids, self.fields)  # shards on gs://: fetch in this order
        for p, g in enumerate(gids):
            yield p, (g,) + self._read_one(g)

    def _emit(self, g, sample, label):
        """Yield stage: what the stream hands out for one sample."""
        if self.transform is not None:
            sample = self.transform(sample)
        return (sample, label, g) if self.yield_index else (sample, label)

    def _items(self, ids, st, slots):
        """Outputs for ``slots`` (in yield order): read in read order, reordered, emitted."""
        by_read = np.argsort(slots, kind="stable")  # slot numbers are read positions
        gids = ids[st.pos[slots[by_read]]].tolist()
        where = np.empty(len(slots), np.int64)
        where[by_read] = np.arange(len(slots))  # each yielded slot's place in the read order
        for g, sample, label in reorder(where.tolist(), self._read(gids)):
            yield self._emit(g, sample, label)

    def __iter__(self):
        self._ss.check_unchanged()  # each epoch (and worker): refuse shards replaced under us
        if self._done:
            self._fresh()  # the last pass finished the epoch: this one starts from its beginning
        ids, st, mine = self._my_slots()
        self._seen = 0
        for out in self._items(ids, st, mine):
            self._seen += 1
            yield out
        if _torch.worker_info()[1] == 1:
            self._done = True  # plan(), dropped() and state_dict() still tell of this pass

    # -- resume ---------------------------------------------------------------

    def state_dict(self, samples_seen=None):
        """Where this epoch stands, to resume from, at this or another world size.

        In-process iteration counts its own samples. Through a DataLoader
        with workers, the stream object in the main process sees nothing:
        pass ``samples_seen``, the number of samples the training loop took
        from this iteration (batches x batch_size, the last batch's real
        size), with ``batch_size`` equal to the DataLoader's. An elastic
        resume needs every rank to have taken the same number; any rank's
        state then serves every new rank.
        """
        seen = self._seen if samples_seen is None else int(samples_seen)
        history = [list(h) for h in self._history]
        history[-1][1] += seen
        return {
            "version": _STATE_VERSION, "epoch": self.epoch, "stages": history,
            "position": history[-1][1], "seed": self.seed, "shuffle": self.shuffle,
            "buffer_size": self.buffer_size, "interleave": self.interleave, "pad": self.pad,
            "samples": self._ss.total, "rank": self.rank, "world_size": self.world_size,
            # added within version 2: a state without them read no online ops
            "online_recipe": "" if self.online is None else self.online.text, "online_seed": self.online_seed,
        }

    def load_state_dict(self, state):
        where = self._ss.manifest.path
        if state.get("version") != _STATE_VERSION:
            raise ShardError(f"{where}: stream state version {state.get('version')!r} is not "
                             f"{_STATE_VERSION}; it was saved by another prepshards, whose order differs: "
                             "start the epoch afresh (set_epoch) instead of resuming it")
        check_settings(state, {
            "seed": self.seed, "shuffle": self.shuffle, "buffer_size": self.buffer_size,
            "interleave": self.interleave, "pad": self.pad, "samples": self._ss.total,
            "online_recipe": "" if self.online is None else self.online.text, "online_seed": self.online_seed,
        }, where, "stream")
        epoch = int(state["epoch"])

        def per_of(history):
            self._history, self.epoch, self._cache = history, epoch, None
            return self._stage()[1].per
        old = self._history, self.epoch
        try:
            history = resume_history(state.get("stages"), self.world_size, where, per_of)
        except Exception:
            self._history, self.epoch = old
            self._cache = None
            raise
        self._cache = None
        self._history = history
        self._seen = 0
        self._done = False

    def close(self):
        self._ss.close()
