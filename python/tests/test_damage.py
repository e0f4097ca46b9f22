"""Damaged shards and shards that change under the reader: only ShardErrors, never a hang.

The tar sweep runs in a subprocess with a timeout and a memory limit, so
a reader that loops forever or allocates a damaged size fails the test
instead of hanging or swapping the suite.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT, TESTDATA, need, prep_bin

need("numpy")
import prepshards as ps  # noqa: E402

BLOCK = 512


@pytest.fixture(scope="module")
def long_png(tmp_path_factory):
    """A one-shard png run whose first key is over 100 bytes, so the tar has a PAX header."""
    base = tmp_path_factory.mktemp("long")
    src = base / "in"
    os.makedirs(src / "a")
    os.makedirs(src / "b")
    shutil.copy(os.path.join(TESTDATA, "images", "everyday", "coffee.png"), src / "a" / ("x" * 110 + ".png"))
    shutil.copy(os.path.join(TESTDATA, "images", "everyday", "camera.jpg"), src / "b" / "short.jpg")
    dst = base / "out"
    p = subprocess.run([prep_bin(), "convert", str(src), str(dst), "--format", "png", "--workers", "1",
                        "--recipe", "resize=8,crop=8", "--order", "sorted"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return str(dst)


def tar_headers(path):
    """Offsets of every header block of a tar (members and PAX headers), and the end block."""
    out, pos = [], 0
    with open(path, "rb") as f:
        data = f.read()
    while True:
        hdr = data[pos:pos + BLOCK]
        out.append(pos)
        if not any(hdr):
            return out, data
        size = int(hdr[124:136].split(b"\0")[0] or b"0", 8)
        pos += BLOCK + (size + BLOCK - 1) // BLOCK * BLOCK


# Run in a child: set a memory limit, corrupt 2 bytes per case, read everything,
# classify what came out. A case that runs past its timer is a hang.
SWEEP = textwrap.dedent("""
    import json, os, resource, signal, sys, traceback
    sys.path.insert(0, sys.argv[1])
    import prepshards as ps
    folder, shard, cases = sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # a damaged size must not allocate it

    class Hang(BaseException):
        pass

    def alarm(*_):
        raise Hang()
    signal.signal(signal.SIGALRM, alarm)
    fd = os.open(shard, os.O_RDWR)
    out = {"ok": 0, "refused": {}, "bugs": []}
    for pos, new, kind in cases:
        new = bytes.fromhex(new)
        old = os.pread(fd, len(new), pos)
        os.pwrite(fd, new, pos)
        signal.setitimer(signal.ITIMER_REAL, 5.0)
        try:
            ds = ps.ShardDataset(folder)
            for i in range(len(ds)):
                ds[i]
            ds.keys, ds.labels
            if pos % 7 == 0:  # the batch path shares the scan: a sample suffices
                for _ in ps.BatchReader(folder, 2, copy=True):
                    pass
            out["ok"] += 1
            out["ok " + kind] = out.get("ok " + kind, 0) + 1
        except ps.ShardError as e:
            name = type(e).__name__ + " " + kind
            out["refused"][name] = out["refused"].get(name, 0) + 1
            if shard not in str(e):
                out["bugs"].append([pos, new.hex(), "message does not name the shard: " + str(e)])
        except Hang:
            out["bugs"].append([pos, new.hex(), "HANG: " + traceback.format_exc(limit=-3)])
        except BaseException as e:
            out["bugs"].append([pos, new.hex(), traceback.format_exc(limit=-3)])
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            os.pwrite(fd, old, pos)
    print(json.dumps(out))
