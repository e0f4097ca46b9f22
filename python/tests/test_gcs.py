"""Shards on gs://, read from fake-gcs-server (tests/gcsserver, started here) through the chunk cache."""

import json
import os
import shutil
import subprocess
import time
import urllib.request

import pytest

from conftest import ROOT, missing, need

np = need("numpy")
import prepshards as ps  # noqa: E402


@pytest.fixture(scope="session")
def gcsserver(tmp_path_factory):
    """The test server binary, built once per session (a few seconds once the Go build cache is warm)."""
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if not os.path.exists(go):
        missing("the go tool (to build python/tests/gcsserver)")
    out = str(tmp_path_factory.mktemp("gcs") / "gcsserver")
    env = dict(os.environ, GOEXPERIMENT=os.environ.get("GOEXPERIMENT", "simd"))
    p = subprocess.run([go, "build", "-o", out, "./python/tests/gcsserver"], cwd=ROOT, env=env,
                       capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(f"go build gcsserver failed:\n{p.stderr}")
    return out


class Server:
    def __init__(self, binary, folders, args=()):
        # one bucket "b"; each folder under its own prefix: stage them in one tree
        self.root = folders.pop("_root")
        for name, folder in folders.items():
            shutil.copytree(folder, os.path.join(self.root, name))
        self.p = subprocess.Popen([binary, "-dir", self.root, "-bucket", "b", *args],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.url = self.p.stdout.readline().strip()
        assert self.url.startswith(("http://", "https://")), "gcsserver did not start"

    def upload(self, name, data, encoding=""):
        q = f"&contentEncoding={encoding}" if encoding else ""
        req = urllib.request.Request(f"{self.url}/upload/storage/v1/b/b/o?uploadType=media&name={name}{q}",
                                     data=data, method="POST")
        with urllib.request.urlopen(req) as r:
            r.read()

    def stop(self):
        self.p.kill()
        self.p.wait()


@pytest.fixture
def serve(gcsserver, tmp_path, monkeypatch):
    started = []
    monkeypatch.setenv("PREPSHARDS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PREPSHARDS_GCS_CHUNK", "4096")  # many chunks per shard
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)

    def start(folders, *args):
        s = Server(gcsserver, dict(folders, _root=str(tmp_path / f"srv{len(started)}")), args)
        started.append(s)
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", s.url)
        return s
    yield start
    for s in started:
        s.stop()


def takes_o_direct(folder):
    """Whether the file system under folder takes O_DIRECT (tmpfs before Linux 6.6 does not)."""
    from prepshards import _gcs
    try:
        os.close(os.open(os.path.join(folder, ".o_direct_probe"), os.O_WRONLY | os.O_CREAT | _gcs._O_DIRECT))
        return True
    except OSError:
        return False


def settled(cache, timeout=10.0):
    """Wait until the fetches writing into the cache folder are done (a chunk is handed to
    its reader before it is written, so an epoch can end first): no .lock or .tmp left."""
    busy = settle(lambda: any(f.endswith((".lock", ".tmp")) for _, _, fs in os.walk(cache) for f in fs),
                  lambda b: not b, timeout)
    assert busy is not None, f"fetches into {cache} still running after {timeout} s"


def settle(measure, ok, timeout=5.0):
    """Measure until ok(measure()) holds or timeout passes: what it last measured, or None."""
    deadline = time.time() + timeout
    while True:
        got = measure()
        if ok(got):
            return got
        if time.time() > deadline:
            return None
        time.sleep(0.02)


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def same_as_local(url, local):
    r, l_ = ps.ShardDataset(url), ps.ShardDataset(local)
    assert len(r) == len(l_) and r.keys == l_.keys and r.labels.tolist() == l_.labels.tolist()
    for i in range(len(r)):
        assert np.array_equal(r[i][0], l_[i][0]) and r[i][1] == l_[i][1]
    a = ps.ShardStream(url, yield_index=True, seed=2, buffer_size=5)
    b = ps.ShardStream(local, yield_index=True, seed=2, buffer_size=5)
    got = [(g, x.tobytes()) for x, _, g in a]
    assert got == [(g, x.tobytes()) for x, _, g in b]
    x = [(d.copy(), y.copy()) for d, y in ps.BatchReader(url, 5, shuffle=True, seed=1)]
    w = [(d.copy(), y.copy()) for d, y in ps.BatchReader(local, 5, shuffle=True, seed=1)]
    assert len(x) == len(w) and all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(x, w))
    return r


def test_reads_equal_local(shards, serve, tmp_path, monkeypatch):
    monkeypatch.setenv("PREPSHARDS_CACHE_BYTES", str(48 << 10))  # smaller than one shard: eviction works
    serve({"h5": shards["img_h5"], "png": shards["img_png"]})
    r = same_as_local("gs://b/h5", shards["img_h5"])
    same_as_local("gs://b/png/manifest.json", shards["img_png"])
    stats = r.shard_set.files.stats()
    assert stats["evicted"] > 0
    used = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(tmp_path / "cache") for f in fs)
    assert used <= (48 << 10) + 32 * 4096, "the cache stays near its limit (plus the chunks in flight)"
    assert r.format == "hdf5" and r.manifest.path == "gs://b/h5/manifest.json"
    v = ps.ShardDataset("gs://b/h5", verify=True)  # sha256 of every shard, read from the bucket
    assert len(v) == 24


