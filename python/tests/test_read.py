"""Every sample the reader returns equals what h5py / tarfile + PIL / wave / np.load return."""

import io
import json
import os
import struct
import subprocess
import sys
import zlib

import pytest

from conftest import CONVERSIONS, ROOT, h5_reference, missing, need, reference

np = need("numpy")
import prepshards as ps  # noqa: E402


def assert_same(got, want, what):
    assert isinstance(got, np.ndarray), what
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert np.array_equal(got, want), f"{what}: values differ"


def assert_matches_reference(ds, ref, what):
    """Every sample, label and key of ds equals the reference reader's."""
    assert len(ds) == len(ref) > 0
    keys = ds.keys
    labels = ds.labels
    for i, (fields, label, key) in enumerate(ref):
        sample, lab = ds[i]
        if len(fields) == 1:
            (want,) = fields.values()
            assert_same(sample, want, f"{what}[{i}]")
        else:
            assert isinstance(sample, dict) and sorted(sample) == sorted(fields), f"{what}[{i}]"
            for n, want in fields.items():
                assert_same(sample[n], want, f"{what}[{i}].{n}")
        assert lab == label == labels[i]
        assert keys[i] == key == ds.key(i)


@pytest.mark.parametrize("shard", sorted(CONVERSIONS), indirect=True)
def test_every_sample_matches_reference(shard):
    ds = ps.ShardDataset(shard)
    assert ds.format_version == 2 and ps.SUPPORTED_FORMAT_VERSION == 3  # 3: with an online_recipe
    assert ds.order in ("sorted", "shuffle")
    assert_matches_reference(ds, reference(shard), shard)


def test_classes_and_labels(shards):
    ds = ps.ShardDataset(shards["img_h5"])
    assert ds.classes == ["everyday", "science", "space"]
    assert set(ds.labels.tolist()) == {0, 1, 2}
    assert ps.ShardDataset(shards["npz_h5"]).classes is None
    tar = ps.ShardDataset(shards["img_png"])
    assert tar.classes == ds.classes
    assert set(tar.labels.tolist()) == {0, 1, 2}


def test_fields_selection(shards):
    ds = ps.ShardDataset(shards["npz_h5"], fields="npz/x")
    ref = list(h5_reference(shards["npz_h5"]))
    for i, (fields, _, _) in enumerate(ref):
        assert_same(ds[i][0], fields["npz/x"], f"npz/x[{i}]")
    ds = ps.ShardDataset(shards["npz_h5"], fields=["npz/y"])
    assert sorted(ds[0][0]) == ["npz/y"]
    with pytest.raises(KeyError, match="npz/nope"):
        ps.ShardDataset(shards["npz_h5"], fields="npz/nope")


def test_transform_and_manifest_path(shards):
    folder = shards["img_h5"]
    ds = ps.ShardDataset(os.path.join(folder, "manifest.json"), transform=lambda x: x[::2])
    x, _ = ds[3]
    assert x.shape == (16, 32, 3)
    assert ds.manifest.raw["format"] == "hdf5"


