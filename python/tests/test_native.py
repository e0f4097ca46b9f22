"""The C crop/flip kernel (_window.c through _native.py) against numpy, byte for byte."""

import errno
import os
import subprocess
import sys

import pytest

from conftest import ROOT, TESTDATA, missing, need, prep_bin

np = need("numpy")
import prepshards as ps  # noqa: E402
from prepshards import _native  # noqa: E402
from prepshards.errors import ShardChangedError  # noqa: E402


@pytest.fixture(autouse=True)
def built():
    if not _native.available():
        missing(f"prepshards' C kernel ({_native.why_not})")


def expect(src, x0, h, w, fy, fx):
    out = src[:h, x0:x0 + w]
    return out[::-1 if fy else 1, ::-1 if fx else 1]


@pytest.mark.parametrize("c", [1, 2, 3, 4, 6])
def test_copy_window_equals_numpy(c):
    rng = np.random.default_rng(c)
    for W, w in [(1, 1), (15, 15), (16, 16), (17, 16), (40, 33), (256, 224), (70, 48), (50, 49)]:
        src = rng.integers(0, 256, (9, W, c), np.uint8)
        for x0 in sorted({0, (W - w) // 2, W - w}):
            for fy in (0, 1):
                for fx in (0, 1):
                    dst = np.full((7, w, c), 7, np.uint8)
                    _native.copy_window(dst, src, x0, fy, fx)
                    assert np.array_equal(dst, expect(src, x0, 7, w, fy, fx)), (c, W, w, x0, fy, fx)


def test_flip_path_is_named():
    want = "ssse3" if "ssse3" in open("/proc/cpuinfo").read() else "scalar"
    assert _native.path(3) == want and _native.path(4) == "scalar"


@pytest.mark.parametrize("H,W,c,h,w", [(30, 37, 3, 20, 19), (12, 200, 3, 10, 5), (9, 16, 1, 9, 16)])
def test_read_windows_from_a_file(tmp_path, H, W, c, h, w):
    rng = np.random.default_rng(W)
    data = rng.integers(0, 256, (5, H, W, c), np.uint8)
    path = tmp_path / "samples"
    path.write_bytes(b"x" * 100 + data.tobytes())
    fd = os.open(path, os.O_RDONLY)
    try:
        row, n = W * c, 12
        idx = rng.integers(0, 5, n)
        y0 = rng.integers(0, H - h + 1, n)
        x0 = rng.integers(0, W - w + 1, n)
        fy, fx = rng.integers(0, 2, n).astype(bool), rng.integers(0, 2, n).astype(bool)
        pos = np.arange(n)  # every slot, in order: a sample's rows spill into the next slots first
        offs = 100 + idx * data[0].nbytes + y0 * row
        out = np.zeros((n, h, w, c), np.uint8)
        scratch = np.empty(h * row, np.uint8)
        assert _native.read_windows([fd] * n, offs, row, out, pos, h, w, c, x0, fy, fx, scratch) == (0, None)
        for t in range(n):
            want = expect(data[idx[t], y0[t]:], x0[t], h, w, fy[t], fx[t])
            assert np.array_equal(out[pos[t]], want), t
        # slots this call does not fill (1 and 4 of 6) keep their bytes: no spill lands there
        gap = np.full((6, h, w, c), 99, np.uint8)
        at = np.array([0, 2, 3, 5])
        assert _native.read_windows([fd] * 4, offs[:4], row, gap, at, h, w, c, x0[:4], fy[:4], fx[:4],
                                    scratch) == (0, None)
        assert (gap[1] == 99).all() and (gap[4] == 99).all()
        for t, slot in enumerate(at):
            assert np.array_equal(gap[slot], expect(data[idx[t], y0[t]:], x0[t], h, w, fy[t], fx[t])), slot
        # the file ends inside the third window: 1, and which
        offs[:3] = 100, 100, 100 + 4 * data[0].nbytes
        os.truncate(path, int(offs[2]) + h * row - 1)
        rc, t = _native.read_windows([fd] * 3, offs[:3], row, out, pos[:3], h, w, c, x0, fy, fx, scratch)
        assert (rc, t) == (1, 2)
    finally:
        os.close(fd)
    rc, t = _native.read_windows([fd], offs[:1], row, out, [0], h, w, c, x0, fy, fx, scratch)
    assert (rc, t) == (-errno.EBADF, 0)
    with pytest.raises(ValueError, match="pos must increase"):
        _native.read_windows([fd] * 2, offs[:2], row, out, [1, 0], h, w, c, x0, fy, fx, scratch)


def batches_sha(folder, native):
    """sha256 of an epoch of loader batches, in a fresh interpreter (PREPSHARDS_NATIVE)."""
    code = (
        "import hashlib, sys; sys.path.insert(0, sys.argv[2]); import prepshards as ps\n"
        "from prepshards import _native\n"
        "assert _native.available() == (sys.argv[3] == '1'), _native.why_not\n"
        "ds = ps.ShardDataset(sys.argv[1]); ds.set_epoch(3); h = hashlib.sha256()\n"
        "for x, y in ds.loader(batch_size=5, shuffle=True, seed=2): h.update(x.numpy().tobytes())\n"
        "for i in range(len(ds)): h.update(ds[i][0].tobytes())\n"
        "print(h.hexdigest())\n")
    env = dict(os.environ, PREPSHARDS_NATIVE="1" if native else "0")
    p = subprocess.run([sys.executable, "-c", code, folder, os.path.join(ROOT, "python"), "1" if native else "0"],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    need("torch")
    dst = str(tmp_path_factory.mktemp("native") / "split")
    p = subprocess.run([prep_bin(), "convert", os.path.join(TESTDATA, "images"), dst, "--seed", "4",
                        "--copies", "3", "--items-per-shard", "9",
                        "--recipe", "resize=50x41 | crop=33x29:random,hflip=0.5,vflip=0.3"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return dst


def test_loader_bytes_equal_with_and_without_the_kernel(split):
    assert batches_sha(split, True) == batches_sha(split, False)


def test_a_shard_cut_short_under_the_kernel_is_named(split, tmp_path):
    import shutil  # noqa: PLC0415
    dst = str(tmp_path / "cut")
    shutil.copytree(split, dst)
    ds = ps.ShardDataset(dst)
    shard = os.path.join(dst, "shard-000000.h5")
    ds.get_batch([0, 1])  # files open
    os.truncate(shard, os.path.getsize(shard) // 2)
    with pytest.raises(ShardChangedError, match=r"shard-000000\.h5: the file ends before byte"):
        ds.get_batch(list(range(9)))


def test_concat_batches_mixing_datasets_keep_every_slot(split):
    """Concat fills a batch one dataset at a time: the kernel's reads, which
    spill into the slots after a sample's, must not touch slots another
    dataset's call fills (or has filled)."""
    ds = ps.ShardDataset(split)
    ds.set_epoch(1)
    cat = ps.Concat([ps.ShardDataset(split), ps.ShardDataset(split)])
    cat.set_epoch(1)
    n = len(ds)
    idx = [n + 0, 0, n + 1, 1, 2, n + 2, n + 5, 7, 8, n + 9]  # the second dataset first, interleaved
    x, y = cat.get_batch(idx)
    for t, i in enumerate(idx):
        assert np.array_equal(np.asarray(x[t]), ds[i % n][0]), (t, i)