def test_listing_in_pages(shards, serve, monkeypatch):
    """A listing longer than a page: GCS pages with nextPageToken; fake-gcs-server cuts at
    maxResults without one, and the listing goes on from the last name."""
    from prepshards import _gcs
    monkeypatch.setattr(_gcs, "_PAGE", 2)
    serve({"h5": shards["img_h5"]})
    names = sorted(os.listdir(shards["img_h5"]))
    assert len(names) > 4
    got = _gcs.client().list("b", "h5/")
    assert sorted(got) == [f"h5/{n}" for n in names]
    assert [v[0] for _, v in sorted(got.items())] == [os.path.getsize(os.path.join(shards["img_h5"], n))
                                                      for n in names]
    same_as_local("gs://b/h5", shards["img_h5"])


def test_gzip_stored_shard_refused(shards, serve):
    """A shard uploaded gzip-compressed (gsutil cp -Z) is served whole and decompressed,
    ignoring byte ranges: refused at open, naming it and the fix."""
    import gzip
    srv = serve({"h5": shards["img_h5"]})
    name = sorted(f for f in os.listdir(shards["img_h5"]) if f.endswith(".h5"))[1]
    srv.upload(f"h5/{name}", gzip.compress(read_file(os.path.join(shards["img_h5"], name))), encoding="gzip")
    with pytest.raises(ps.ShardIOError, match=rf"gs://b/h5/{name}: stored gzip-compressed .*upload the shards "
                       r"without compression"):
        ps.ShardDataset("gs://b/h5")


def test_https(shards, serve, tmp_path, monkeypatch):
    """GCS is HTTPS: the reader checks the server's certificate (here the test server's,
    trusted through SSL_CERT_FILE) and refuses one it cannot check, naming the object."""
    cert = tmp_path / "server.pem"
    srv = serve({"h5": shards["img_h5"]}, "-tls", str(cert))
    assert srv.url.startswith("https://127.0.0.1:")
    from prepshards import _gcs
    with pytest.raises(ps.ShardIOError, match=r"gs://b/h5/manifest.json: the server's certificate \(127.0.0.1:\d+\) "
                       r"could not be checked \(.+\); install the CA certificates .*SSL_CERT_FILE"):
        ps.ShardDataset("gs://b/h5")
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    _gcs.reset_clients()
    same_as_local("gs://b/h5", shards["img_h5"])
    assert _gcs.client().https


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_faults_503_resets_stalls(shards, serve, tmp_path, monkeypatch, tls):
    """Over HTTPS too, where the reader decrypts what it takes from the socket itself
    (_TLSSocket): a connection cut mid-body or stalled is retried, and the others are kept
    alive from request to request."""
    from prepshards import _gcs
    monkeypatch.setenv("PREPSHARDS_GCS_TIMEOUT", "0.3")
    monkeypatch.setenv("PREPSHARDS_GCS_CHUNK", str(16 << 10))
    extra = ["-tls", str(tmp_path / "server.pem")] if tls else []
    serve({"h5": shards["img_h5"], "png": shards["img_png"]},
          "-fail-every", "3", "-reset-every", "4", "-stall-every", "11", "-stall", "3s", *extra)
    if tls:
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "server.pem"))
        _gcs.reset_clients()
    handshakes = []
    orig = _gcs._TLSSocket.__init__
    monkeypatch.setattr(_gcs._TLSSocket, "__init__", lambda self, *a: handshakes.append(1) or orig(self, *a))
    t0 = time.time()
    same_as_local("gs://b/h5", shards["img_h5"])
    same_as_local("gs://b/png", shards["img_png"])
    assert time.time() - t0 < 30
    c = _gcs.client()
    retried = c.retried
    assert retried[503] and retried[429] and retried["timeout"] and retried["connection"] + retried["short"], retried
    assert c.https == tls
    if tls:  # a new connection for each one cut (and the threads' first), not one per request
        assert 0 < len(handshakes) < c.requests - retried["timeout"] - retried["connection"] - retried["short"], \
            (len(handshakes), c.requests, retried)


def test_gives_up_naming_the_object(shards, serve, monkeypatch):
    monkeypatch.setenv("PREPSHARDS_GCS_RETRIES", "2")
    serve({"h5": shards["img_h5"]}, "-fail-every", "1")
    with pytest.raises(ps.ShardIOError, match=r"gs://b/h5/manifest.json: GCS did not answer after 3 tries"):
        ps.ShardDataset("gs://b/h5")
    with pytest.raises(ps.ManifestNotFoundError, match="gs://b/nope/manifest.json"):
        monkeypatch.setenv("PREPSHARDS_GCS_RETRIES", "6")
        serve({"h5": shards["img_h5"]})
        ps.ShardDataset("gs://b/nope")