def test_no_hdf5_library_on_read_path(shards):
    # a fresh interpreter that cannot import h5py still reads HDF5 shards
    code = (
        "import sys; sys.modules['h5py'] = None\n"
        f"sys.path.insert(0, {os.path.join(ROOT, 'python')!r})\n"
        "import prepshards as ps\n"
        f"ds = ps.ShardDataset({shards['npy_ragged']!r})\n"
        "print(sum(ds[i][0].size for i in range(len(ds))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout) > 0


def test_works_without_torch(shards):
    code = (
        "import sys; sys.modules['torch'] = None\n"
        f"sys.path.insert(0, {os.path.join(ROOT, 'python')!r})\n"
        "import prepshards as ps\n"
        f"s = ps.ShardStream({shards['img_h5']!r}, yield_index=True, rank=0, world_size=1)\n"
        "print(len([g for _, _, g in s]))\n"
        f"print(sum(len(y) for _, y in ps.iter_batches({shards['img_h5']!r}, 5)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["24", "24"]


def test_offset_minus_one_falls_back_to_h5py(tmp_path):
    h5py = need("h5py")
    data = np.arange(5 * 4 * 3, dtype="f4").reshape(5, 4, 3)
    path = tmp_path / "shard-000000.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("data", data=data, chunks=(2, 4, 3))  # chunked: no single offset
        f.create_dataset("labels", data=np.arange(5, dtype="i8"))
    size = os.path.getsize(path)
    m = {"format": "hdf5", "shards": [{"file": "shard-000000.h5", "count": 5, "bytes": size, "datasets": [
        {"name": "data", "dtype": "float32", "shape": [5, 4, 3], "offset": -1, "size": data.nbytes},
        {"name": "labels", "dtype": "int64", "shape": [5], "offset": -1, "size": 40}]}]}
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    ds = ps.ShardDataset(tmp_path)
    for i in range(5):
        x, y = ds[i]
        assert_same(x, data[i], f"chunked[{i}]")
        assert y == i
    x, y = ds.get_batch([4, 0, 1])
    assert_same(x, data[[4, 0, 1]], "chunked batch")


# -- the PNG decoder beyond what prep writes -----------------------------------------


def _png(rows, width, height, colour, depth=8):
    def chunk(t, b):
        return struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b) & 0xFFFFFFFF)
    ihdr = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def _filter(img, bpp):
    """Encode each row with filter y % 5 (None, Sub, Up, Average, Paeth)."""
    h = img.shape[0]
    px = img.reshape(h, -1).astype(np.int64)
    out = bytearray()
    prior = np.zeros(px.shape[1], np.int64)
    for y in range(h):
        f = y % 5
        cur = px[y]
        left = np.concatenate([np.zeros(bpp, np.int64), cur[:-bpp]])
        ul = np.concatenate([np.zeros(bpp, np.int64), prior[:-bpp]])
        if f == 0:
            enc = cur
        elif f == 1:
            enc = cur - left
        elif f == 2:
            enc = cur - prior
        elif f == 3:
            enc = cur - (left + prior) // 2
        else:
            p = left + prior - ul
            pa, pb, pc = abs(p - left), abs(p - prior), abs(p - ul)
            enc = cur - np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, prior, ul))
        out.append(f)
        out += (enc & 0xFF).astype(np.uint8).tobytes()
        prior = cur
    return bytes(out)


@pytest.mark.parametrize("colour,ch", [(0, 1), (2, 3), (4, 2), (6, 4)])
def test_png_row_filters(colour, ch):
    Image = need("PIL.Image")
    rng = np.random.default_rng(colour)
    shape = (11, 9) if ch == 1 else (11, 9, ch)
    img = rng.integers(0, 256, shape, dtype=np.uint8)
    b = _png(_filter(img, ch), 9, 11, colour)
    got = ps.decode_png(b)
    assert_same(got, img, "filtered png")
    assert_same(got, np.asarray(Image.open(io.BytesIO(b))), "filtered png vs PIL")


def test_png_pil_written():
    Image = need("PIL.Image")
    y, x = np.mgrid[0:23, 0:31]
    base = ((x * 3 + y * 5) % 256).astype(np.uint8)
    for arr in (base, np.stack([base, base[::-1], base[:, ::-1]], -1)):
        for level in (0, 6, 9):
            b = io.BytesIO()
            Image.fromarray(arr).save(b, "PNG", compress_level=level)
            assert_same(ps.decode_png(b.getvalue()), np.asarray(Image.open(io.BytesIO(b.getvalue()))), f"PIL level {level}")


def test_float_wav_equals_hdf5(shards):
    # the same conversion as 2-channel float32 WAV in tar and in HDF5
    if "audio_wav_f32" not in shards:
        missing("ffmpeg (make deps installs it)")
    wav = ps.ShardDataset(shards["audio_wav_f32"])
    h5 = ps.ShardDataset(shards["audio_h5_f32"])
    assert len(wav) == len(h5) == 3
    for i in range(len(wav)):
        a, la = wav[i]
        b, lb = h5[i]
        assert_same(a, b, f"f32 wav[{i}]")
        assert a.dtype == np.float32 and a.shape == (8000, 2)
        assert la == lb and wav.key(i) == h5.key(i)


def test_shard_with_every_input_skipped(shards):
    # prep lists such a shard as {"file": "", "count": 0} and writes no file
    folder = shards["audio_wav_skipped"]
    m = json.load(open(os.path.join(folder, "manifest.json")))
    empty = [s for s in m["shards"] if s["file"] == ""]
    assert empty and all(s["count"] == 0 for s in empty)
    ds = ps.ShardDataset(folder)
    assert len(ds) == m["samples"] == sum(s["count"] for s in m["shards"]) > 0
    assert sum(1 for _ in ps.ShardStream(folder, shuffle=False)) == len(ds)
