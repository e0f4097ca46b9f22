"""Decoders for tar shard members: PNG, WAV and .npy, in numpy alone.

prep writes PNGs with no compression (stored deflate blocks) and no row
filters, so decoding is zlib's copy plus dropping one filter byte a row.
Filtered rows (Sub, Up, Average, Paeth) are undone too, more slowly, so
any non-interlaced 8- or 16-bit PNG decodes.
"""

import ast
import functools
import math
import struct
import zlib

import numpy as np

from .errors import ShardError, ShardFormatError


def _damage_is_format_error(kind):
    """Turn what a damaged member makes the parser raise (struct.error on a short
    buffer, ValueError from numpy on an impossible shape, ...) into ShardFormatError."""
    def wrap(fn):
        @functools.wraps(fn)
        def decode(buf, where=kind, *args, **kwargs):
            try:
                return fn(buf, where, *args, **kwargs)
            except ShardFormatError as e:
                if "reconvert" in str(e):
                    raise
                raise ShardFormatError(f"{e}; the shard is damaged: copy it again or reconvert "
                                       "(prep convert --resume)") from None
            except ShardError:
                raise
            except (struct.error, ValueError, TypeError, IndexError, OverflowError, KeyError) as e:
                raise ShardFormatError(f"{where}: damaged {kind} ({e}); the shard is damaged: copy it "
                                       "again or reconvert (prep convert --resume)") from None
        return decode
    return wrap

_PNG_SIG = b"\x89PNG\r\n\x1a\n"
# colour type -> channels
_PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


@_damage_is_format_error("png")
def decode_png(buf, where="png", out=None):
    """Decode a PNG into a uint8 (or uint16) array shaped as PIL gives it.

    Grey and palette images come back (H, W), like ``np.asarray(PIL.Image.open(f))``
    (palette: the indices, as PIL's "P" mode); grey+alpha (H, W, 2), RGB
    (H, W, 3), RGBA (H, W, 4). 16-bit samples come back as native uint16.
    ``out``, if given, is a writable array of the right size to decode into.
    """
    mv = memoryview(buf)
    if bytes(mv[:8]) != _PNG_SIG:
        raise ShardFormatError(f"{where}: not a PNG")
    pos = 8
    idat = []
    width = height = None
    n = len(mv)
    while pos + 8 <= n:
        length, ctype = struct.unpack_from(">I4s", mv, pos)
        body = mv[pos + 8:pos + 8 + length]
        if ctype == b"IHDR":
            width, height, depth, colour, _comp, _filt, interlace = struct.unpack_from(">IIBBBBB", body)
        elif ctype == b"IDAT":
            idat.append(body)
        elif ctype == b"IEND":
            break
        pos += 12 + length
    if width is None:
        raise ShardFormatError(f"{where}: PNG without IHDR")
    if interlace:
        raise ShardFormatError(f"{where}: interlaced PNG not supported (prep never writes one)")
    if colour not in _PNG_CHANNELS or depth not in (8, 16) or (colour == 3 and depth != 8):
        raise ShardFormatError(f"{where}: PNG colour type {colour} at {depth} bits not supported "
                               "(prep writes 8-bit grey or RGB)")
    ch = _PNG_CHANNELS[colour]
    bpp = ch * depth // 8  # bytes per pixel
    stride = width * bpp
    want = height * (stride + 1)
    data = idat[0] if len(idat) == 1 else b"".join(idat)
    if want > 1032 * len(data) + 1024:  # deflate expands at most ~1032:1: damaged IHDR
        raise ShardFormatError(f"{where}: PNG of {width}x{height} cannot come from {len(data)} bytes "
                               "of image data; the shard is damaged: copy it again or reconvert")
    try:
        raw = zlib.decompress(data, 15, want + 1)
    except zlib.error as e:
        raise ShardFormatError(f"{where}: PNG image data: {e}") from None
    if len(raw) < want:
        raise ShardFormatError(f"{where}: PNG image data holds {len(raw)} bytes, {want} needed")
    rows = np.frombuffer(raw, np.uint8, want).reshape(height, stride + 1)
    filters = rows[:, 0]
    shape = (height, width) if ch == 1 else (height, width, ch)
    if depth == 8:
        if out is None:
            out = np.empty(shape, np.uint8)
        elif out.size != height * width * ch or out.dtype != np.uint8:
            raise ShardFormatError(f"{where}: PNG is {shape}, the output buffer {out.shape} {out.dtype}")
        pix = out.reshape(height, stride)
    else:
        pix = np.empty((height, stride), np.uint8)
    if not filters.any():
        pix[...] = rows[:, 1:]
    else:
        _unfilter(rows, pix, bpp, where)
    if depth == 16:
        res = pix.view(">u2").astype(np.uint16).reshape(shape)
        if out is not None:
            out.reshape(shape)[...] = res
            return out
        return res
    return out.reshape(shape) if out.shape != shape else out


