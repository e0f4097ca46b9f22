"""The Python reader reads the golden shards (testdata/golden, made by the Go
writers; see its README) as h5py / tarfile + PIL / wave / np.load do."""

import json
import os

import pytest

from conftest import TESTDATA, need, reference
from test_read import assert_matches_reference

np = need("numpy")
import prepshards as ps  # noqa: E402

GOLDEN = os.path.join(TESTDATA, "golden")
FOLDERS = sorted(d for d in os.listdir(GOLDEN) if os.path.isdir(os.path.join(GOLDEN, d)))


def test_there_are_goldens():
    kinds = {d.split("-", 1)[0] for d in FOLDERS}
    assert kinds == {"hdf5", "png", "wav"}, FOLDERS


@pytest.mark.parametrize("name", FOLDERS)
def test_golden(name):
    folder = os.path.join(GOLDEN, name)
    m = json.load(open(os.path.join(folder, "manifest.json")))
    ds = ps.ShardDataset(folder, verify=True)
    assert len(ds) == m["samples"]
    # version 3 is for manifests with an online_recipe; the goldens have none
    assert ds.format_version == m["format_version"] == 2 and ps.SUPPORTED_FORMAT_VERSION == 3
    assert ds.dataset_id == m["dataset_id"]
    assert_matches_reference(ds, reference(folder), name)
    # the samples are the suite's: labels 0, 1, -1, 0, ... and one key over 100 bytes
    assert ds.labels[:3].tolist() == [0, 1, -1]
    assert len(ds.key(1).encode()) > 100 and not ds.key(1).isascii()
