"""DataLoader workers, ranks, epochs and resume."""

import collections

import pytest

from conftest import need

np = need("numpy")
torch = need("torch")
import prepshards as ps  # noqa: E402
from torch.utils.data import DataLoader, Dataset, DistributedSampler  # noqa: E402


class Indexed(Dataset):
    def __init__(self, ds):
        self.ds = ds

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, i):
        x, y = self.ds[i]
        return x, y, i


def digest(a):
    return (str(a.dtype), tuple(a.shape), a.tobytes())


@pytest.mark.parametrize("name", ["img_h5", "img_png"])
def test_map_dataset_dataloader_workers(shards, name):
    ds = ps.ShardDataset(shards[name])
    ds[0]  # descriptors opened in the parent before the fork must not leak into workers
    seen = []
    for x, y, i in DataLoader(Indexed(ds), batch_size=5, shuffle=True, num_workers=2):
        for j in range(len(i)):
            k = int(i[j])
            assert np.array_equal(x[j].numpy(), ds[k][0]) and int(y[j]) == ds[k][1]
            seen.append(k)
    assert sorted(seen) == list(range(len(ds)))


def test_map_dataset_batched_loader(shards):
    ds = ps.ShardDataset(shards["img_h5"])
    want = collections.Counter(digest(ds[i][0]) for i in range(len(ds)))
    got = collections.Counter()
    labels = []
    for x, y in ds.loader(batch_size=7, shuffle=True, num_workers=2, seed=3):
        assert x.dtype == torch.uint8 and x.shape[1:] == (32, 32, 3)
        got.update(digest(a) for a in x.numpy())
        labels += y.tolist()
    assert got == want
    assert sorted(labels) == sorted(ds.labels.tolist())
    # sequential order equals per-sample reads
    i = 0
    for x, y in ds.loader(batch_size=5, num_workers=2):
        for j in range(len(y)):
            assert np.array_equal(x[j].numpy(), ds[i][0]) and int(y[j]) == ds[i][1]
            i += 1
    assert i == len(ds)


def test_distributed_sampler(shards):
    ds = ps.ShardDataset(shards["img_h5"])
    seen = []
    for r in range(2):
        sampler = DistributedSampler(ds, num_replicas=2, rank=r, shuffle=True, seed=1)
        for _, _, i in DataLoader(Indexed(ds), batch_size=4, sampler=sampler, num_workers=2):
            seen += i.tolist()
    assert sorted(seen) == list(range(len(ds)))


@pytest.mark.parametrize("name", ["img_h5", "img_png"])
def test_stream_dataloader_workers(shards, name):
    s = ps.ShardStream(shards[name], yield_index=True, batch_size=4, buffer_size=6)
    ds = ps.ShardDataset(shards[name])
    got = []
    for x, y, i in DataLoader(s, batch_size=4, num_workers=2):
        for j in range(len(i)):
            assert np.array_equal(x[j].numpy(), ds[int(i[j])][0])
        got += i.tolist()
    assert sorted(got) == list(range(len(ds)))
    assert got == s.plan().tolist()  # batch_size matches: the DataLoader yields the plan's order


def test_stream_in_process_equals_plan(shards):
    s = ps.ShardStream(shards["img_h5"], yield_index=True, seed=5)
    assert [i for _, _, i in s] == s.plan().tolist()


