"""Map-style access: ShardDataset."""

import collections
import warnings

import numpy as np

from . import _torch
from ._batch import augmented_specs, fill, fixed_specs, online_for, read_augmented, runs_of
from ._io import Closing
from .errors import UnknownFieldError
from .online import apply_torch
from .shards import ManifestInfo, ShardSet


def _select_fields(ss, fields):
    available = ss.fields()
    if fields is None:
        return available, len(available) > 1
    single = isinstance(fields, str)
    names = [fields] if single else list(fields)
    for n in names:
        if n not in available:
            raise UnknownFieldError(f"{ss.manifest.path}: no field {n!r}; the shards have {available}: "
                                    "pass one of those as fields=")
    return names, not single


class ShardDataset(ManifestInfo, Closing, _torch.MapBase):
    """Random access to the samples of a prep shard folder.

    ``ds[i]`` returns ``(sample, label)``. ``sample`` is a numpy array when
    the shards hold one field (images, clips, audio, plain .npy) or when
    ``fields`` is one name; otherwise a dict ``{name: array}`` (.npz inputs:
    HDF5 names such as ``"npz/x"``; tar shards: ``"data"`` for the PNG/WAV
    and NAME for each ``KEY.NAME.npy``). ``label`` is an int, -1 when
    unlabelled; ``classes`` names labels 0..K-1 (None when the manifest has
    none).

    Samples are numbered shard by shard in manifest order, within a shard
    in file order. HDF5 samples are read with one ``preadv`` per field at the
    offsets the manifest records (ragged fields: their offsets/shapes/ranks
    datasets are read once per shard); no HDF5 library is used unless a
    dataset's offset is -1, which is read through h5py. Tar members are
    located by scanning the tar headers once per shard and process.

    Descriptors open lazily in each process, so a dataset made before
    ``DataLoader(num_workers=N)`` forks its workers is safe to use in them.
    Every shard's size is checked against the manifest when the dataset is
    made (and again when a process opens the file); ``verify=True`` also
    checks every sha256. A shard replaced or rewritten after that (same
    size or not) raises ShardChangedError when a process opens it, at each
    ``loader()`` epoch, and on ``check_unchanged()``.

    ``transform(sample)``, if given, is applied to the sample (not the label).

    Online ops: when the manifest has an ``online_recipe`` (the ops after
    ``|`` in ``prep convert --recipe``), every read (``ds[i]``,
    ``get_batch``, ``loader``) applies them to field ``data``, drawn from
    (manifest seed, ``online_seed``, epoch, index) (docs/FORMAT.md §4.5):
    call ``set_epoch(e)`` each epoch for fresh crops and flips. Crops and
    flips are fused into the read. ``raw=True`` gives the stored samples;
    ``augment(batch, indices)`` then applies the ops to a torch batch, on
    the GPU for example.
    """

    def __init__(self, path, fields=None, transform=None, verify=False, check_sizes=True, raw=False,
                 online_seed=0):
        self._ss = ShardSet(path, check_sizes=check_sizes, verify=verify)
        self.fields, self._as_dict = _select_fields(self._ss, fields)
        self.transform = transform
        self._specs = None
        self._stored = None
        self.raw = bool(raw)
        self.epoch = 0
        self.online_seed = int(online_seed)
        self._online = online_for(self._ss, self.fields, self.online_seed, self.raw)
        self.online = None if self.raw else self._online

    def set_epoch(self, epoch):
        """The epoch whose online crops and flips reads draw (loader() reads it at each pass)."""
        self.epoch = int(epoch)

    def augment(self, batch, indices, epoch=None):
        """The online ops on a stored uint8 batch tensor (N, H, W[, C]), on its device (CPU or
        CUDA), for samples ``indices`` (ShardDataset indices) of ``epoch`` (default: the current
        one): the pixels a reader without raw=True gives. Read the batch with raw=True."""
        if self._online is None:
            return batch
        return apply_torch(self._online, batch, self.epoch if epoch is None else epoch, indices)

    # -- metadata ---------------------------------------------------------------

    @property
    def shard_set(self):
        return self._ss

    def __len__(self):
        return self._ss.total

    def key(self, i):
        k, j = self._ss.locate(i)
        return self._ss.shards[k].key(j)

    @property
    def keys(self):
        """Every sample's key (the input key plus #c/#f/#r suffixes), in index order."""
        out = []
        for s in self._ss.shards:
            out.extend(s.keys())
        return out

    @property
    def labels(self):
        """Every sample's label as an int64 array (-1: unlabelled)."""
        if not self._ss.shards:
            return np.zeros(0, np.int64)
        return np.concatenate([s.labels() for s in self._ss.shards])

    def label(self, i):
        k, j = self._ss.locate(i)
        s = self._ss.shards[k]
        return int(s.labels()[j]) if self.format == "hdf5" else s.label(j)

    # -- samples -------------------------------------------------------------------

    def __getitem__(self, i):
        k, j = self._ss.locate(int(i))
        g = int(self._ss.starts[k]) + j  # i made non-negative: the online ops' sample index
        s = self._ss.shards[k]
        if self._as_dict:
            aug = self.online is not None and "data" in self.fields
            sample = s.read(j, [n for n in self.fields if n != "data"] if aug else self.fields)
            if aug:
                sample["data"] = read_augmented(s, "data", j, g, (self.online, self.epoch))
                sample = {n: sample[n] for n in self.fields}  # the fields' order
        elif self.online is not None and self.fields[0] == "data":
            sample = read_augmented(s, "data", j, g, (self.online, self.epoch))
        else:
            sample = s.read_field(self.fields[0], j)
        label = int(s.labels()[j]) if self.format == "hdf5" else s.label(j)
        if self.transform is not None:
            sample = self.transform(sample)
        return sample, label

    def field_specs(self):
        """The (dtype, shape) of each field when every sample shares it; ShardError if ragged."""
        if self._specs is None:
            self._stored = fixed_specs(self._ss, self.fields)
            self._specs = self._stored if self.online is None else augmented_specs(self._stored, self.online)
        return self._specs

    def get_batch(self, indices, as_tensor=False, shared=False, out=None, epoch=None):
        """Read several samples into one batch-first buffer: returns (data, labels).

        ``data`` is an array (or a dict of arrays, as ``ds[i]`` gives dicts),
        ``labels`` an int64 array; with ``as_tensor`` both are torch tensors.
        Runs of consecutive indices in one shard are read with one read
        each. ``transform`` is not applied. Every sample must share one shape
        per field (ragged shards: use ``ds[i]``).
        """
        self._plan(indices)
        return self._fill(indices, as_tensor, shared, out, epoch)

    def _plan(self, indices):
        """Shards on gs://: the chunks of these samples are fetched side by side, in this order,
        not one after another as the reads reach them (map-style reads: none held in memory)."""
        if self._ss.remote:
            g = np.asarray(indices, np.int64)
            self._ss.plan_reads(g[(g >= 0) & (g < len(self))], [sp.name for sp in self.field_specs()],
                                hold=False)

    def _fill(self, indices, as_tensor=False, shared=False, out=None, epoch=None):
        """get_batch without planning the reads."""
        specs = self.field_specs()
        n = len(indices)
        if out is None:
            bufs = [_torch.alloc((n,) + sp.shape, sp.dtype, as_tensor, False, shared) for sp in specs]
            lab = _torch.alloc((n,), np.dtype(np.int64), as_tensor, False, shared)
        else:
            bufs, lab = out
        aug = None if self.online is None else (self.online, self.epoch if epoch is None else int(epoch),
                                                self._stored)
        fill(self._ss, specs, runs_of(self._ss, indices), [b[1] for b in bufs], lab[1], aug)
        data = {sp.name: b[0] for sp, b in zip(specs, bufs)} if self._as_dict else bufs[0][0]
        return data, lab[0]

    def loader(self, batch_size, shuffle=False, num_workers=0, sampler=None, drop_last=False,
               seed=None, ring=None, return_indices=False, **kwargs):
        """A torch DataLoader that reads whole batches (``get_batch``) in its workers.

        Yields what ``DataLoader(ds, batch_size, shuffle, sampler=...)`` would
        (``(data, labels)`` tensors, batch-first; dicts for several fields),
        but each worker reads a batch with one call straight into a tensor in
        shared memory instead of reading samples one by one and stacking
        them (default_collate), and reuses those tensors: each worker keeps a
        ring of ``ring`` batch buffers (default ``prefetch_factor + 2``) and the
        loader keeps them mapped in the main process, so no batch costs fresh
        memory (page faults capped a fresh-memory loader near 170-350 MB/s
        on the development VM).

        **A batch is valid until you take the next batch from the loader**
        (with the default ring, until the one after that: enough to overlap a
        ``.cuda(non_blocking=True)`` copy with the next step). Call ``.clone()``
        on anything you keep longer. ``sampler`` (e.g. a DistributedSampler)
        replaces the default Random/SequentialSampler; ``seed`` seeds the
        default shuffle. Other keyword arguments go to DataLoader
        (pin_memory, persistent_workers, prefetch_factor, ...). If
        ``transform`` is set this falls back to a plain per-sample DataLoader.

        Each pass draws the online ops of ``ds.epoch`` at the time it starts
        (persistent workers too): call ``ds.set_epoch(e)`` before it.
        ``return_indices=True`` yields ``(data, labels, indices)``, the
        ShardDataset indices of the batch (for ``augment`` with raw=True).
        """
        torch = _torch.require_torch("ShardDataset.loader")
        from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler  # noqa: PLC0415
        if self.transform is not None:
            return DataLoader(self, batch_size=batch_size, shuffle=shuffle if sampler is None else False,
                              sampler=sampler, num_workers=num_workers, drop_last=drop_last, **kwargs)
        if sampler is None:
            if shuffle:
                gen = None
                if seed is not None:
                    gen = torch.Generator()
                    gen.manual_seed(seed)
                sampler = RandomSampler(self, generator=gen)
            else:
                sampler = SequentialSampler(self)
        self.field_specs()  # fail here, not in a worker, on ragged shards
        prefetch = kwargs.get("prefetch_factor") or 2
        if ring is None:
            ring = prefetch + 2 if num_workers > 0 else 2
        if num_workers > 0 and ring < prefetch + 1:
            raise ValueError(f"ring={ring} is unsafe with prefetch_factor={prefetch}: a worker may be "
                             f"up to {prefetch} batches ahead; use ring >= {prefetch + 1}")
        dl = DataLoader(_BatchFetch(self, batch_size, ring, return_indices), batch_size=None,
                        sampler=_EpochBatches(BatchSampler(sampler, batch_size, drop_last), self,
                                              max(num_workers, 1)),
                        num_workers=num_workers, **kwargs)
        return _RingLoader(dl, self)

    def close(self):
        self._ss.close()


