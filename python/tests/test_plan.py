"""The read plan handed to shards on gs:// (vectorised) against the plain loops it replaced."""

import pytest

from conftest import need

np = need("numpy")
import prepshards as ps  # noqa: E402
from prepshards import _gcs  # noqa: E402


def plan_chunks_loop(ranges, c):
    refs, span = {}, {}
    for at, (k, off, n) in enumerate(ranges):
        if n <= 0:
            continue
        for ch in range(off // c, (off + n - 1) // c + 1):
            if (k, ch) not in refs:
                refs[k, ch] = 0
                span[k, ch] = (at, at)
            refs[k, ch] += min(off + n, (ch + 1) * c) - max(off, ch * c)
            span[k, ch] = (span[k, ch][0], at)
    return refs, span


@pytest.mark.parametrize("seed", range(6))
def test_plan_chunks_matches_the_loop(seed):
    rng = np.random.default_rng(seed)
    c = int(rng.choice([7, 64, 4096]))
    ranges = [(int(rng.integers(0, 5)), int(rng.integers(0, 20 * c)), int(rng.integers(-1, 3 * c)))
              for _ in range(int(rng.integers(1, 300)))]
    refs, span = _gcs.plan_chunks(ranges, c)
    want_refs, want_span = plan_chunks_loop(ranges, c)
    assert list(refs.items()) == list(want_refs.items()), "bytes per chunk, in first-touch order"
    assert span == want_span
    assert _gcs.plan_chunks([], c) == ({}, {})


def byte_ranges_loop(ss, runs, fields):
    ranges, opened = [], set()
    for k, a, b in runs:
        s = ss.shards[k]
        if k not in opened:
            opened.add(k)
            d = s.by_name.get("labels")
            if d is not None and d["offset"] >= 0:
                ranges.append((k, d["offset"], d["size"]))
            if any(f.ragged for f in s.field.values()):
                ranges.append((k, 0, int(s.info["bytes"])))
        for f in s.field.values():
            if (fields is None or f.name in fields) and not f.ragged and f.offset >= 0 and f.sample_nbytes:
                ranges.append((k, f.offset + a * f.sample_nbytes, (b - a) * f.sample_nbytes))
    return ranges


@pytest.mark.parametrize("name", ["img_h5", "audio_h5_ragged", "audio_h5_fixed"])
def test_byte_ranges_match_the_loop(shards, name):
    ss = ps.ShardDataset(shards[name]).shard_set
    rng = np.random.default_rng(1)
    for fields in (None, ["data"], ["nope"]):
        runs = []
        for _ in range(40):
            k = int(rng.integers(0, len(ss.shards)))
            a = int(rng.integers(0, ss.counts[k]))
            runs.append((k, a, int(rng.integers(a + 1, ss.counts[k] + 1))))
        got = [tuple(int(x) for x in r) for r in ss._byte_ranges(np.array(runs, np.int64), fields)]
        assert got == byte_ranges_loop(ss, runs, fields)
