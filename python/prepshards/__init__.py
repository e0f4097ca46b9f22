"""prepshards: read prep's shards (HDF5 or WebDataset tar + manifest.json) at disk speed.

Three ways in:

- ``ShardDataset(path)``: map-style, ``ds[i] -> (sample, label)``;
  ``ds.loader(batch_size, shuffle=True, num_workers=N)`` for batched
  DataLoader reads.
- ``ShardStream(path)``: iterable, sharded across ranks and DataLoader
  workers, seeded per-epoch shuffle, exact mid-epoch resume.
- ``BatchReader(path, batch_size)`` / ``iter_batches``: contiguous batches
  read with one read each into reused (optionally pinned) buffers.
- ``Mix([stream, ...], weights)`` / ``Concat([dataset, ...])``: several
  shard folders as one.

numpy is the only dependency; torch is used when installed.
"""

from ._io import tune_malloc
from .batch import BatchReader, iter_batches
from .codecs import decode_npy, decode_png, decode_wav
from .dataset import ShardDataset
from .errors import (
    ManifestError,
    ManifestNotFoundError,
    ManifestVersionError,
    ShardChangedError,
    ShardChecksumError,
    ShardError,
    ShardFormatError,
    ShardIOError,
    ShardSizeError,
    UnknownFieldError,
    UnsafeShardPathError,
)
from .manifest import SUPPORTED_FORMAT_VERSION, Manifest
from .mix import Concat, Mix
from .stream import ShardStream

__version__ = "0.1.0"

__all__ = [
    "BatchReader", "iter_batches", "ShardDataset", "ShardStream", "Mix", "Concat", "Manifest",
    "SUPPORTED_FORMAT_VERSION", "tune_malloc", "decode_png", "decode_wav", "decode_npy",
    "ShardError", "ManifestError", "ManifestNotFoundError", "ManifestVersionError",
    "ShardChecksumError", "ShardFormatError", "ShardSizeError", "UnsafeShardPathError",
    "ShardChangedError", "ShardIOError", "UnknownFieldError",
]