def test_dataloader_workers_and_replaced_object(shards, serve):
    torch = need("torch")
    from torch.utils.data import DataLoader
    srv = serve({"png": shards["img_png"]})
    s = ps.ShardStream("gs://b/png", yield_index=True, batch_size=3, rank=1, world_size=2)
    got = [int(g) for _, _, b in DataLoader(s, batch_size=3, num_workers=2) for g in b]
    assert got == s.plan().tolist()
    m = json.load(open(os.path.join(shards["img_png"], "manifest.json")))
    name = m["shards"][0]["file"]
    srv.upload(f"png/{name}", read_file(os.path.join(shards["img_png"], name)))  # a new generation
    with pytest.raises(ps.ShardChangedError, match=f"gs://b/png/{name}: the shards changed under the reader"):
        list(s)
    assert torch is not None


def test_mix_and_concat_over_gs(shards, serve):
    """Mix and Concat take streams and datasets on gs:// (HDF5 and tar, beside a local one):
    the same samples in the same order as over the local folders, and a Mix resumed
    from its state_dict at another world size goes on as the local one does."""
    serve({"h5": shards["img_h5"], "png": shards["img_png"]})

    def mix(h5, png, rank=0, world=1):
        a = ps.ShardStream(h5, rank=rank, world_size=world, yield_index=True, seed=3, buffer_size=4)
        b = ps.ShardStream(png, rank=rank, world_size=world, yield_index=True, seed=4, buffer_size=4)
        return ps.Mix([a, b], weights=[2, 1], seed=1)
    remote, local = mix("gs://b/h5", "gs://b/png"), mix(shards["img_h5"], shards["img_png"])
    got = [(g, x.tobytes()) for x, _, g in remote]
    assert got and got == [(g, x.tobytes()) for x, _, g in local]
    for m in (remote, local):
        m.set_epoch(1)
    it = iter(remote)
    for _ in range(7):
        next(it)
    st = remote.state_dict()
    tails = []
    for path in (("gs://b/h5", "gs://b/png"), (shards["img_h5"], shards["img_png"])):
        tail = []
        for r in range(2):  # resumed by 2 ranks
            m = mix(*path, rank=r, world=2)
            m.load_state_dict(st)
            tail += [(g, x.tobytes()) for x, _, g in m]
        tails.append(sorted(tail))
    assert tails[0] and tails[0] == tails[1]
    c = ps.Concat([ps.ShardDataset("gs://b/png"), ps.ShardDataset(shards["img_h5"])])
    c_local = ps.Concat([ps.ShardDataset(shards["img_png"]), ps.ShardDataset(shards["img_h5"])])
    assert len(c) == len(c_local) == 40 and c.labels.tolist() == c_local.labels.tolist()
    idx = [39, 0, 15, 16, 3]
    x, y = c.get_batch(idx)
    x2, y2 = c_local.get_batch(idx)
    assert np.array_equal(x, x2) and np.array_equal(y, y2)


def test_gloo_ranks_over_gs(shards, serve, tmp_path):
    """torch.distributed ranks (gloo) with DataLoader workers read gs:// as they read the
    folder, and resume at another world size the same way."""
    from test_elastic import gloo_resume
    serve({"h5": shards["img_h5"]})
    (tmp_path / "gs").mkdir()
    (tmp_path / "local").mkdir()
    remote = gloo_resume("gs://b/h5", tmp_path / "gs")
    local = gloo_resume(shards["img_h5"], tmp_path / "local")
    assert [[r["got"] for r in run] for run in remote] == [[r["got"] for r in run] for run in local]


@pytest.mark.parametrize("direct", ["0", "1"])
def test_readers_dropped_release_files(shards, serve, monkeypatch, direct):
    """A new reader each epoch, the old one dropped without close(): its chunk descriptors,
    fetch threads and their connections go with it (they piled up, 64 descriptors and up to
    16 sockets a reader, until the process ran out of files)."""
    import gc
    import threading
    monkeypatch.setenv("PREPSHARDS_GCS_DIRECT", direct)
    monkeypatch.setenv("PREPSHARDS_GCS_CHUNK", str(16 << 10))
    serve({"h5": shards["img_h5"], "png": shards["img_png"]})

    def fds():
        return len(os.listdir("/proc/self/fd"))
    counts = []
    for e in range(4):
        for url in ("gs://b/h5", "gs://b/png"):
            assert sum(1 for _ in ps.ShardStream(url, seed=e)) > 0
            ps.ShardDataset(url)[3]
        gc.collect()
        counts.append((fds(), threading.active_count()))
    # the last readers' fetch threads leave once their fetch is done
    last = settle(lambda: (gc.collect(), fds(), threading.active_count())[1:],
                  lambda c: c[0] <= counts[0][0] + 2 and c[1] <= counts[0][1])
    assert last, counts


