"""Online ops (the manifest's online_recipe): determinism, fused reads, flips, resume, workers, GPU path."""

import json
import os
import re
import subprocess

import pytest

from conftest import TESTDATA, need, prep_bin, reference

np = need("numpy")
torch = need("torch")
import prepshards as ps  # noqa: E402
from prepshards.online import _hflip_into  # noqa: E402

OFFLINE = "resize=44x40"  # stored images 44 wide, 40 high
ONLINE = "crop=32x28:random,hflip=0.5,vflip=0.5"


def convert(tmp, name, args, online):
    """prep convert with the recipe split at '|': OFFLINE stored, ``online`` in the manifest."""
    dst = os.path.join(tmp, name)
    cmd = [prep_bin(), "convert", os.path.join(TESTDATA, "images"), dst, "--workers", "1", "--seed", "5"]
    p = subprocess.run(cmd + args + ["--recipe", f"{OFFLINE} | {online}"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return dst


def set_online(folder, online):
    """A manifest as a newer prep might write it (ops this reader does not know)."""
    path = os.path.join(folder, "manifest.json")
    m = json.load(open(path))
    m["online_recipe"], m["format_version"] = online, 3
    json.dump(m, open(path, "w"))
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("online"))
    return {"h5": convert(tmp, "h5", ["--copies", "3", "--items-per-shard", "7"], ONLINE),
            "png": convert(tmp, "png", ["--format", "png", "--copies", "2", "--items-per-shard", "5"], ONLINE)}


# -- an independent implementation of docs/FORMAT.md §4.5, in Python integers ----------------

M = (1 << 64) - 1


def mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return z ^ (z >> 31)


def u(seed, salt, epoch, index, op, draw):
    key = mix((mix((mix((mix(seed) + salt) & M) + epoch) & M) + index) & M)
    r = mix((key + (op * 64 + draw + 1) * 0x9E3779B97F4A7C15) & M)
    return (r >> 11) / 2.0 ** 53


def expected(stored, seed, epoch, index, salt=0):
    """ONLINE applied to one stored image by the spec: crop (top, then left), hflip, vflip."""
    H, W = stored.shape[:2]
    y = int(u(seed, salt, epoch, index, 0, 0) * (H - 28 + 1))
    x = int(u(seed, salt, epoch, index, 0, 1) * (W - 32 + 1))
    out = stored[y:y + 28, x:x + 32]
    if u(seed, salt, epoch, index, 1, 0) < 0.5:
        out = out[:, ::-1]
    if u(seed, salt, epoch, index, 2, 0) < 0.5:
        out = out[::-1]
    return out


@pytest.mark.parametrize("fmt", ["h5", "png"])
def test_samples_follow_the_spec_and_raw_is_stored(folders, fmt):
    ds = ps.ShardDataset(folders[fmt], verify=True)  # dataset_id has the online_recipe line, as prep's
    raw = ps.ShardDataset(folders[fmt], raw=True)
    assert ds.format_version == 3 and ds.manifest.online_recipe == ONLINE
    stored = [s["data"] for s, _, _ in reference(folders[fmt])]  # h5py / tarfile + PIL
    flips = set()
    for epoch in (0, 3):
        ds.set_epoch(epoch)
        for i in range(len(ds)):
            assert np.array_equal(raw[i][0], stored[i])  # raw=True: the stored bytes
            x = ds[i][0]
            assert x.shape == (28, 32, 3) and x.flags.c_contiguous
            assert np.array_equal(x, expected(stored[i], 5, epoch, i)), (epoch, i)
            flips.add((u(5, 0, epoch, i, 1, 0) < 0.5, u(5, 0, epoch, i, 2, 0) < 0.5))
    assert flips == {(a, b) for a in (False, True) for b in (False, True)}  # every flip case was met


def test_deterministic_per_seed_and_epoch(folders):
    a, b = ps.ShardDataset(folders["h5"]), ps.ShardDataset(folders["h5"])
    e0 = [a[i][0] for i in range(len(a))]
    assert all(np.array_equal(x, b[i][0]) for i, x in enumerate(e0))  # equal seeds, equal samples
    a.set_epoch(1)
    diff = sum(not np.array_equal(x, a[i][0]) for i, x in enumerate(e0))
    assert diff >= len(a) - 2  # a new epoch draws new crops (a repeat now and then is chance)
    c = ps.ShardDataset(folders["h5"], online_seed=9)
    assert sum(not np.array_equal(x, c[i][0]) for i, x in enumerate(e0)) >= len(a) - 2


@pytest.mark.parametrize("fmt", ["h5", "png"])
def test_fused_batch_equals_crop_of_full_read(folders, fmt):
    ds = ps.ShardDataset(folders[fmt])
    ds.set_epoch(2)
    raw = ps.ShardDataset(folders[fmt], raw=True)
    idx = [5, 6, 7, 0, 3, 12, 13, 1]  # runs across shards, and single samples
    x, y = ds.get_batch(idx)
    full, y2 = raw.get_batch(idx)
    assert x.shape == (8, 28, 32, 3) and full.shape == (8, 40, 44, 3)
    assert np.array_equal(y, y2)
    for t, i in enumerate(idx):
        assert np.array_equal(x[t], expected(full[t], 5, 2, i))
        assert np.array_equal(x[t], ds[i][0])
    # the GPU path's function, run on CPU tensors, gives the same bytes
    got = raw.augment(torch.from_numpy(full), idx, epoch=2)
    assert got.dtype == torch.uint8 and np.array_equal(got.numpy(), x)
    br = ps.BatchReader(folders[fmt], 4)
    br.set_epoch(2)
    for xb, yb in br:
        assert xb.shape[1:] == (28, 32, 3)
    br = ps.BatchReader(folders[fmt], 4, return_indices=True, copy=True)
    br.set_epoch(2)
    for xb, yb, ib in br:
        assert all(np.array_equal(xb[t], ds[int(i)][0]) for t, i in enumerate(ib))


def test_hflip_fast_path_equals_numpy():
    rng = np.random.default_rng(0)
    for shape in [(7, 8, 3), (5, 16, 1), (4, 8), (3, 8, 2), (3, 4, 4), (5, 7, 3), (2, 3)]:
        src = rng.integers(0, 256, (shape[0], shape[1] + 3) + shape[2:], np.uint8)[:, 2:2 + shape[1]]
        dst = np.empty(shape, np.uint8)
        _hflip_into(dst, src)
        assert np.array_equal(dst, src[:, ::-1]), shape


def test_stream_matches_dataset_and_resumes(folders):
    ds = ps.ShardDataset(folders["h5"])
    ds.set_epoch(4)
    st = ps.ShardStream(folders["h5"], seed=1, buffer_size=4, yield_index=True)
    st.set_epoch(4)
    it = iter(st)
    first = [next(it) for _ in range(6)]
    for x, _, g in first:
        assert np.array_equal(x, ds[g][0])
    state = st.state_dict()
    assert state["version"] == 2 and state["online_recipe"] == ONLINE and state["online_seed"] == 0
    rest = list(it)
    st2 = ps.ShardStream(folders["h5"], seed=1, buffer_size=4, yield_index=True)
    st2.load_state_dict(json.loads(json.dumps(state)))
    again = list(st2)
    assert [g for _, _, g in again] == [g for _, _, g in rest]
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(again, rest))
    # a state saved without online ops (older prepshards, or raw=True) is not resumed with them
    with pytest.raises(ps.ShardError, match="online_recipe"):
        ps.ShardStream(folders["h5"], seed=1, buffer_size=4, raw=True).load_state_dict(state)
    old = {k: v for k, v in state.items() if not k.startswith("online")}
    with pytest.raises(ps.ShardError, match="online_recipe"):
        ps.ShardStream(folders["h5"], seed=1, buffer_size=4).load_state_dict(old)


