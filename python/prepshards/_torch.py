"""Optional torch support: everything works with numpy alone."""

import warnings

import numpy as np

try:  # torch is optional
    import torch
    from torch.utils.data import Dataset as MapBase
    from torch.utils.data import IterableDataset as IterBase
except ImportError:  # pragma: no cover - exercised without torch
    torch = None

    class MapBase:  # noqa: D101 - stand-in for torch.utils.data.Dataset
        pass

    class IterBase:  # noqa: D101 - stand-in for torch.utils.data.IterableDataset
        pass


def require_torch(what):
    if torch is None:
        raise ImportError(f"{what} needs torch: pip install 'prepshards[torch]'")
    return torch


def worker_info():
    """(worker id, number of workers) of the current DataLoader worker, or (0, 1)."""
    if torch is None:
        return 0, 1
    info = torch.utils.data.get_worker_info()
    if info is None:
        return 0, 1
    return info.id, info.num_workers


def in_worker():
    return torch is not None and torch.utils.data.get_worker_info() is not None


def dist_rank_world(rank, world_size):
    """Explicit rank/world_size, else torch.distributed's when initialised, else (0, 1)."""
    if rank is not None or world_size is not None:
        if rank is None or world_size is None:
            raise ValueError("give both rank= and world_size=, or neither")
        rank, world_size = int(rank), int(world_size)
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} out of range for world_size {world_size}")
        return rank, world_size
    if torch is not None and torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def torch_dtype(np_dtype):
    """The torch dtype of a numpy dtype, or None where torch has none (uint16 in torch 1.x...)."""
    if torch is None:
        return None
    try:
        return torch.from_numpy(np.empty(0, np_dtype.newbyteorder("="))).dtype
    except TypeError:
        return None


_pin_warned = False


def alloc(shape, np_dtype, as_tensor=False, pin_memory=False, shared=False):
    """Allocate a C-contiguous buffer: a numpy array, or a torch tensor
    (pinned, or in shared memory for a DataLoader worker's batch), with a
    numpy view of the same memory. Returns (buffer, numpy view).

    pin_memory where torch cannot pin (no CUDA): warns once and returns
    ordinary memory.
    """
    global _pin_warned
    shape = tuple(int(s) for s in shape)
    if not (as_tensor or pin_memory or shared):
        a = np.empty(shape, np_dtype)
        return a, a
    t_dtype = torch_dtype(np_dtype) if torch is not None else None
    if t_dtype is None:
        if torch is None:
            if pin_memory:
                raise ImportError("pin_memory=True needs torch: pip install 'prepshards[torch]'")
            a = np.empty(shape, np_dtype)
            return a, a
        raise TypeError(f"torch has no dtype for {np_dtype}; read it as numpy (as_tensor=False)")
    t = None
    if pin_memory:
        try:
            t = torch.empty(shape, dtype=t_dtype, pin_memory=True)
        except RuntimeError as e:
            if not _pin_warned:
                warnings.warn(f"prepshards: pin_memory=True but torch cannot pin memory here ({e}); "
                              "using ordinary memory", RuntimeWarning, stacklevel=3)
                _pin_warned = True
    if t is None and shared:
        n = 1
        for s in shape:
            n *= s
        try:
            storage = torch.empty(0, dtype=t_dtype).storage()._new_shared(n)
            t = torch.empty(0, dtype=t_dtype).set_(storage).view(shape)
        except Exception:  # noqa: BLE001 - private API moved: copy into shared memory instead
            t = torch.empty(shape, dtype=t_dtype).share_memory_()
    if t is None:
        t = torch.empty(shape, dtype=t_dtype)
    return t, t.numpy()