@pytest.mark.parametrize("workers", [0, 2])
def test_map_style_batches_fetch_side_by_side(shards, serve, monkeypatch, workers):
    """A map-style batch (get_batch, loader) names its samples before reading them: their
    chunks are fetched side by side, not one after another as the reads reach them, and
    none is held in memory (scattered reads go through the page cache, direct mode too)."""
    import threading
    from prepshards import _gcs
    monkeypatch.setenv("PREPSHARDS_GCS_DIRECT", "1")
    monkeypatch.setenv("PREPSHARDS_GCS_AHEAD", "4")  # unplanned reads prefetch 4 // 4 = 1 neighbour
    serve({"h5": shards["img_h5"]}, "-delay", "50ms")
    ds, local = ps.ShardDataset("gs://b/h5"), ps.ShardDataset(shards["img_h5"])
    if workers:  # the loader's workers: same batches as over the local folder
        got = [(x.clone(), y.clone()) for x, y in ds.loader(batch_size=5, shuffle=True, seed=2,
                                                             num_workers=workers)]
        want = [(x.clone(), y.clone()) for x, y in local.loader(batch_size=5, shuffle=True, seed=2,
                                                                num_workers=workers)]
        assert len(got) == len(want) == 5
        assert all((a[0] == b[0]).all() and (a[1] == b[1]).all() for a, b in zip(got, want))
        return
    now, most = [0], [0]
    lock = threading.Lock()
    orig = _gcs._ReadState._fetch

    def fetch(self, ch):
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        try:
            return orig(self, ch)
        finally:
            with lock:
                now[0] -= 1
    monkeypatch.setattr(_gcs._ReadState, "_fetch", fetch)
    idx = [0, 23, 11, 5, 17, 2, 20, 8]  # scattered over the 3 shards
    x, y = ds.get_batch(idx)
    x2, y2 = local.get_batch(idx)
    assert np.array_equal(x, x2) and np.array_equal(y, y2)
    assert most[0] >= 3, f"at most {most[0]} chunk fetched at once"
    st = ds.shard_set.files.stats()
    assert st["from_memory"] == 0 and st["held"] == 0, st


def test_readers_close_with_with(shards, serve):
    """Every reader is a context manager: at the end of ``with`` its chunk descriptors and
    fetch threads are gone, as after close()."""
    import threading
    serve({"h5": shards["img_h5"], "png": shards["img_png"]})
    before = (len(os.listdir("/proc/self/fd")), threading.active_count())
    makers = [lambda: ps.ShardDataset("gs://b/h5"), lambda: ps.ShardStream("gs://b/png", seed=1),
              lambda: ps.BatchReader("gs://b/h5", 4),
              lambda: ps.Mix([ps.ShardStream("gs://b/h5"), ps.ShardStream("gs://b/png")], weights=[1, 1]),
              lambda: ps.Concat([ps.ShardDataset("gs://b/h5"), ps.ShardDataset("gs://b/png")])]
    for make in makers:
        with make() as r:
            if isinstance(r, (ps.ShardDataset, ps.Concat)):
                n = len([r[i] for i in range(len(r))])
            else:
                n = sum(1 for _ in r)
            assert n > 0
            sets = [r.shard_set] if hasattr(r, "shard_set") else []
        assert all(s.files._state is None for s in sets)
        # the fetch threads leave once their fetch is done, and their connections with them
        assert settle(lambda: (len(os.listdir("/proc/self/fd")), threading.active_count()),
                      lambda c: c[0] <= before[0] + 2 and c[1] <= before[1]), make


def test_listing_beside_the_manifest_used_once_and_fresh(shards, serve, monkeypatch):
    """A reader lists its shards while it reads the manifest (one round trip, not two): that
    listing records the shards' identity at the start, once, and only while it is fresh;
    every later check lists anew."""
    from prepshards import _gcs
    serve({"h5": shards["img_h5"]})
    calls = []
    orig = _gcs.Client.list
    monkeypatch.setattr(_gcs.Client, "list", lambda self, b, p: calls.append(p) or orig(self, b, p))
    ds = ps.ShardDataset("gs://b/h5")
    assert calls == ["h5/"], "one listing, taken beside the manifest"
    ds.check_unchanged()
    assert calls == ["h5/", "h5/"], "a later check lists again"
    assert not _gcs._early, "the early listing was used up"
    monkeypatch.setattr(_gcs, "_EARLY_FOR", -1.0)  # too old by the time the shards are looked at
    calls.clear()
    ps.ShardDataset("gs://b/h5")
    assert calls == ["h5/", "h5/"], "a stale early listing is not used"