def test_loader_workers_follow_set_epoch(folders):
    ds = ps.ShardDataset(folders["h5"])
    for persistent in (False, True):
        dl = ds.loader(4, num_workers=2, persistent_workers=persistent, return_indices=True)
        for epoch in (0, 1):
            ds.set_epoch(epoch)
            n = 0
            for x, y, idx in dl:
                want, wy = ds.get_batch(idx.tolist())
                assert np.array_equal(x.numpy(), want) and np.array_equal(y.numpy(), wy)
                n += len(idx)
            assert n == len(ds)
    ds.set_epoch(0)
    list(ds.loader(8))
    with pytest.warns(RuntimeWarning, match="set_epoch"):
        list(ds.loader(8))  # another loader, same epoch: no warning; this loader's second pass warns
        loader = ds.loader(8)
        list(loader)
        list(loader)


def test_rrc_runs_as_torch_ops(folders, tmp_path):
    folder = convert(str(tmp_path), "rrc", [], "hflip=0.5,rrc=24x20:scale=0.3-1,vflip=0.5")
    ds = ps.ShardDataset(folder)
    raw = ps.ShardDataset(folder, raw=True)
    idx = list(range(len(ds)))
    x, _ = ds.get_batch(idx)
    assert x.shape == (len(ds), 20, 24, 3)
    assert np.array_equal(raw.augment(torch.from_numpy(raw.get_batch(idx)[0]), idx).numpy(), x)
    assert np.array_equal(ds[3][0], x[3])
    steps = ds.online.draw(0, idx, (40, 44, 3))
    boxes = steps[1]
    area = boxes.bh * boxes.bw / (40 * 44)
    assert ((boxes.y >= 0) & (boxes.y + boxes.bh <= 40) & (boxes.x + boxes.bw <= 44)).all()
    assert (area >= 0.3 - 0.05).all() and (area <= 1).all() and len(set(area.tolist())) > 5
    # a box covering the whole image, resized to its own size, is the image itself
    from prepshards.online import Boxes, apply_steps_torch
    img = torch.from_numpy(raw.get_batch([0, 1])[0])
    same = Boxes(np.zeros(2, int), np.zeros(2, int), np.full(2, 40), np.full(2, 44), 40, 44)
    assert torch.equal(apply_steps_torch(img, [same]), img)


