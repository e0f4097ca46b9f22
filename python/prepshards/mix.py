"""Several shard folders as one: Mix (weighted, iterable) and Concat (map-style)."""

import math

import numpy as np

from . import _torch
from ._batch import fill
from ._io import Closing
from ._order import worker_part
from .dataset import ShardDataset
from .errors import ShardError, ShardFormatError
from .stream import ShardStream

_MIX_STATE_VERSION = 1


class Mix(Closing, _torch.IterBase):
    """Yield from several ShardStreams, picking a stream per sample by weight.

    ``Mix([a, b], weights=[3, 1], seed=0)`` yields what the streams yield
    (each with its own fields, transform and ``yield_index``). Step t of an
    epoch takes its next sample from stream ``c_t``, the seeded choices
    ``c`` being a function of (seed, epoch) alone (probability
    ``weights[i] / sum(weights)``); each stream yields its own rank's
    share in its own order, so the mix is as elastic, resumable and
    DDP-correct as its streams (give them the same rank/world size, or let
    them read torch.distributed).

    **Epoch rule**: the epoch ends at the first step whose stream has no
    sample left on this rank. That stream has then yielded all of its
    share once; the others' remaining samples are not yielded this epoch
    (the next epoch reshuffles every stream). Every rank stops at the same
    step, since their shares have equal lengths. Expected length: about
    ``min_i(len(stream_i) / p_i)``.

    ``set_epoch(e)`` sets every stream's epoch. ``state_dict(samples_seen=)``
    / ``load_state_dict()`` resume as ShardStream's do, at any world size.
    DataLoader workers take alternate blocks of ``batch_size`` steps
    (default: the first stream's batch_size), so with the DataLoader's
    batch size it yields exactly ``plan()``.
    """

    def __init__(self, streams, weights=None, seed=0, batch_size=None):
        self.streams = list(streams)
        if not self.streams:
            raise ValueError("Mix needs at least one stream")
        for s in self.streams:
            if not isinstance(s, ShardStream):
                raise TypeError(f"Mix takes ShardStreams, not {type(s).__name__}")
        ranks = {(s.rank, s.world_size) for s in self.streams}
        if len(ranks) != 1:
            raise ValueError(f"the streams disagree on (rank, world_size): {sorted(ranks)}; give them the same")
        w = [1.0] * len(self.streams) if weights is None else [float(x) for x in weights]
        if len(w) != len(self.streams) or not all(math.isfinite(x) and x > 0 for x in w):
            raise ValueError(f"weights {weights!r}: give one positive number per stream")
        self.weights = [x / sum(w) for x in w]
        self.seed = int(seed)
        self.batch_size = int(batch_size or self.streams[0].batch_size)
        self.epoch = self.streams[0].epoch
        self._pos = 0  # steps of this epoch taken before the current iteration
        self._seen = 0
        self._done = False

    def close(self):
        for st in self.streams:
            st.close()

    def set_epoch(self, epoch):
        epoch = int(epoch)
        for s in self.streams:
            s.set_epoch(epoch)
        if epoch != self.epoch:
            self._pos = 0
            self._done = False
        self.epoch = epoch
        self._seen = 0

    def _choices(self, n):
        """The epoch's first n choices (a prefix of one infinite seeded sequence)."""
        u = np.random.default_rng([self.seed, self.epoch, 0x313]).random(n)
        return np.minimum(np.searchsorted(np.cumsum(self.weights), u, side="right"), len(self.weights) - 1)

    def _steps(self):
        """(stream, item) per step from the current position to the epoch's end:
        item is the index into that stream's remaining plan."""
        left = [len(s) - s._start for s in self.streams]
        c = self._choices(self._pos + sum(left) + 1)[self._pos:]
        k = np.empty(len(c), np.int64)
        for i in range(len(self.streams)):
            m = c == i
            k[m] = np.arange(int(m.sum()))
        out = np.flatnonzero(k >= np.asarray(left)[c])
        stop = int(out[0]) if len(out) else len(c)
        return c[:stop], k[:stop]

    def __len__(self):
        """Steps this rank yields in the epoch (from its start at this world size)."""
        return self._pos + len(self._steps()[0])

    def plan(self):
        """(stream number, global sample index) of each step still to come, in order."""
        c, k = self._steps()
        plans = [s.plan()[s._start:] for s in self.streams]
        return [(int(i), int(plans[i][j])) for i, j in zip(c, k)]

    def __iter__(self):
        for s in self.streams:
            s.check_unchanged()
        if self._done:
            self._pos = 0
            for s in self.streams:
                s._fresh()
            self._done = False
        c, k = self._steps()
        wid, nw = _torch.worker_info()
        mine = worker_part(np.arange(len(c)), wid, nw, self.batch_size)
        gens = []
        for i, s in enumerate(self.streams):  # each stream: order -> read -> yield, its own pipeline
            ids, st = s._stage()
            sel = mine[c[mine] == i]
            gens.append(s._items(ids, st, st.plan(s.rank)[s._start:][k[sel]]))
        self._seen = 0
        for i in c[mine].tolist():
            out = next(gens[i])
            self._seen += 1
            yield out
        if nw == 1:
            self._done = True

    def state_dict(self, samples_seen=None):
        """Where this epoch stands (through a DataLoader: pass samples_seen, as for ShardStream)."""
        seen = self._seen if samples_seen is None else int(samples_seen)
        c, _ = self._steps()
        took = np.bincount(c[:seen], minlength=len(self.streams))
        return {"version": _MIX_STATE_VERSION, "kind": "mix", "seed": self.seed, "weights": self.weights,
                "epoch": self.epoch, "position": self._pos + seen,
                "streams": [s.state_dict(samples_seen=int(n)) for s, n in zip(self.streams, took)]}

    def load_state_dict(self, state):
        if state.get("kind") != "mix" or state.get("version") != _MIX_STATE_VERSION:
            raise ShardError(f"not a Mix state (kind {state.get('kind')!r}, version {state.get('version')!r}); "
                             "pass the dict Mix.state_dict() returned")
        for k in ("seed", "weights"):
            if state[k] != getattr(self, k):
                raise ShardError(f"cannot resume: the saved Mix had {k}={state[k]!r}, this one "
                                 f"{getattr(self, k)!r}; build the Mix with the same settings")
        if len(state["streams"]) != len(self.streams):
            raise ShardError(f"cannot resume: the saved Mix had {len(state['streams'])} streams, "
                             f"this one {len(self.streams)}")
        for s, st in zip(self.streams, state["streams"]):
            s.load_state_dict(st)
        self.epoch = int(state["epoch"])
        self._pos = int(state["position"])
        self._seen = 0
        self._done = False


