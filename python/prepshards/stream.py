"""Sequential, sharded, resumable reading: ShardStream."""

import numpy as np

from . import _torch
from .dataset import _select_fields
from .errors import ShardError
from .shards import ManifestInfo, ShardSet

_STATE_VERSION = 1


def epoch_sequence(ss, epoch, seed, shuffle):
    """Every sample's global index for one epoch: shards in a seeded order, samples in file order."""
    order = np.arange(len(ss.shards))
    if shuffle:
        order = np.random.default_rng([seed, epoch, 0x5EED]).permutation(len(ss.shards))
    parts = [np.arange(ss.starts[k], ss.starts[k + 1], dtype=np.int64) for k in order]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def rank_slice(seq, rank, world_size, pad):
    """This rank's equal share: a contiguous slice of the epoch's sequence.

    drop (pad=False): every rank gets len(seq) // world_size samples; the
    last len(seq) % world_size of the sequence are not read this epoch.
    pad=True: every rank gets ceil(len(seq) / world_size); the sequence is
    extended by repeating its first samples.
    """
    n = len(seq)
    if pad:
        per = -(-n // world_size)
        if per * world_size > n and n:
            seq = np.resize(seq, per * world_size)  # np.resize repeats cyclically
    else:
        per = n // world_size
    return seq[rank * per:(rank + 1) * per]


def shuffle_buffer(seq, size, rng):
    """The order a shuffle buffer of ``size`` entries gives ``seq`` (indices only)."""
    n = len(seq)
    if size <= 1 or n <= 1:
        return seq.copy()
    size = min(size, n)
    out = np.empty(n, np.int64)
    buf = seq[:size].tolist()
    picks = rng.integers(0, size, n - size).tolist()
    rest = seq[size:].tolist()
    for j, (x, p) in enumerate(zip(rest, picks)):
        out[j] = buf[p]
        buf[p] = x
    tail = np.array(buf, np.int64)
    rng.shuffle(tail)
    out[n - size:] = tail
    return out


class ShardStream(ManifestInfo, _torch.IterBase):
    """Iterate over prep shards in a seeded, sharded, resumable order.

    Yields ``(sample, label)`` like ShardDataset (``(sample, label, index)``
    with ``yield_index=True``, index being the ShardDataset index). Works as
    a plain iterator without torch; with torch it is a
    ``torch.utils.data.IterableDataset``.

    Order of one epoch (a pure function of seed, epoch, rank, world_size,
    pad, shuffle and buffer_size — see ``plan()``):

    1. shards in a per-epoch seeded order (``shuffle=True``), samples in file
       order: the epoch's sequence;
    2. each rank takes a contiguous slice of equal length (ranks from
       ``rank=``/``world_size=``, else ``torch.distributed`` when initialised).
       Default: ``len // world_size`` each, the remainder (the last
       ``len % world_size`` samples of that epoch's sequence) is dropped;
       ``pad=True``: ``ceil(len / world_size)`` each, the sequence repeated
       from its start to fill;
    3. a shuffle buffer of ``buffer_size`` samples (``shuffle=True``) mixes the
       rank's slice, seeded by (seed, epoch, rank);
    4. DataLoader workers take alternate blocks of ``batch_size`` samples of
       the rank's order. Set ``batch_size`` to the DataLoader's and the
       DataLoader yields exactly ``plan()``'s order (each worker's batches
       come round-robin), which is what makes a resume exact with workers.

    Call ``set_epoch(e)`` before each epoch (as with DistributedSampler).
    ``state_dict()`` / ``load_state_dict()`` resume mid-epoch: the resumed
    stream yields exactly the samples the interrupted one had not yet
    yielded, in the same order.
    """

    def __init__(self, path, fields=None, transform=None, shuffle=True, seed=0, buffer_size=1024,
                 rank=None, world_size=None, pad=False, batch_size=1, verify=False,
                 check_sizes=True, yield_index=False):
        self._ss = ShardSet(path, check_sizes=check_sizes, verify=verify)
        self.fields, self._as_dict = _select_fields(self._ss, fields)
        self.transform = transform
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.buffer_size = int(buffer_size)
        self.rank, self.world_size = _torch.dist_rank_world(rank, world_size)
        self.pad = bool(pad)
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.batch_size = int(batch_size)
        self.yield_index = yield_index
        self.epoch = 0
        self._start = 0  # samples of this epoch's plan to skip (a resume)
        self._seen = 0  # samples yielded by the current in-process iteration

    def __len__(self):
        """Samples this rank yields per epoch (all workers together)."""
        n, w = self._ss.total, self.world_size
        return -(-n // w) if self.pad else n // w

    def set_epoch(self, epoch):
        epoch = int(epoch)
        if epoch != self.epoch:
            self._start = 0
        self.epoch = epoch
        self._seen = 0

    def plan(self, epoch=None, rank=None):
        """This rank's global sample indices for an epoch, in the order they are yielded."""
        epoch = self.epoch if epoch is None else int(epoch)
        rank = self.rank if rank is None else int(rank)
        seq = epoch_sequence(self._ss, epoch, self.seed, self.shuffle)
        mine = rank_slice(seq, rank, self.world_size, self.pad)
        if self.shuffle and self.buffer_size > 1:
            mine = shuffle_buffer(mine, self.buffer_size, np.random.default_rng([self.seed, epoch, rank, 0xB0F]))
        return mine

    def dropped(self, epoch=None):
        """Global indices no rank reads this epoch (the remainder; empty with pad=True)."""
        if self.pad:
            return np.zeros(0, np.int64)
        epoch = self.epoch if epoch is None else int(epoch)
        seq = epoch_sequence(self._ss, epoch, self.seed, self.shuffle)
        per = len(seq) // self.world_size
        return seq[per * self.world_size:]

    def _worker_part(self, remaining):
        wid, nw = _torch.worker_info()
        if nw == 1:
            return remaining
        pos = np.arange(len(remaining))
        return remaining[(pos // self.batch_size) % nw == wid]

    def __iter__(self):
        self._ss.check_unchanged()  # each epoch (and worker): refuse shards replaced under us
        order = self.plan()[self._start:]
        mine = self._worker_part(order)
        self._seen = 0
        ss = self._ss
        h5 = ss.manifest.format == "hdf5"
        for g in mine.tolist():
            k, j = ss.locate(g)
            s = ss.shards[k]
            sample = s.read(j, self.fields) if self._as_dict else s.read_field(self.fields[0], j)
            label = int(s.labels()[j]) if h5 else s.label(j)
            if self.transform is not None:
                sample = self.transform(sample)
            self._seen += 1
            yield (sample, label, g) if self.yield_index else (sample, label)
        if _torch.worker_info()[1] == 1:
            self._start = 0  # the epoch is done: a later pass starts from its beginning
            self._seen = 0

    def state_dict(self, samples_seen=None):
        """Where this epoch stands, to resume from.

        In-process iteration counts its own samples. Through a DataLoader
        with workers, the stream object in the main process sees nothing:
        pass ``samples_seen``, the number of samples the training loop took
        from this iteration (batches x batch_size, the last batch's real
        size), with ``batch_size`` equal to the DataLoader's.
        """
        seen = self._seen if samples_seen is None else int(samples_seen)
        return {
            "version": _STATE_VERSION, "epoch": self.epoch, "position": self._start + seen,
            "seed": self.seed, "shuffle": self.shuffle, "buffer_size": self.buffer_size,
            "rank": self.rank, "world_size": self.world_size, "pad": self.pad,
            "samples": self._ss.total, "length": len(self),
        }

    def load_state_dict(self, state):
        if state.get("version") != _STATE_VERSION:
            raise ShardError(f"{self._ss.manifest.path}: stream state version {state.get('version')!r} "
                             f"is not {_STATE_VERSION}; it was saved by another prepshards")
        for k in ("seed", "shuffle", "buffer_size", "rank", "world_size", "pad", "samples"):
            mine = self._ss.total if k == "samples" else getattr(self, k)
            if state[k] != mine:
                raise ShardError(
                    f"{self._ss.manifest.path}: cannot resume: the saved stream had {k}={state[k]!r}, "
                    f"this one has {mine!r}; build the stream with the same settings over the same shards")
        pos = int(state["position"])
        if not 0 <= pos <= len(self):
            raise ShardError(f"{self._ss.manifest.path}: saved position {pos} is outside the epoch's {len(self)} samples")
        self.epoch = int(state["epoch"])
        self._start = pos
        self._seen = 0

    def close(self):
        self._ss.close()