def test_crop_larger_than_stored_is_refused(folders, tmp_path):
    for fmt in ("h5", "png"):
        folder = convert(str(tmp_path), fmt, [] if fmt == "h5" else ["--format", "png"], "crop=48")
        man = os.path.join(folder, "manifest.json")
        with pytest.raises(ps.ShardError, match=re.escape(man) + ".*crop 48x48 is larger than the stored image"):
            ps.ShardDataset(folder)[0]  # HDF5: when the dataset is made; tar: at the read
        ps.ShardDataset(folder, raw=True)[0]


def test_unknown_online_op_and_newer_version_are_refused(folders, tmp_path):
    folder = str(tmp_path / "bad")
    subprocess.run(["cp", "-r", folders["h5"], folder], check=True)
    set_online(folder, "crop=24,jitter=0.4")
    with pytest.raises(ps.ManifestError, match="'jitter=0.4'.*upgrade prepshards"):
        ps.ShardDataset(folder)
    set_online(folder, "crop=24:center")
    with pytest.raises(ps.ManifestError, match="crop=24:center"):
        ps.ShardDataset(folder)
    set_online(folder, "crop=24")
    path = os.path.join(folder, "manifest.json")
    m = json.load(open(path))
    m["format_version"] = 4
    json.dump(m, open(path, "w"))
    with pytest.raises(ps.ManifestVersionError, match="upgrade prepshards"):
        ps.ShardDataset(folder)


def test_one_sample_draws_equal_batch_draws():
    from prepshards.online import Online, draw_window
    idx = np.arange(300)
    for text in ("crop=32x28:random,hflip=0.5,vflip=0.5", "vflip=0.3,crop=30,hflip=0.7,crop=20x10:random",
                 "hflip=1,crop=11x7"):
        o = Online(text, seed=(1 << 64) - 3, salt=7)
        (w,) = o.draw(4, idx, (40, 44, 3))
        for i in idx:
            assert draw_window(o, 4, int(i), (40, 44, 3)) == (
                int(w.y0[i]), int(w.x0[i]), w.h, w.w, bool(w.fy[i]), bool(w.fx[i])), (text, i)


def test_hflip_of_wider_types_and_dict_samples(folders):
    src = np.arange(4 * 8 * 3, dtype=np.uint16).reshape(4, 8, 3)
    dst = np.empty_like(src)
    _hflip_into(dst, src)
    assert np.array_equal(dst, src[:, ::-1])
    ds = ps.ShardDataset(folders["h5"])
    d = ps.ShardDataset(folders["h5"], fields=["data"])  # a list: samples come back as dicts
    assert isinstance(d[2][0], dict) and np.array_equal(d[2][0]["data"], ds[2][0])
    st = ps.ShardStream(folders["h5"], fields=["data"], yield_index=True)
    for x, _, g in st:
        assert np.array_equal(x["data"], ds[g][0])
