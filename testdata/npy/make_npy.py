#!/usr/bin/python3
"""Makes testdata/npy: small .npy/.npz files written by numpy itself.

Run with Debian's python3 (python3-numpy) from the repository root:

    /usr/bin/python3 testdata/npy/make_npy.py

ok/        files prep must read: every numeric dtype in both byte orders, C and
           Fortran order, header versions 1.0/2.0/3.0, 0-d and empty arrays,
           npz stored (np.savez) and deflated (np.savez_compressed).
bad/       files prep must refuse with a clear error: object (pickled),
           structured, string, datetime and extended-precision arrays, a
           truncated file and a file with bytes past the data.
expected.json
           for every ok file (and every npz member): dtype, shape and the
           sha256 of the native little-endian, C-order bytes, computed by
           numpy from np.load's result, so Go tests need no Python.

The output is deterministic (fixed seed; numpy writes no timestamps into
.npy files, and npz zip entries get a fixed date here).
"""
import hashlib
import io
import json
import os
import zipfile

import numpy as np

ROOT = os.path.dirname(os.path.abspath(__file__))
OK = os.path.join(ROOT, "ok")
BAD = os.path.join(ROOT, "bad")


def native_bytes(a):
    return np.ascontiguousarray(a.astype(a.dtype.newbyteorder("<"))).tobytes()


def describe(a):
    return {
        "dtype": a.dtype.name,
        "shape": list(a.shape),
        "sha256": hashlib.sha256(native_bytes(a)).hexdigest(),
    }


def values(rng, dtype, shape):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, size=shape).astype(dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=shape, dtype=dt.newbyteorder("="), endpoint=True).astype(dt)
    if dt.kind == "f":
        return (rng.standard_normal(size=shape) * 100).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(size=shape) + 1j * rng.standard_normal(size=shape)).astype(dt)
    raise ValueError(dtype)


def write(path, a, version=None):
    with open(path, "wb") as f:
        np.lib.format.write_array(f, a, version=version, allow_pickle=False)


def savez(path, arrays, compressed):
    """np.savez writes entries dated now; rewrite them with a fixed date so the
    file is byte-for-byte reproducible. Member order is kept as given."""
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    src = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    method = zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", method) as dst:
        for info in src.infolist():
            zi = zipfile.ZipInfo(info.filename, date_time=(2024, 1, 1, 0, 0, 0))
            zi.compress_type = method
            dst.writestr(zi, src.read(info.filename))


def make_ok(rng):
    os.makedirs(OK, exist_ok=True)
    files = {}
    # Every numeric dtype in every byte order numpy writes.
    for dt in ["b1", "i1", "u1"]:
        files["%s.npy" % dt] = (values(rng, "|" + dt, (3, 4)), None)
    for dt in ["i2", "i4", "i8", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16"]:
        for order, tag in [("<", "le"), (">", "be")]:
            files["%s_%s.npy" % (dt, tag)] = (values(rng, order + dt, (3, 4)), None)
    # Fortran order, alone and with a byte swap.
    files["f4_fortran_3d.npy"] = (np.asfortranarray(values(rng, "<f4", (2, 3, 5))), None)
    files["i2_fortran.npy"] = (np.asfortranarray(values(rng, "<i2", (4, 7))), None)
    files["c16_be_fortran.npy"] = (np.asfortranarray(values(rng, ">c16", (3, 2))), None)
    files["u1_fortran_4d.npy"] = (np.asfortranarray(values(rng, "|u1", (2, 3, 2, 3))), None)
    # Larger than one 32×32 tile of prep's 2-D transpose, with ragged edges.
    files["f4_fortran_70x45.npy"] = (np.asfortranarray(values(rng, "<f4", (70, 45))), None)
    files["u2_be_fortran_33x65.npy"] = (np.asfortranarray(values(rng, ">u2", (33, 65))), None)
    # Header versions.
    files["f8_v2.npy"] = (values(rng, "<f8", (2, 5)), (2, 0))
    files["i4_be_fortran_v3.npy"] = (np.asfortranarray(values(rng, ">i4", (3, 4))), (3, 0))
    # 0-d, 1-d and empty arrays.
    files["scalar_f8.npy"] = (np.array(3.25), None)
    files["scalar_bool.npy"] = (np.array(True), None)
    files["vector_i8.npy"] = (values(rng, "<i8", (9,)), None)
    files["empty_f4.npy"] = (np.zeros((0, 3), dtype="<f4"), None)
    files["empty_mid_u2.npy"] = (np.zeros((2, 0, 4), dtype=">u2"), None)
    files["empty_fortran_i4.npy"] = (np.asfortranarray(np.zeros((3, 0), dtype="<i4")), None)

    for name, (a, version) in files.items():
        write(os.path.join(OK, name), a, version)

    # npz: member order in the zip is y, x, a (not sorted) on purpose.
    members = {
        "y": values(rng, "<i8", (4,)),
        "x": values(rng, "<f4", (4, 3)),
        "a": np.asfortranarray(values(rng, ">f8", (4, 2))),
    }
    savez(os.path.join(OK, "arrays_stored.npz"), members, compressed=False)
    savez(os.path.join(OK, "arrays_deflated.npz"), members, compressed=True)
    savez(os.path.join(OK, "ragged.npz"), {"img": values(rng, "|u1", (2, 3, 3)), "mask": values(rng, "|b1", (5,))},
          compressed=True)

    expected = {}
    for name in sorted(os.listdir(OK)):
        path = os.path.join(OK, name)
        if name.endswith(".npz"):
            with np.load(path, allow_pickle=False) as z:
                expected[name] = {"members": {k: describe(z[k]) for k in z.files}}
        else:
            a = np.load(path, allow_pickle=False)
            expected[name] = describe(a)
    with open(os.path.join(ROOT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


def make_bad():
    os.makedirs(BAD, exist_ok=True)
    b = lambda n: os.path.join(BAD, n)
    # np.save pickles object arrays; prep must refuse them without unpickling.
    np.save(b("object.npy"), np.array([1, "a", None], dtype=object), allow_pickle=True)
    np.save(b("structured.npy"), np.zeros(3, dtype=[("a", "<f4"), ("b", "<i2")]))
    # A v3 (utf-8) header: a structured dtype with a non-ASCII field name.
    write(b("structured_utf8_v3.npy"), np.zeros(2, dtype=[("größe", "<f4")]), (3, 0))
    np.save(b("unicode.npy"), np.array(["ab", "c"]))
    np.save(b("bytes.npy"), np.array([b"ab", b"c"]))
    np.save(b("datetime.npy"), np.array(["2020-01-01", "2021-02-03"], dtype="M8[D]"))
    np.save(b("longdouble.npy"), np.zeros(2, dtype=np.longdouble))
    good = io.BytesIO()
    np.save(good, np.arange(12, dtype="<f4").reshape(3, 4))
    data = good.getvalue()
    with open(b("truncated_data.npy"), "wb") as f:
        f.write(data[:-5])
    with open(b("truncated_header.npy"), "wb") as f:
        f.write(data[:40])
    with open(b("extra_bytes.npy"), "wb") as f:
        f.write(data + b"\x00" * 8)


def main():
    rng = np.random.default_rng(20240101)
    make_ok(rng)
    make_bad()


if __name__ == "__main__":
    main()