class _BatchFetch(_torch.MapBase):
    """What ShardDataset.loader hands DataLoader: ds[list of indices] -> a batch.

    Each process (worker) fills a ring of preallocated batch buffers, in
    shared memory inside a DataLoader worker, round-robin.
    """

    def __init__(self, ds, batch_size, ring, return_indices=False):
        self.ds = ds
        self.batch_size = batch_size
        self.ring = ring
        self.return_indices = return_indices
        self._slots = None
        self._pid = None
        self._next = 0

    def __getstate__(self):
        st = dict(self.__dict__)
        st["_slots"] = None
        st["_pid"] = None
        return st

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, item):
        import os  # noqa: PLC0415
        # _EpochBatches: the epoch travels with the batch, to any worker, and so does the
        # batch this worker gets next
        epoch, indices, following = item
        if self._pid != os.getpid():
            shared = _torch.in_worker()
            specs = self.ds.field_specs()
            b = self.batch_size
            self._slots = [([_torch.alloc((b,) + sp.shape, sp.dtype, True, False, shared) for sp in specs],
                            _torch.alloc((b,), np.dtype(np.int64), True, False, shared))
                           for _ in range(self.ring)]
            self._pid = os.getpid()
            self._next = 0
        bufs, lab = self._slots[self._next]
        self._next = (self._next + 1) % self.ring
        n = len(indices)
        if n > self.batch_size:
            raise ValueError(f"batch of {n} samples, the ring holds {self.batch_size}")
        view = ([(t[:n], a[:n]) for t, a in bufs], (lab[0][:n], lab[1][:n]))
        self.ds._plan(list(indices) + list(following))  # gs://: this batch's chunks and the next one's
        data, labels = self.ds._fill(indices, out=view, epoch=epoch)
        if self.return_indices:
            return data, labels, _torch.torch.as_tensor(indices, dtype=_torch.torch.int64)
        return data, labels


