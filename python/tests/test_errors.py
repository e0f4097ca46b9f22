"""Each error names the file involved and the fix."""

import json
import os
import shutil

import pytest

from conftest import need

need("numpy")
import prepshards as ps  # noqa: E402


def copy_shards(src, dst):
    shutil.copytree(src, dst)
    return str(dst)


def edit_manifest(folder, fn):
    path = os.path.join(folder, "manifest.json")
    with open(path) as f:
        m = json.load(f)
    fn(m)
    with open(path, "w") as f:
        json.dump(m, f)
    return path


def test_no_manifest(tmp_path):
    with pytest.raises(ps.ManifestNotFoundError) as e:
        ps.ShardDataset(tmp_path)
    assert str(tmp_path / "manifest.json") in str(e.value)
    assert "prep convert" in str(e.value)
    with pytest.raises(ps.ShardError, match="no such manifest"):
        ps.ShardStream(tmp_path / "nope.json")


def test_newer_format_version(shards, tmp_path):
    folder = copy_shards(shards["img_h5"], tmp_path / "s")
    path = edit_manifest(folder, lambda m: m.update(format_version=ps.SUPPORTED_FORMAT_VERSION + 1))
    for make in (ps.ShardDataset, ps.ShardStream, lambda p: ps.BatchReader(p, 4)):
        with pytest.raises(ps.ManifestVersionError) as e:
            make(folder)
        msg = str(e.value)
        assert path in msg and "older than the shards" in msg and "upgrade prepshards" in msg


def test_missing_version_and_order_default(shards, tmp_path):
    folder = copy_shards(shards["img_h5"], tmp_path / "s")

    def drop(m):
        m.pop("format_version", None)
        m.pop("order", None)
    edit_manifest(folder, drop)
    ds = ps.ShardDataset(folder)
    assert ds.format_version == 1 and ds.order == "sorted"
    edit_manifest(folder, lambda m: m.update(format_version=1, order="shuffle"))
    ds = ps.ShardDataset(folder)
    assert ds.format_version == 1 and ds.order == "shuffle"


@pytest.mark.parametrize("name", ["img_h5", "img_png"])
def test_size_mismatch(shards, tmp_path, name):
    folder = copy_shards(shards[name], tmp_path / "s")
    m = json.load(open(os.path.join(folder, "manifest.json")))
    victim = os.path.join(folder, m["shards"][1]["file"])
    with open(victim, "ab") as f:
        f.write(b"\0")
    for make in (ps.ShardDataset, ps.ShardStream, lambda p: ps.BatchReader(p, 4)):
        with pytest.raises(ps.ShardSizeError) as e:
            make(folder)
        assert victim in str(e.value) and "manifest" in str(e.value)
    # a file that changes after the dataset was made is caught when a process opens it
    folder2 = copy_shards(shards[name], tmp_path / "t")
    ds = ps.ShardDataset(folder2)
    victim2 = os.path.join(folder2, m["shards"][-1]["file"])  # not opened yet
    os.truncate(victim2, m["shards"][-1]["bytes"] - 512)
    with pytest.raises(ps.ShardSizeError, match=victim2):
        ds[len(ds) - 1]


def test_missing_shard(shards, tmp_path):
    folder = copy_shards(shards["img_h5"], tmp_path / "s")
    victim = os.path.join(folder, "shard-000002.h5")
    os.remove(victim)
    with pytest.raises(ps.ShardSizeError, match="missing") as e:
        ps.ShardDataset(folder)
    assert victim in str(e.value)


def test_checksum_mismatch_with_verify(shards, tmp_path):
    folder = copy_shards(shards["img_h5"], tmp_path / "s")
    victim = os.path.join(folder, "shard-000001.h5")
    with open(victim, "r+b") as f:
        f.seek(5000)
        b = f.read(1)
        f.seek(5000)
        f.write(bytes([b[0] ^ 0xFF]))
    ps.ShardDataset(folder)  # same size: only verify=True reads the bytes
    with pytest.raises(ps.ShardChecksumError) as e:
        ps.ShardDataset(folder, verify=True)
    assert victim in str(e.value) and "sha256" in str(e.value)
    ps.ShardDataset(shards["img_h5"], verify=True)  # intact shards pass


@pytest.mark.parametrize("bad", ["../x.h5", "/etc/passwd", "", "a/../../x.h5", ".", "sub/shard-000000.h5", "sub\\x.h5"])
def test_unsafe_shard_names(shards, tmp_path, bad):
    folder = copy_shards(shards["img_h5"], tmp_path / "s")
    path = edit_manifest(folder, lambda m: m["shards"][0].update(file=bad))
    with pytest.raises(ps.UnsafeShardPathError) as e:
        ps.ShardDataset(folder)
    assert path in str(e.value) and repr(bad) in str(e.value)


def test_task_part_and_bad_json(shards, tmp_path):
    folder = copy_shards(shards["img_h5"], tmp_path / "s")
    edit_manifest(folder, lambda m: m.update(task={"index": 0, "count": 2, "first_shard": 0, "end_shard": 1}))
    with pytest.raises(ps.ManifestError, match="merge-manifest"):
        ps.ShardDataset(folder)
    with open(os.path.join(folder, "manifest.json"), "w") as f:
        f.write("{not json")
    with pytest.raises(ps.ManifestError, match="manifest.json"):
        ps.ShardDataset(folder)