@pytest.mark.parametrize("pad", [False, True])
def test_two_ranks_cover_every_sample_once(shards, pad):
    folder = shards["img_h5"]  # 24 samples
    n = len(ps.ShardDataset(folder))
    for world in (2, 5):
        streams = [ps.ShardStream(folder, rank=r, world_size=world, pad=pad, yield_index=True, seed=9)
                   for r in range(world)]
        for epoch in (0, 1):
            parts = []
            for s in streams:
                s.set_epoch(epoch)
                parts.append([i for _, _, i in s])
            lens = {len(p) for p in parts}
            assert len(lens) == 1, "ranks must get equal sample counts"
            allv = sum(parts, [])
            if pad:
                assert lens == {-(-n // world)}
                assert set(allv) == set(range(n))
                assert len(allv) - n == (-n) % world  # the repeats fill the last rank
            else:
                dropped = streams[0].dropped().tolist()
                assert lens == {n // world}
                assert len(dropped) == n % world
                assert sorted(allv + dropped) == list(range(n)), "exactly once, remainder dropped"


def test_two_ranks_through_dataloader_workers(shards):
    folder = shards["img_png"]  # 16 samples
    got = []
    for r in range(2):
        s = ps.ShardStream(folder, rank=r, world_size=2, yield_index=True, batch_size=3)
        got += [int(i) for _, _, b in DataLoader(s, batch_size=3, num_workers=2) for i in b]
    assert sorted(got) == list(range(16))


def test_epochs_and_seeds(shards):
    folder = shards["img_h5"]
    a = ps.ShardStream(folder, seed=1, yield_index=True)
    b = ps.ShardStream(folder, seed=1, yield_index=True)
    c = ps.ShardStream(folder, seed=2, yield_index=True)
    e0 = [i for _, _, i in a]
    assert e0 == [i for _, _, i in b]
    assert e0 != [i for _, _, i in c]
    a.set_epoch(1)
    b.set_epoch(1)
    e1 = [i for _, _, i in a]
    assert e1 != e0 and sorted(e1) == sorted(e0)
    assert e1 == [i for _, _, i in b]
    # shuffle=False: file order every epoch
    s = ps.ShardStream(folder, shuffle=False, yield_index=True)
    s.set_epoch(4)
    assert [i for _, _, i in s] == list(range(24))


@pytest.mark.parametrize("k", [0, 1, 7, 10, 23, 24])
def test_resume_in_process(shards, k):
    folder = shards["img_h5"]
    s = ps.ShardStream(folder, seed=3, yield_index=True, rank=0, world_size=1)
    s.set_epoch(2)
    full = s.plan().tolist()
    it = iter(s)
    head = [next(it)[2] for _ in range(k)]
    state = s.state_dict()
    t = ps.ShardStream(folder, seed=3, yield_index=True, rank=0, world_size=1)
    t.load_state_dict(state)
    t.set_epoch(2)  # same epoch: keeps the position
    rest = [i for _, _, i in t]
    assert head + rest == full
    assert rest == full[k:]
    # the next epoch starts from its beginning
    t.set_epoch(3)
    assert len([1 for _ in t]) == 24


def test_resume_with_dataloader_workers(shards):
    folder = shards["img_png"]
    B = 3
    s = ps.ShardStream(folder, seed=4, yield_index=True, batch_size=B, rank=1, world_size=2, pad=True)
    full = [int(i) for _, _, b in DataLoader(s, batch_size=B, num_workers=2) for i in b]
    assert full == s.plan().tolist()
    head = []
    for n, (_, _, b) in enumerate(DataLoader(s, batch_size=B, num_workers=2)):
        head += b.tolist()
        if n == 1:
            break
    state = s.state_dict(samples_seen=len(head))
    t = ps.ShardStream(folder, seed=4, yield_index=True, batch_size=B, rank=1, world_size=2, pad=True)
    t.load_state_dict(state)
    rest = [int(i) for _, _, b in DataLoader(t, batch_size=B, num_workers=2) for i in b]
    assert head + rest == full


def test_resume_refuses_other_settings(shards):
    s = ps.ShardStream(shards["img_h5"], seed=1)
    t = ps.ShardStream(shards["img_h5"], seed=2)
    with pytest.raises(ps.ShardError, match="seed"):
        t.load_state_dict(s.state_dict())


def test_batched_loader_ring_keeps_previous_batch(shards):
    # the documented contract: a batch stays valid while the next one is taken
    ds = ps.ShardDataset(shards["img_h5"])
    for workers in (0, 2):
        prev, i, n = None, 0, 0
        for x, y in ds.loader(batch_size=2, num_workers=workers):
            if prev is not None:
                px, py, start = prev
                for j in range(len(py)):
                    assert np.array_equal(px[j].numpy(), ds[start + j][0]) and int(py[j]) == ds[start + j][1]
            prev = (x, y, i)
            i += len(y)
            n += 1
        assert i == len(ds) and n == 12