class _EpochBatches:
    """A batch sampler whose batches carry the dataset's epoch when the pass began (workers,
    persistent ones too, draw the online ops of the main process's ``set_epoch``) and the
    batch the same worker reads next: DataLoader deals batches to its ``workers`` in turn,
    so that is the one ``workers`` places later (a prefetch hint for shards on gs://; []
    at the end)."""

    def __init__(self, batches, ds, workers):
        self.batches = batches
        self.ds = ds
        self.workers = workers

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        epoch = self.ds.epoch
        window = collections.deque()
        for b in self.batches:
            window.append(b)
            if len(window) > self.workers:
                yield epoch, window.popleft(), b
        for b in window:
            yield epoch, b, []


class _RingLoader:
    """A DataLoader whose batches live in the workers' reused shared-memory rings.

    It holds a reference to every ring buffer it has received, so the main
    process keeps them mapped: torch then hands the same storage back for
    the next batch in that buffer instead of mapping fresh pages.
    """

    def __init__(self, dl, ds):
        self.dl = dl
        self.ds = ds
        self._keep = {}
        self._last_epoch = None
        self._warned = False

    def __len__(self):
        return len(self.dl)

    def __getattr__(self, name):
        return getattr(self.__dict__["dl"], name)

    def _hold(self, t):
        try:
            st = t.storage()
            self._keep[st.data_ptr()] = st
        except Exception:  # noqa: BLE001 - not a tensor
            pass

    def __iter__(self):
        self.ds.check_unchanged()  # each epoch: shards replaced since the last one are refused
        if self.ds.online is not None:
            if self._last_epoch == self.ds.epoch and not self._warned:
                warnings.warn(f"prepshards: a second pass over {self.ds.manifest.path} at epoch "
                              f"{self.ds.epoch} repeats its online crops and flips; call "
                              "ds.set_epoch(epoch) before each pass for fresh ones", RuntimeWarning,
                              stacklevel=2)
                self._warned = True
            self._last_epoch = self.ds.epoch
        for item in self.dl:
            data, labels = item[0], item[1]
            for t in (data.values() if isinstance(data, dict) else (data,)):
                self._hold(t)
            self._hold(labels)
            yield item
