"""Mix (weighted streams) and Concat (map-style): deterministic, resumable, DDP-correct."""

import collections

import pytest

from conftest import need

np = need("numpy")
import prepshards as ps  # noqa: E402


def mix(shards, w=1, r=0, seed=1, weights=(2, 1), **kw):
    a = ps.ShardStream(shards["img_h5"], rank=r, world_size=w, yield_index=True, seed=3, buffer_size=4, **kw)
    b = ps.ShardStream(shards["img_png"], rank=r, world_size=w, yield_index=True, seed=4, buffer_size=4, **kw)
    return ps.Mix([a, b], weights=list(weights), seed=seed, **({"batch_size": kw["batch_size"]} if "batch_size" in kw else {}))


def run(m):
    """(stream, index) per yielded sample, by comparing with each stream's plan."""
    plan = m.plan()
    got = [g for _, _, g in m]
    assert got == [g for _, g in plan]
    return plan


def test_deterministic_weighted_and_epoch_rule(shards):
    m = mix(shards)
    p0 = run(m)
    assert p0 == run(mix(shards)), "same seed, same mix"
    assert p0 != mix(shards, seed=2).plan()
    src = collections.Counter(i for i, _ in p0)
    # the epoch ends when a stream has nothing left: that stream yielded all of its share once
    done = [i for i in (0, 1) if src[i] == (24, 16)[i]]
    assert len(done) == 1, src
    for i in (0, 1):
        got = [g for j, g in p0 if j == i]
        assert len(got) == len(set(got)) and got == m.streams[i].plan().tolist()[:len(got)]
    # the next choice would have needed one more sample of the exhausted stream
    assert m._choices(len(p0) + 1)[len(p0)] == done[0]
    m.set_epoch(1)
    p1 = m.plan()
    assert p1 != p0
    big = [collections.Counter(i for i, _ in mix(shards, weights=(1, 9), seed=s).plan())[1] for s in range(8)]
    assert sum(big) > 0.7 * 8 * 16, "a heavy weight picks its stream more often"


@pytest.mark.parametrize("k", [0, 5, 13])
def test_resume_in_process(shards, k):
    m = mix(shards)
    m.set_epoch(2)
    full = m.plan()
    it = iter(m)
    head = [next(it)[2] for _ in range(k)]
    st = m.state_dict()
    t = mix(shards)
    t.load_state_dict(st)
    assert [g for _, _, g in t] == [g for _, g in full[k:]]
    assert head == [g for _, g in full[:k]]


def test_ddp_and_elastic(shards):
    """Two ranks: equal counts, no sample twice; then three ranks resume: nothing taken is repeated and
    the stream that ran out yields every sample not yet taken."""
    taken = collections.defaultdict(list)
    lens = set()
    state = None
    for r in range(2):
        m = mix(shards, w=2, r=r)
        lens.add(len(m))
        it = iter(m)
        for _ in range(6):
            next(it)
        plan = mix(shards, w=2, r=r).plan()[:6]
        for i, g in plan:
            taken[i].append(g)
        state = m.state_dict()
    assert len(lens) == 1
    rest = collections.defaultdict(list)
    lens = set()
    for r in range(3):
        m = mix(shards, w=3, r=r)
        m.load_state_dict(state)
        plan = m.plan()
        assert [g for _, _, g in m] == [g for _, g in plan]
        lens.add(len(plan))
        for i, g in plan:
            rest[i].append(g)
    assert len(lens) == 1, "every rank yields the same count"
    full = []
    for i, total in ((0, 24), (1, 16)):
        allv = taken[i] + rest[i]
        assert len(allv) == len(set(allv)), "no sample twice in an epoch"
        s = m.streams[i]
        if len(rest[i]) == 3 * len(s):  # ran out: every sample not yet taken came, less the remainder
            full.append(i)
            assert sorted(allv + s.dropped().tolist()) == list(range(total))
    assert full, "one stream ran out"


def test_through_dataloader_workers(shards):
    need("torch")
    from torch.utils.data import DataLoader
    m = mix(shards, batch_size=3)
    want = [g for _, g in m.plan()]
    got = [int(g) for _, _, b in DataLoader(m, batch_size=3, num_workers=2) for g in b]
    assert got == want
    head = []
    for n, (_, _, b) in enumerate(DataLoader(m, batch_size=3, num_workers=2)):
        head += b.tolist()
        if n == 2:
            break
    t = mix(shards, batch_size=3)
    t.load_state_dict(m.state_dict(samples_seen=len(head)))
    rest = [int(g) for _, _, b in DataLoader(t, batch_size=3, num_workers=2) for g in b]
    assert head + rest == want


def test_mix_refusals(shards):
    with pytest.raises(ValueError, match="weights"):
        mix(shards, weights=(1, 0))
    a = ps.ShardStream(shards["img_h5"], rank=0, world_size=2)
    b = ps.ShardStream(shards["img_png"], rank=1, world_size=2)
    with pytest.raises(ValueError, match="rank"):
        ps.Mix([a, b])
    with pytest.raises(ps.ShardError, match="weights"):
        mix(shards, weights=(1, 1)).load_state_dict(mix(shards).state_dict())


def test_concat(shards):
    a, b = ps.ShardDataset(shards["img_h5"]), ps.ShardDataset(shards["img_png"])
    c = ps.Concat([a, b])
    assert len(c) == 40 and c.source(30) == (1, 6)
    assert np.array_equal(c[30][0], b[6][0]) and c[30][1] == b[6][1] and c.key(3) == a.key(3)
    assert c.labels.tolist() == a.labels.tolist() + b.labels.tolist()
    idx = [39, 0, 1, 2, 25, 24, 23, 5]
    x, y = c.get_batch(idx)
    for j, i in enumerate(idx):
        assert np.array_equal(x[j], c[i][0]) and y[j] == c[i][1]
    need("torch")
    seen = []
    for x, y in c.loader(batch_size=7, shuffle=True, num_workers=2, seed=1):
        seen += [bytes(t.numpy().tobytes()) for t in x]
    assert sorted(seen) == sorted(bytes(c[i][0].tobytes()) for i in range(40))