@pytest.mark.parametrize("direct", ["1", "0"])
def test_first_epoch_from_fetch_buffers(shards, serve, tmp_path, monkeypatch, direct):
    """Direct: a process reading its plan alone serves the chunks from the buffers they were
    fetched (or, from the cache, read) into, and writes them to the cache past the page
    cache (O_DIRECT); the buffers are reused, bounded, and all let go when the epoch's
    planned reads are done. The cache files hold the objects' exact bytes."""
    from prepshards import _gcs
    monkeypatch.setenv("PREPSHARDS_GCS_DIRECT", direct)
    monkeypatch.setenv("PREPSHARDS_GCS_CHUNK", str(16 << 10))
    monkeypatch.setenv("PREPSHARDS_GCS_AHEAD", "6")
    puts = []
    orig = _gcs.Cache._put_direct
    monkeypatch.setattr(_gcs.Cache, "_put_direct", lambda self, *a: puts.append(orig(self, *a)) or puts[-1])
    serve({"h5": shards["img_h5"]})
    remote = ps.ShardStream("gs://b/h5", yield_index=True, seed=3, buffer_size=7, interleave=3)
    local = ps.ShardStream(shards["img_h5"], yield_index=True, seed=3, buffer_size=7, interleave=3)
    assert [(g, x.tobytes(), y) for x, y, g in remote] == [(g, x.tobytes(), y) for x, y, g in local]
    settled(os.environ["PREPSHARDS_CACHE"])
    st = remote._ss.files.stats()
    if direct == "1":
        # every planned chunk written with O_DIRECT, where the file system takes it
        assert puts and all(puts) if takes_o_direct(tmp_path) else not any(puts)
        assert st["from_memory"] > 0 and st["from_file"] == 0 and st["held"] == 0, st
        assert st["buffers"] <= 6 + 3 + 1, f"prefetch (6) and the 3 lanes being read bound the buffers: {st}"
    else:
        assert not puts and st["from_memory"] == 0, st
    state, c, files = remote._ss.files._state, 16 << 10, 0
    for k, s in enumerate(remote._ss.manifest.shards):
        want = read_file(os.path.join(shards["img_h5"], os.path.basename(s["path"])))
        for i in range(-(-len(want) // c)):
            p = state.cache.path(state.key(k), i)
            if os.path.exists(p):
                files += 1
                assert read_file(p) == want[i * c:(i + 1) * c], (s["path"], i)
    assert files >= len(remote._ss.manifest.shards)
    # a second epoch reads the cache files (past the page cache too, with O_DIRECT): the same
    # samples again, nothing fetched but a chunk whose file was cut short
    fetched = st["fetched"]
    if direct == "1":
        p = state.cache.path(state.key(0), 0)
        os.truncate(p, 100)
    remote.set_epoch(0)
    assert [(g, x.tobytes(), y) for x, y, g in remote] == [(g, x.tobytes(), y) for x, y, g in local]
    settled(os.environ["PREPSHARDS_CACHE"])
    st2 = remote._ss.files.stats()
    if direct == "1":
        assert st2["fetched"] == fetched + 1 and st2["loaded"] >= files - 1, st2
        assert os.path.getsize(p) == 16 << 10
        assert state.window == 6, "chunks loaded from the cache widen the prefetch as fetched ones do"
    else:
        assert st2["fetched"] == fetched and st2["loaded"] == 0, st2


def test_direct_batches_split_shards(shards, serve, monkeypatch):
    """BatchReader's batches cut shards in two: a chunk's planned bytes, not its reads, say
    when it is done, so no chunk is let go before its last batch (and read from the disk)."""
    monkeypatch.setenv("PREPSHARDS_GCS_DIRECT", "1")
    monkeypatch.setenv("PREPSHARDS_GCS_CHUNK", str(64 << 10))
    serve({"h5": shards["img_h5"]})
    r = ps.BatchReader("gs://b/h5", 5, shuffle=True, seed=4)
    got = [(d.copy(), y.copy()) for d, y in r]
    want = [(d.copy(), y.copy()) for d, y in ps.BatchReader(shards["img_h5"], 5, shuffle=True, seed=4)]
    assert len(got) == len(want) and all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
                                         for a, b in zip(got, want))
    st = r._ss.files.stats()
    assert st["from_memory"] > 0 and st["from_file"] == 0 and st["held"] == 0, st


@pytest.mark.parametrize("direct", ["1", "0"])
def test_cache_disk_full(shards, serve, monkeypatch, direct):
    """A cache that cannot be written (full disk): chunks held in memory are read on, with one
    warning; a chunk that was to be read from its file is an error naming the cache and the fix."""
    import builtins
    import errno
    from prepshards import _gcs
    monkeypatch.setenv("PREPSHARDS_GCS_DIRECT", direct)

    def full(*a, **kw):
        raise OSError(errno.ENOSPC, "No space left on device")
    real_open = builtins.open

    def open_full(f, mode="r", *a, **kw):
        return full() if "w" in mode else real_open(f, mode, *a, **kw)
    monkeypatch.setattr(_gcs.Cache, "_put_direct", full)
    monkeypatch.setattr(_gcs, "open", open_full, raising=False)
    serve({"h5": shards["img_h5"]})
    if direct == "1":
        with pytest.warns(UserWarning, match=r"cannot write a chunk to the cache \(No space left on device\); free "
                          r"space there.*reading goes on from memory") as w:
            got = [(g, x.tobytes()) for x, _, g in ps.ShardStream("gs://b/h5", yield_index=True, seed=1)]
        mine = [x for x in w if "cache" in str(x.message)]
        assert len(mine) == 1, "warned once"
        want = [(g, x.tobytes()) for x, _, g in ps.ShardStream(shards["img_h5"], yield_index=True, seed=1)]
        assert got == want
    else:
        with pytest.raises(ps.ShardIOError, match=r"/cache: cannot write a chunk to the cache \(No space left on "
                           r"device\); free space there, lower PREPSHARDS_CACHE_BYTES or point PREPSHARDS_CACHE"):
            list(ps.ShardStream("gs://b/h5", seed=1))
    leftovers = [f for _, _, fs in os.walk(os.environ["PREPSHARDS_CACHE"]) for f in fs if f.endswith(".tmp")]
    assert not leftovers


def test_cache_unwritable(shards, serve, tmp_path, monkeypatch):
    """A cache folder that cannot be made, or written in, is an error naming it and the fix."""
    from prepshards import _gcs
    serve({"h5": shards["img_h5"]})
    (tmp_path / "file").write_bytes(b"")
    monkeypatch.setenv("PREPSHARDS_CACHE", str(tmp_path / "file" / "cache"))
    with pytest.raises(ps.ShardIOError, match=r"/file/cache: the chunk cache cannot be written there \(Not a "
                       r"directory\); point PREPSHARDS_CACHE at a writable folder"):
        list(ps.ShardStream("gs://b/h5"))
    monkeypatch.setenv("PREPSHARDS_CACHE", str(tmp_path / "ro"))
    real = os.open

    def no_locks(path, flags, *a):
        if str(path).endswith(".lock"):
            raise PermissionError(13, "Permission denied")
        return real(path, flags, *a)
    monkeypatch.setattr(_gcs.os, "open", no_locks)
    with pytest.raises(ps.ShardIOError, match=r"/ro: the chunk cache cannot be written there \(Permission "
                       r"denied\); point PREPSHARDS_CACHE"):
        list(ps.ShardStream("gs://b/h5"))
    # a filled cache shared read-only: chunks cannot be marked recently used; reads go on
    monkeypatch.setattr(_gcs.os, "open", real)
    monkeypatch.setenv("PREPSHARDS_CACHE", str(tmp_path / "shared"))
    want = [x.tobytes() for x, _ in ps.ShardStream(shards["img_h5"], seed=1)]
    assert [x.tobytes() for x, _ in ps.ShardStream("gs://b/h5", seed=1)] == want

    def refuse(*a, **kw):
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(_gcs.os, "utime", refuse)
    for direct in ("0", "1"):
        monkeypatch.setenv("PREPSHARDS_GCS_DIRECT", direct)
        assert [x.tobytes() for x, _ in ps.ShardStream("gs://b/h5", seed=1)] == want


def test_cache_put_direct(tmp_path):
    """O_DIRECT writes whole 4 KiB blocks: a chunk of another size is cut back to its bytes."""
    import mmap
    from prepshards import _gcs
    buf = mmap.mmap(-1, 16384, flags=mmap.MAP_PRIVATE)
    buf[:] = os.urandom(16384)
    cache = _gcs.Cache(str(tmp_path / "c"), 1 << 30)
    takes = takes_o_direct(tmp_path)
    for n in (10000, 16384, 1):
        cache.put("obj", n, buf, n, direct=True)
        assert read_file(cache.path("obj", n)) == buf[:n]
    assert cache.direct == takes


def test_evict_removes_what_killed_processes_left(tmp_path):
    """A process killed mid-write leaves .tmp files and .lock files, outside the size limit:
    eviction removes those older than _STALE and leaves the fresh ones (being written)."""
    from prepshards import _gcs
    cache = _gcs.Cache(str(tmp_path / "c"), 1 << 30)
    buf = bytearray(4096)
    cache.put("obj", 0, buf, 4096)
    d = os.path.dirname(cache.path("obj", 0))
    old, new = time.time() - _gcs._STALE - 5, time.time()
    for name, t in (("00000001.99.1.tmp", old), ("00000002.lock", old), ("00000003.99.2.tmp", new),
                    ("00000004.lock", new)):
        with open(os.path.join(d, name), "wb") as f:
            f.write(b"x" * 100)
        os.utime(os.path.join(d, name), (t, t))
    cache.evict()
    assert sorted(os.listdir(d)) == ["00000000", "00000003.99.2.tmp", "00000004.lock"]


def test_no_o_direct_falls_back(shards, serve, monkeypatch):
    """Where the cache's file system refuses O_DIRECT (tmpfs on older kernels, some FUSE),
    chunks are written as usual and still read from memory."""
    import errno
    from prepshards import _gcs
    real = os.open

    def no_direct(path, flags, *a):
        if flags & _gcs._O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(path, flags, *a)
    monkeypatch.setattr(_gcs.os, "open", no_direct)
    monkeypatch.setenv("PREPSHARDS_GCS_DIRECT", "1")
    serve({"h5": shards["img_h5"]})
    r = ps.BatchReader("gs://b/h5", 5)
    got = [(d.copy(), y.copy()) for d, y in r]
    want = [(d.copy(), y.copy()) for d, y in ps.BatchReader(shards["img_h5"], 5)]
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(got, want))
    assert len(got) == len(want)
    st = r._ss.files._state
    assert not st.cache.direct and st.from_mem > 0