def _unfilter(rows, pix, bpp, where):
    height, stride = pix.shape
    prior = np.zeros(stride, np.int32)
    for y in range(height):
        f = rows[y, 0]
        line = rows[y, 1:].astype(np.int32)
        if f == 0:
            cur = line
        elif f == 1:  # Sub: running sum per channel
            cur = np.cumsum(line.reshape(-1, bpp), axis=0).reshape(-1) & 0xFF
        elif f == 2:  # Up
            cur = (line + prior) & 0xFF
        elif f == 3:  # Average
            cur = np.empty(stride, np.int32)
            left = np.zeros(bpp, np.int32)
            for x in range(0, stride, bpp):
                v = (line[x:x + bpp] + ((left + prior[x:x + bpp]) >> 1)) & 0xFF
                cur[x:x + bpp] = v
                left = v
        elif f == 4:  # Paeth
            cur = np.empty(stride, np.int32)
            a = np.zeros(bpp, np.int32)
            c = np.zeros(bpp, np.int32)
            for x in range(0, stride, bpp):
                b = prior[x:x + bpp]
                p = a + b - c
                pa, pb, pc = np.abs(p - a), np.abs(p - b), np.abs(p - c)
                pred = np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))
                v = (line[x:x + bpp] + pred) & 0xFF
                cur[x:x + bpp] = v
                a, c = v, b
        else:
            raise ShardFormatError(f"{where}: PNG row {y} has unknown filter {f}")
        pix[y] = cur
        prior = cur


_WAVE_PCM, _WAVE_FLOAT, _WAVE_EXT = 1, 3, 0xFFFE


@_damage_is_format_error("wav")
def decode_wav(buf, where="wav"):
    """Decode a RIFF/WAVE file of 16-bit PCM or 32-bit float.

    Returns (samples, rate): int16 or float32 samples shaped (T,) for mono
    and (T, C) otherwise, as prep stores audio in HDF5 shards.
    """
    mv = memoryview(buf)
    if len(mv) < 12 or bytes(mv[:4]) != b"RIFF" or bytes(mv[8:12]) != b"WAVE":
        raise ShardFormatError(f"{where}: not a RIFF/WAVE file")
    pos, n = 12, len(mv)
    fmt = None
    while pos + 8 <= n:
        cid, size = struct.unpack_from("<4sI", mv, pos)
        body = pos + 8
        if cid == b"fmt ":
            tag, channels, rate, _byte_rate, _align, bits = struct.unpack_from("<HHIIHH", mv, body)
            if tag == _WAVE_EXT and size >= 40:
                tag = struct.unpack_from("<H", mv, body + 24)[0]  # SubFormat GUID's first field
            fmt = (tag, channels, rate, bits)
        elif cid == b"data":
            if fmt is None:
                raise ShardFormatError(f"{where}: WAV data before its fmt chunk")
            tag, channels, rate, bits = fmt
            if tag == _WAVE_PCM and bits == 16:
                dt = np.dtype("<i2")
            elif tag == _WAVE_FLOAT and bits == 32:
                dt = np.dtype("<f4")
            else:
                raise ShardFormatError(f"{where}: WAV format tag {tag} at {bits} bits not supported "
                                       "(prep writes 16-bit PCM or 32-bit float)")
            if size > n - body:
                raise ShardFormatError(f"{where}: WAV data chunk of {size} bytes is cut at {n - body}; "
                                       "the shard is damaged: copy it again or reconvert")
            if channels < 1 or size % (dt.itemsize * channels):
                raise ShardFormatError(f"{where}: WAV data of {size} bytes is not whole frames of "
                                       f"{channels} channels; the shard is damaged")
            count = size // dt.itemsize
            a = np.frombuffer(mv, dt, count, body)
            a = a.astype(dt.newbyteorder("="), copy=True)
            if channels > 1:
                a = a.reshape(-1, channels)
            return a, rate
        pos = body + size + (size & 1)
    raise ShardFormatError(f"{where}: WAV has no data chunk")


@_damage_is_format_error("npy")
def decode_npy(buf, where="npy"):
    """Decode a .npy file held in memory into a writable array (no pickles)."""
    mv = memoryview(buf)
    if bytes(mv[:6]) != b"\x93NUMPY":
        raise ShardFormatError(f"{where}: not an .npy file")
    major = mv[6]
    if major == 1:
        hlen = struct.unpack_from("<H", mv, 8)[0]
        start = 10
    elif major in (2, 3):
        hlen = struct.unpack_from("<I", mv, 8)[0]
        start = 12
    else:
        raise ShardFormatError(f"{where}: .npy version {major} not supported")
    enc = "utf8" if major == 3 else "latin1"
    try:
        header = ast.literal_eval(bytes(mv[start:start + hlen]).decode(enc))
        dt = np.dtype(header["descr"])
        shape = tuple(header["shape"])
        fortran = header["fortran_order"]
    except Exception as e:  # noqa: BLE001 - any malformed header
        raise ShardFormatError(f"{where}: bad .npy header ({e})") from None
    if dt.hasobject:
        raise ShardFormatError(f"{where}: object arrays are not loaded (pickles)")
    if not all(isinstance(x, int) and x >= 0 for x in shape):
        raise ShardFormatError(f"{where}: bad .npy shape {shape}")
    count = math.prod(shape)
    off = start + hlen
    if len(mv) - off < count * dt.itemsize:
        raise ShardFormatError(f"{where}: .npy data truncated")
    a = np.frombuffer(mv, dt, count, off)
    if fortran:
        a = a.reshape(shape[::-1]).T
    else:
        a = a.reshape(shape)
    if not a.flags.writeable:
        a = a.copy()
    return a