""")


def corruptions(data, headers):
    """2-byte corruptions of the tar's headers, as (position, new bytes, kind):

    - "inverted": both bytes inverted (the header checksum catches it);
    - "sum": one byte up, the next down by as much, which keeps the checksum, so only
      the structural checks can catch it;
    - "zeros": two ASCII zeros (an octal field or a PAX record length of 0);

    at every position of the PAX header, its record block (no checksum covers it) and
    its member's header, and at every 5th position of the other headers (a different
    residue each, to keep the suite quick).
    """
    cases = []
    body = data[headers[0] + BLOCK:headers[1]].rstrip(b"\0")  # the PAX records; then NULs nobody reads
    blocks = [(headers[0], BLOCK, 1, True), (headers[0] + BLOCK, len(body) + 1, 1, False),
              (headers[1], BLOCK, 1, True)]
    blocks += [(h, BLOCK, 5, True) for h in headers[2:]]
    for n, (h, length, step, header) in enumerate(blocks):
        for p in range(h + n % step, min(h + length, len(data)) - 1, step):
            a, b = data[p], data[p + 1]
            cases.append((p, bytes([a ^ 0xFF, b ^ 0xFF]).hex(), "inverted" if header else "body"))
            if a < 255 and b > 0:
                d = min(255 - a, b, 7)
                cases.append((p, bytes([a + d, b - d]).hex(), "sum" if header else "body"))
            elif a > 0 and b < 255:
                d = min(a, 255 - b, 7)
                cases.append((p, bytes([a - d, b + d]).hex(), "sum" if header else "body"))
            if step == 1 and data[p:p + 2] != b"00":
                cases.append((p, b"00".hex(), "zeros"))
    return cases


def test_tar_header_corruption_never_hangs(long_png, tmp_path):
    folder = str(tmp_path / "s")
    shutil.copytree(long_png, folder)
    m = json.load(open(os.path.join(folder, "manifest.json")))
    assert len(m["shards"]) == 1 and m["shards"][0]["count"] == 2
    shard = os.path.join(folder, m["shards"][0]["file"])
    headers, data = tar_headers(shard)
    # the PAX header, the long-named member's header, .cls, .json, the second sample, the end
    assert b"PaxHeaders" in data[headers[0]:headers[0] + 100]
    assert len(headers) >= 8
    cases = corruptions(data, headers)
    assert len(cases) > 3000
    p = subprocess.run([sys.executable, "-c", SWEEP, os.path.join(ROOT, "python"), folder, shard, json.dumps(cases)],
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout)
    assert not out["bugs"], f"{len(out['bugs'])} bad outcomes, first: {out['bugs'][:3]}"
    # every inverted header is noticed (by its checksum); kept sums and zeros are caught
    # where they change what the reader uses (not, e.g., in mtime or a name PAX overrides)
    assert "ok inverted" not in out, out
    inverted = sum(1 for c in cases if c[2] == "inverted")
    assert out["refused"]["ShardFormatError inverted"] == inverted, out
    assert out["refused"].get("ShardFormatError sum", 0) > 50, out
    assert out["refused"].get("ShardFormatError zeros", 0) > 100, out
    # and the shard still reads intact afterwards: the sweep restored every byte
    assert open(shard, "rb").read() == data


# -- shards that change under the reader ------------------------------------------------


def copy_shards(src, dst):
    shutil.copytree(src, dst)
    m = json.load(open(os.path.join(dst, "manifest.json")))
    return str(dst), [os.path.join(dst, s["file"]) for s in m["shards"]], m


def read_all(ds):
    for i in range(len(ds)):
        ds[i]


@pytest.mark.parametrize("name", ["img_h5", "img_png"])
def test_truncated_while_reading(shards, tmp_path, name):
    folder, files, m = copy_shards(shards[name], tmp_path / "s")
    ds = ps.ShardDataset(folder)
    n0 = m["shards"][0]["count"]
    ds[0]  # shard 0 is open (and a tar shard's index built)
    os.truncate(files[0], m["shards"][0]["bytes"] // 2)
    with pytest.raises(ps.ShardChangedError) as e:
        ds[n0 - 1]
    msg = str(e.value)
    assert files[0] in msg and "changed under the reader" in msg and "restart the reader" in msg
    with pytest.raises(ps.ShardChangedError, match="went from"):
        ds.check_unchanged()


@pytest.mark.parametrize("name", ["img_h5", "img_png"])
def test_truncated_between_epochs(shards, tmp_path, name):
    folder, files, m = copy_shards(shards[name], tmp_path / "s")
    stream = ps.ShardStream(folder, shuffle=False)
    batches = ps.BatchReader(folder, 4)
    assert len(list(stream)) == len(stream) and len(list(batches)) == len(batches)
    os.truncate(files[-1], m["shards"][-1]["bytes"] - BLOCK)
    for reader in (stream, batches):
        reader.set_epoch(1)
        with pytest.raises(ps.ShardChangedError) as e:
            next(iter(reader))  # refused at the epoch's start, before any sample
        assert files[-1] in str(e.value) and f"went from {m['shards'][-1]['bytes']}" in str(e.value)


def rewrite_same_size(path, how):
    """Change one byte of a shard keeping its size: as a new file renamed over it (another
    run), or in place (a copy over it), with an mtime that differs."""
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0xFF
    st = os.stat(path)
    if how == "replaced":
        with open(path + ".new", "wb") as f:
            f.write(data)
        os.utime(path + ".new", ns=(st.st_atime_ns, st.st_mtime_ns))  # even the same mtime
        os.replace(path + ".new", path)
    else:
        with open(path, "r+b") as f:
            f.write(data)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert os.stat(path).st_size == st.st_size


@pytest.mark.parametrize("name", ["img_h5", "img_png"])
@pytest.mark.parametrize("how", ["replaced", "rewritten"])
def test_replaced_same_size(shards, tmp_path, name, how):
    folder, files, m = copy_shards(shards[name], tmp_path / "s")
    ds = ps.ShardDataset(folder)
    stream = ps.ShardStream(folder, shuffle=False)
    batches = ps.BatchReader(folder, 4)
    list(stream), list(batches)  # every shard opened: the next epoch must notice
    rewrite_same_size(files[1], how)
    want = "replaced by another file" if how == "replaced" else "rewritten in place"
    # a process opening it (ds has not opened shard 1 yet), and each reader's next epoch
    with pytest.raises(ps.ShardChangedError, match=want) as e:
        ds[m["shards"][0]["count"]]
    assert files[1] in str(e.value) and "new manifest" in str(e.value)
    for reader in (stream, batches):
        with pytest.raises(ps.ShardChangedError, match=want):
            next(iter(reader))
    # a reader made now takes the files as they are (their bytes are the checksums' business)
    assert len(ps.ShardStream(folder)) == m["samples"]


def test_replaced_under_loader(shards, tmp_path):
    need("torch")
    folder, files, m = copy_shards(shards["img_h5"], tmp_path / "s")
    ds = ps.ShardDataset(folder)
    loader = ds.loader(8)
    assert sum(len(y) for _, y in loader) == len(ds)
    rewrite_same_size(files[0], "replaced")
    with pytest.raises(ps.ShardChangedError, match=files[0]):
        next(iter(loader))


def test_ragged_index_damage(shards, tmp_path):
    """Offsets and shapes are read from the file: damaged ones are refused, not trusted."""
    folder, files, m = copy_shards(shards["npy_ragged"], tmp_path / "s")
    d = {x["name"]: x for x in m["shards"][0]["datasets"]}
    for name, pos, value in (("offsets", 1, -5), ("offsets", 6, 1 << 40), ("shapes", 3, -2),
                             ("shapes", 3, 1 << 62), ("ranks", 0, 9)):
        shutil.copy(os.path.join(shards["npy_ragged"], m["shards"][0]["file"]), files[0])
        with open(files[0], "r+b") as f:
            f.seek(d[name]["offset"] + 8 * pos)
            f.write(value.to_bytes(8, "little", signed=True))
        ds = ps.ShardDataset(folder, check_sizes=False)
        with pytest.raises(ps.ShardFormatError, match=files[0]):
            read_all(ds)