def test_direct_in_dataloader_workers(shards, serve, monkeypatch):
    """Forced on in DataLoader workers, which share chunks: a worker waiting for a chunk
    another fetched reads the file written past the page cache."""
    need("torch")
    from torch.utils.data import DataLoader
    monkeypatch.setenv("PREPSHARDS_GCS_DIRECT", "1")
    serve({"h5": shards["img_h5"]})
    s = ps.ShardStream("gs://b/h5", yield_index=True, batch_size=2)
    got = {int(g): x for xb, _, gb in DataLoader(s, batch_size=2, num_workers=2) for x, g in zip(xb, gb)}
    local = ps.ShardDataset(shards["img_h5"])
    assert sorted(got) == sorted(s.plan().tolist())
    assert all(np.array_equal(got[g].numpy(), local[g][0]) for g in got)


@pytest.mark.parametrize("proc,files,want", [
    ("0::/kubepods/pod1\n", {"kubepods/pod1/memory.max": "8589934592\n"}, 8 << 30),
    ("0::/job\n", {"job/memory.max": "max\n"}, None),
    ("0::/job\n", {"unified/job/memory.max": "1073741824\n"}, 1 << 30),
    ("4:memory:/slurm/uid_0/job_7\n0::/\n", {"memory/slurm/uid_0/job_7/memory.limit_in_bytes": "4294967296\n"}, 4 << 30),
    ("4:cpu,memory:/docker/abc\n", {"memory/docker/abc/memory.limit_in_bytes": "9223372036854771712\n"}, None),
    ("0::/\n", {}, None),
])
def test_memory_under_a_cgroup_limit(tmp_path, proc, files, want):
    """The RAM a reader's page cache has: a pod's or job's memory limit where there is one."""
    from prepshards import _gcs
    for name, text in files.items():
        p = tmp_path / "cg" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (tmp_path / "cgroup").write_text(proc)
    ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    got = _gcs.memory(str(tmp_path / "cg"), str(tmp_path / "cgroup"))
    assert got == (ram if want is None else min(want, ram))
    assert _gcs.memory(str(tmp_path / "cg"), str(tmp_path / "none")) == ram