class Concat(Closing, _torch.MapBase):
    """Several ShardDatasets end to end: map-style, ``ds[i]`` as the dataset holding i gives it.

    Index i is in ``datasets[d]`` for ``starts[d] <= i < starts[d + 1]``
    (``source(i)`` gives d). Labels stay each dataset's own (their
    ``classes`` may differ: map them yourself if they must share one label
    space). ``get_batch`` and ``loader()`` work as ShardDataset's when
    every dataset has the same fields, dtypes and shapes.
    """

    transform = None

    def __init__(self, datasets):
        self.datasets = list(datasets)
        for d in self.datasets:
            if not isinstance(d, ShardDataset):
                raise TypeError(f"Concat takes ShardDatasets, not {type(d).__name__}")
        self.starts = np.concatenate([[0], np.cumsum([len(d) for d in self.datasets])]).astype(np.int64)
        self._specs = None
        self.epoch = 0

    def set_epoch(self, epoch):
        """Every dataset's epoch: the online ops (each manifest's own) it draws."""
        self.epoch = int(epoch)
        for d in self.datasets:
            d.set_epoch(epoch)

    @property
    def online(self):
        return next((d.online for d in self.datasets if d.online is not None), None)

    @property
    def manifest(self):
        return self.datasets[0].manifest if self.datasets else None

    def __len__(self):
        return int(self.starts[-1])

    def source(self, i):
        """(dataset number, index in it) of index i."""
        i = int(i)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"sample {i} out of range ({len(self)} samples)")
        d = int(np.searchsorted(self.starts, i, side="right")) - 1
        return d, i - int(self.starts[d])

    def __getitem__(self, i):
        d, j = self.source(i)
        return self.datasets[d][j]

    def key(self, i):
        d, j = self.source(i)
        return self.datasets[d].key(j)

    @property
    def keys(self):
        return [k for d in self.datasets for k in d.keys]

    @property
    def labels(self):
        return np.concatenate([d.labels for d in self.datasets]) if self.datasets else np.zeros(0, np.int64)

    def check_unchanged(self):
        for d in self.datasets:
            d.check_unchanged()

    def field_specs(self):
        if self._specs is None:
            first = None
            for d in self.datasets:
                if not len(d):
                    continue
                sp = [(s.name, s.dtype, s.shape) for s in d.field_specs()]
                if first is None:
                    first, self._specs, where = sp, d.field_specs(), d.manifest.path
                elif sp != first:
                    raise ShardFormatError(f"{d.manifest.path}: fields {sp} differ from {where}'s {first}; "
                                           "batches need one shape: read per sample (ds[i])")
            self._specs = self._specs or []
        return self._specs

    def get_batch(self, indices, as_tensor=False, shared=False, out=None, epoch=None):
        """As ShardDataset.get_batch, across the datasets."""
        self._plan(indices)
        return self._fill(indices, as_tensor, shared, out, epoch)

    def _plan(self, indices):
        """As ShardDataset._plan: each dataset on gs:// is told its share, in order."""
        if not any(d.shard_set.remote for d in self.datasets):
            return
        idx = np.asarray(indices, np.int64)
        idx = idx[(idx >= 0) & (idx < len(self))]
        ds = np.searchsorted(self.starts, idx, side="right") - 1
        for d in np.unique(ds).tolist():
            self.datasets[d]._plan(idx[ds == d] - self.starts[d])

    def _fill(self, indices, as_tensor=False, shared=False, out=None, epoch=None):
        """get_batch without planning the reads."""
        epoch = self.epoch if epoch is None else int(epoch)
        specs = self.field_specs()
        idx = np.asarray(indices, np.int64)
        n = len(idx)
        if out is None:
            bufs = [_torch.alloc((n,) + sp.shape, sp.dtype, as_tensor, False, shared) for sp in specs]
            lab = _torch.alloc((n,), np.dtype(np.int64), as_tensor, False, shared)
        else:
            bufs, lab = out
        if n:
            if idx.min() < -len(self) or idx.max() >= len(self):
                raise IndexError(f"sample index out of range ({len(self)} samples)")
            idx = np.where(idx < 0, idx + len(self), idx)
            ds = np.searchsorted(self.starts, idx, side="right") - 1
            for d in np.unique(ds).tolist():
                ss = self.datasets[d].shard_set
                pos = np.flatnonzero(ds == d)
                g = idx[pos] - self.starts[d]
                ks = np.searchsorted(ss.starts, g, side="right") - 1
                local = g - ss.starts[ks]
                brk = np.flatnonzero((np.diff(ks) != 0) | (np.diff(local) != 1) | (np.diff(pos) != 1)) + 1
                bounds = np.concatenate([[0], brk, [len(pos)]])
                runs = [(int(ks[a]), int(local[a]), int(local[a]) + int(b - a), int(pos[a]))
                        for a, b in zip(bounds[:-1], bounds[1:])]
                dd = self.datasets[d]
                aug = None if dd.online is None else (dd.online, epoch, dd._stored)
                fill(ss, specs, runs, [b[1] for b in bufs], lab[1], aug)
        as_dict = self.datasets[0]._as_dict if self.datasets else False
        data = {sp.name: b[0] for sp, b in zip(specs, bufs)} if as_dict else bufs[0][0]
        return data, lab[0]

    loader = ShardDataset.loader

    def close(self):
        for d in self.datasets:
            d.close()
