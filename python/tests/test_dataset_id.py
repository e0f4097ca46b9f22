"""The reader exposes the manifest's dataset ID and checks it as prep does."""

import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import need, prep_bin

need("numpy")
import prepshards as ps  # noqa: E402
from prepshards.errors import ManifestError  # noqa: E402


@pytest.mark.parametrize("name", ["img_h5", "img_png", "audio_wav_skipped"])
def test_dataset_id_is_prep_s(shards, name):
    folder = shards[name]
    raw = json.load(open(os.path.join(folder, "manifest.json")))
    ds = ps.ShardDataset(folder)
    assert re.fullmatch(r"[0-9a-f]{64}", raw["dataset_id"])
    assert ds.dataset_id == raw["dataset_id"]
    out = subprocess.run([prep_bin(), "inspect", folder], capture_output=True, text=True, check=True).stdout
    assert f"dataset id: {raw['dataset_id']}\n" in out


def test_dataset_id_of_older_manifest_and_edited(shards, tmp_path):
    folder = str(tmp_path / "copy")
    shutil.copytree(shards["img_h5"], folder)
    path = os.path.join(folder, "manifest.json")
    raw = json.load(open(path))
    want = raw.pop("dataset_id")
    json.dump(raw, open(path, "w"))
    # a manifest written before the field: the ID is computed the same way
    assert ps.ShardDataset(folder).dataset_id == want
    raw["dataset_id"] = "0" * 64
    json.dump(raw, open(path, "w"))
    assert ps.ShardDataset(folder).dataset_id == "0" * 64
    with pytest.raises(ManifestError, match="the manifest was edited"):
        ps.ShardDataset(folder, verify=True)