def test_direct_setting(monkeypatch):
    """auto: past the page cache when the shards are more than half the RAM, and not in
    one of several DataLoader workers (they share chunks through the page cache)."""
    from prepshards import _gcs, _torch
    ram = _gcs.memory()
    assert _gcs._direct_default(ram // 2 + 1) and not _gcs._direct_default(ram // 2)
    monkeypatch.setattr(_gcs, "memory", lambda: 1 << 30)  # a pod limited to 1 GiB
    assert _gcs._direct_default((512 << 20) + 1)
    monkeypatch.setattr(_torch, "worker_info", lambda: (0, 2))
    assert not _gcs._direct_default(1 << 30), "not in one of several workers"
    monkeypatch.setattr(_torch, "worker_info", lambda: (0, 1))
    monkeypatch.setattr(_gcs, "memory", lambda: None)  # unknown: the page cache, as before
    assert not _gcs._direct_default(1 << 50)
    monkeypatch.setenv("PREPSHARDS_GCS_DIRECT", "1")
    assert _gcs._direct_default(0)
    monkeypatch.setenv("PREPSHARDS_GCS_DIRECT", "yes")
    with pytest.raises(ps.ShardError, match=r"PREPSHARDS_GCS_DIRECT='yes': give auto, 0 or 1"):
        _gcs._direct_default(0)


# -- Application Default Credentials, against a token server and a bucket that wants them --

class TokenServer:
    """An OAuth token endpoint (/token: refresh tokens, service-account JWTs, checked) and a
    GCE metadata server, on loopback. ``tokens``: the access tokens it hands out in turn
    (the last one again once they run out); ``calls``: the grants it answered."""

    def __init__(self):
        import http.server
        import threading
        self.tokens, self.life, self.calls, self.public_key, self.uri = ["tok-1"], 3600, [], None, None
        me = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def reply(self, code, body):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def token(self, grant):
                me.calls.append(grant)
                tok = me.tokens.pop(0) if len(me.tokens) > 1 else me.tokens[0]
                self.reply(200, {"access_token": tok, "expires_in": me.life, "token_type": "Bearer"})

            def do_GET(self):
                if self.path == "/computeMetadata/v1/instance/service-accounts/default/token" and \
                        self.headers.get("Metadata-Flavor") == "Google":
                    return self.token("metadata")
                self.reply(404, {"error": "not_found"})

            def do_POST(self):
                import urllib.parse
                form = urllib.parse.parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
                grant = form.get("grant_type", [""])[0]
                if grant == "refresh_token" and form.get("refresh_token") == ["r1"] and \
                        form.get("client_id") == ["c1"] and form.get("client_secret") == ["s1"]:
                    return self.token("refresh_token")
                if grant == "urn:ietf:params:oauth:grant-type:jwt-bearer" and me.jwt_ok(form["assertion"][0]):
                    return self.token("jwt")
                self.reply(400, {"error": "invalid_grant"})

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.host = f"127.0.0.1:{self.srv.server_address[1]}"
        self.url = f"http://{self.host}"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def jwt_ok(self, jwt):
        """A service account's assertion: RS256-signed by the key, for this endpoint, read-only."""
        import base64
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        def unb64(s):
            return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
        head, claims, sig = jwt.split(".")
        try:
            self.public_key.verify(unb64(sig), f"{head}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256())
        except InvalidSignature:
            return False
        c = json.loads(unb64(claims))
        return (json.loads(unb64(head))["alg"] == "RS256" and c["iss"] == "sa@p.iam.gserviceaccount.com"
                and c["aud"] == self.uri and c["scope"] == "https://www.googleapis.com/auth/devstorage.read_only"
                and c["iat"] <= time.time() + 5 < c["exp"])

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


@pytest.fixture
def adc(serve, shards, tmp_path, monkeypatch):
    """A bucket that wants the token tok-1 (its server at PREPSHARDS_GCS_ENDPOINT: no emulator,
    so credentials are sent), a token server, and no credentials anywhere yet."""
    from prepshards import _gcs
    srv = serve({"h5": shards["img_h5"]}, "-token", "tok-1")
    monkeypatch.delenv("STORAGE_EMULATOR_HOST")
    monkeypatch.setenv("PREPSHARDS_GCS_ENDPOINT", srv.url)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")  # nothing listens there
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    ts = TokenServer()
    ts.uri = ts.url + "/token"
    _gcs.reset_clients()
    yield ts
    ts.close()


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f)
    return str(path)


@pytest.mark.parametrize("where", ["GOOGLE_APPLICATION_CREDENTIALS", "gcloud"])
def test_adc_authorized_user(adc, shards, tmp_path, monkeypatch, where):
    """`gcloud auth application-default login`'s file, named by the variable or in gcloud's
    folder: its refresh token buys one access token, which every request then carries."""
    cred = {"type": "authorized_user", "refresh_token": "r1", "client_id": "c1", "client_secret": "s1",
            "token_uri": adc.uri}
    if where == "gcloud":
        write_json(tmp_path / "home" / ".config" / "gcloud" / "application_default_credentials.json", cred)
    else:
        monkeypatch.setenv(where, write_json(tmp_path / "adc.json", cred))
    same_as_local("gs://b/h5", shards["img_h5"])
    assert adc.calls == ["refresh_token"], "one token, kept until five minutes before it expires"


def test_adc_service_account_key(adc, shards, tmp_path, monkeypatch):
    """A service account key: a JWT signed with its private key, exchanged for a token."""
    need("cryptography")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    adc.public_key = key.public_key()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", write_json(tmp_path / "sa.json", {
        "type": "service_account", "client_email": "sa@p.iam.gserviceaccount.com", "private_key_id": "k1",
        "private_key": pem, "token_uri": adc.uri}))
    same_as_local("gs://b/h5", shards["img_h5"])
    assert adc.calls == ["jwt"]
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)  # a key the account does not have
    adc.public_key = other.public_key()
    from prepshards import _gcs
    _gcs.reset_clients()
    with pytest.raises(ps.ShardIOError, match=r"sa.json: exchanging the credentials for a token at "
                       r"http://127.0.0.1:\d+/token failed \(HTTP 400"):
        ps.ShardDataset("gs://b/h5")


