"""Exceptions raised by prepshards.

Every error is a :class:`ShardError`; its message names the file involved
and says how to fix the problem.
"""


class ShardError(Exception):
    """Base class of every prepshards error."""


class ManifestNotFoundError(ShardError, FileNotFoundError):
    """No manifest.json where the shards should be."""


class ManifestVersionError(ShardError):
    """The manifest's format_version is newer than this reader."""


class ManifestError(ShardError, ValueError):
    """The manifest is not valid JSON or misses a field a reader needs."""


class UnsafeShardPathError(ShardError, ValueError):
    """A shard file name in the manifest points outside the shard folder."""


class ShardSizeError(ShardError):
    """A shard file's size on disk differs from the manifest."""


class ShardChecksumError(ShardError):
    """A shard file's sha256 differs from the manifest (verify=True)."""


class ShardFormatError(ShardError, ValueError):
    """A shard's content does not match what the manifest or format says."""


class ShardChangedError(ShardSizeError):
    """A shard was replaced, rewritten or truncated after the reader first saw it."""


class ShardIOError(ShardError, OSError):
    """The operating system refused to open or read a shard (permissions, I/O error)."""

    def __str__(self):
        return self.args[0] if self.args else ""


class UnknownFieldError(ShardError, KeyError):
    """A field asked for (``fields=``) is not in the shards."""

    def __str__(self):  # KeyError would quote the message
        return self.args[0] if self.args else ""
