"""Class names and keys of any bytes a Linux file system allows survive prep
exactly: not UTF-8, a newline, a 255-byte file name (issue 28, item 3).

The names are bytes; Python sees them as os.fsdecode does (surrogateescape),
as os.scandir and torchvision's ImageFolder do, and os.fsencode gives the
bytes back (docs/FORMAT.md §2)."""

import json
import os
import shutil
import subprocess
import tarfile

import pytest

from conftest import TESTDATA, need, prep_bin

import prepshards as ps  # noqa: E402

CLASSES = [b"a\nb", b"caf\xe8", b"caf\xe9", b"plain"]
LONG = b"y" * 251 + b".jpg"  # 255 bytes, the most a file name may have


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    root = os.fsencode(tmp_path_factory.mktemp("names") / "src")
    img = os.path.join(os.fsencode(TESTDATA), b"images", b"everyday", b"camera.jpg")
    for c in CLASSES:
        os.makedirs(os.path.join(root, c))
        shutil.copy(img, os.path.join(root, c, b"x.jpg"))
    shutil.copy(img, os.path.join(root, b"plain", LONG))
    return root


def convert(src, dst, *args):
    subprocess.run([prep_bin(), "convert", os.fsdecode(src), dst, "--recipe", "resize=16,crop=16", *args],
                   check=True, capture_output=True)
    with open(os.path.join(dst, "manifest.json"), encoding="utf-8") as f:
        return json.load(f)


def want_keys(src):
    return sorted(os.path.relpath(os.path.join(d, f), src)
                  for d, _, files in os.walk(src) for f in files)


@pytest.mark.parametrize("fmt", ["hdf5", "png"])
def test_names_kept_exactly(src, tmp_path, fmt):
    dst = str(tmp_path / fmt)
    m = convert(src, dst, "--format", fmt)
    classes = m["classes"]
    assert [os.fsencode(c) for c in classes] == CLASSES
    tv = need("torchvision")
    assert tv.datasets.ImageFolder(os.fsdecode(src)).classes == classes
    assert sorted(e.name for e in os.scandir(os.fsdecode(src)) if e.is_dir()) == classes

    ds = ps.ShardDataset(dst)
    assert ds.classes == classes
    assert sorted(os.fsencode(k) for k in ds.keys) == want_keys(src)
    for i in range(len(ds)):
        key = os.fsencode(ds.key(i))
        assert CLASSES[ds.labels[i]] == key.split(b"/")[0]

    shard = os.path.join(dst, m["shards"][0]["file"])
    if fmt == "hdf5":
        h5py = need("h5py")
        with h5py.File(shard, "r") as f:
            assert "classes" not in f.attrs  # a newline in a name: class_names instead
            assert list(f.attrs["class_names"]) == classes
            assert sorted(bytes(k) for k in f["keys"][:]) == want_keys(src)
    else:
        out = tmp_path / "gnu"
        out.mkdir()
        subprocess.run(["tar", "-xf", shard, "-C", str(out)], check=True, capture_output=True)
        out = tmp_path / "py"
        with tarfile.open(shard) as t:
            t.extractall(out)
            keys = sorted(os.fsencode(json.load(t.extractfile(n))["key"]) for n in t.getnames() if n.endswith(".json"))
        assert keys == want_keys(src)
        for d, _, files in os.walk(out):
            assert all(len(os.fsencode(f)) <= 255 for f in files)