def test_adc_metadata_server_and_refresh(adc, shards, monkeypatch):
    """No key file: the metadata server's token (GCE, GKE, Batch). A token refused with 401
    (expired early) is replaced once; one that lives 5 minutes is taken anew each request."""
    from prepshards import _gcs
    monkeypatch.setenv("GCE_METADATA_HOST", adc.host)
    adc.tokens = ["tok-stale", "tok-1"]
    same_as_local("gs://b/h5", shards["img_h5"])
    # the manifest and the listing beside it are both in flight with the stale token
    assert adc.calls == ["metadata", "metadata"] and 1 <= _gcs.client().retried[401] <= 2
    _gcs.reset_clients()
    adc.calls.clear()
    adc.life = 300  # within the five-minute margin from the start
    ds = ps.ShardDataset("gs://b/h5")
    ds.check_unchanged()  # a listing: one more request
    ds.check_unchanged()
    assert len(adc.calls) == _gcs.client().requests == 4


def test_adc_refused_and_missing(adc, tmp_path, monkeypatch):
    """Errors that name the fix: a token the bucket refuses twice, no credentials anywhere,
    a credentials file of another kind."""
    from prepshards import _gcs
    monkeypatch.setenv("GCE_METADATA_HOST", adc.host)
    adc.tokens = ["tok-wrong"]
    with pytest.raises(ps.ShardIOError, match=r"gs://b/h5/manifest.json: GCS refused access \(HTTP 401.*"
                       r"give the credentials \(Application Default Credentials\) storage.objects.get"):
        ps.ShardDataset("gs://b/h5")
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")
    _gcs.reset_clients()
    with pytest.raises(ps.ShardIOError, match=r"no Google credentials: \$\{GOOGLE_APPLICATION_CREDENTIALS\} is "
                       r"unset, .*application_default_credentials.json does not exist and the metadata server "
                       r"\(127.0.0.1:9\) did not answer .*gcloud auth application-default login"):
        ps.ShardDataset("gs://b/h5")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", write_json(tmp_path / "x.json", {"type": "external_account"}))
    with pytest.raises(ps.ShardIOError, match=r"x.json: credentials of type 'external_account' are not supported"):
        ps.ShardDataset("gs://b/h5")
