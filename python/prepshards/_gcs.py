"""Shards on Google Cloud Storage: ``gs://bucket/prefix`` read through a local chunk cache.

Design (why pure Python): the reader runs inside training processes and
their DataLoader workers, where the prep binary may not be installed and
python3-google-cloud-storage is often missing (Debian 12). GCS's JSON API
is plain HTTP: ranged ``alt=media`` GETs pinned to the object generation
seen at start (a replaced object is then refused, never mixed in), one
list call per 1,000 shards for sizes and generations. So the stdlib
(http.client, threads) suffices, and Application Default Credentials are
the same chain google-auth walks (see ``_Auth``).

Objects are read in chunks of ``PREPSHARDS_GCS_CHUNK`` bytes (8 MiB),
fetched by a per-process pool of ``PREPSHARDS_GCS_THREADS`` (16) threads
into ``PREPSHARDS_CACHE`` (default ~/.cache/prepshards) and read from
there with pread. Readers that know their order (ShardStream, BatchReader)
hand it over first, so chunks arrive in the order the rank reads them,
up to ``PREPSHARDS_GCS_AHEAD`` (16) chunks ahead (a plan starts with 4
requests, one more as each arrives); otherwise each read prefetches the
next chunks of the same object. Shards over half the RAM, read by one
process (``PREPSHARDS_GCS_DIRECT``, see _ReadState), skip the page cache:
chunks are served from the buffers they were fetched into and written to
the cache with O_DIRECT. The cache is capped at
``PREPSHARDS_CACHE_BYTES`` (10 GiB): past it, the least recently used
chunk files are deleted (an open one stays readable to its reader).
Requests that fail with 408/429/5xx, a reset or a stall
(``PREPSHARDS_GCS_TIMEOUT``, 30 s without a byte) are retried with
backoff, ``PREPSHARDS_GCS_RETRIES`` (6) times; then a ShardIOError names
the object and the fix.
"""

import collections
import errno
import hashlib
import http.client
import io
import json
import mmap
import os
import socket
import ssl
import threading
import time
import urllib.parse
import warnings
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .errors import ShardChangedError, ShardError, ShardIOError, ShardSizeError


_O_DIRECT = getattr(os, "O_DIRECT", 0)
_ALIGN = 4096  # what O_DIRECT needs of buffers, offsets and lengths on the usual file systems
_START = 4  # requests a plan starts with
_LET_GO = "let go"  # a held chunk released while its buffer was being written


def is_gs(path):
    return isinstance(path, str) and path.startswith("gs://")


def split(url):
    """gs://bucket/name -> (bucket, name)."""
    rest = url[5:]
    bucket, _, name = rest.partition("/")
    if not bucket:
        raise ShardError(f"{url}: no bucket; write gs://BUCKET/PREFIX")
    return bucket, name


def _env_int(name, default):
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        raise ShardError(f"${name}={os.environ[name]!r} is not an integer; unset it or give a number") from None


class _Retry(Exception):
    pass


class _Auth:
    """Application Default Credentials, as google-auth finds them.

    1. ``STORAGE_EMULATOR_HOST`` set: no credentials (an emulator);
    2. ``$GOOGLE_APPLICATION_CREDENTIALS``, else gcloud's
       ``~/.config/gcloud/application_default_credentials.json``:
       ``authorized_user`` (refresh token, what ``gcloud auth
       application-default login`` writes) or ``service_account`` (a key:
       the JWT is signed with the ``cryptography`` package);
    3. the metadata server (GCE, GKE, Cloud Run, Batch; ``GCE_METADATA_HOST``).
    Tokens are refreshed five minutes before they expire, and when GCS
    refuses one (401: revoked, or the clocks disagree), once per request.
    """

    def __init__(self, emulated):
        self.emulated = emulated
        self.lock = threading.Lock()
        self.token, self.expiry = None, 0.0

    def invalidate(self):
        """Forget the token (GCS refused it: expired early, or revoked); the next header fetches one."""
        with self.lock:
            self.token = None

    def header(self):
        if self.emulated:
            return {}
        with self.lock:
            if self.token is None or time.time() > self.expiry - 300:
                self.token, life = self._fetch()
                self.expiry = time.time() + life
            return {"Authorization": "Bearer " + self.token}

    def _fetch(self):
        path = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS") or os.path.join(
            os.path.expanduser("~"), ".config", "gcloud", "application_default_credentials.json")
        if os.path.isfile(path):
            try:
                with open(path, "rb") as f:
                    cred = json.load(f)
            except (OSError, ValueError) as e:
                raise ShardIOError(f"{path}: cannot read the credentials ({e}); fix the file or "
                                   "run `gcloud auth application-default login`") from None
            kind = cred.get("type")
            uri = cred.get("token_uri") or "https://oauth2.googleapis.com/token"
            if kind == "authorized_user":
                body = urllib.parse.urlencode({
                    "grant_type": "refresh_token", "refresh_token": cred.get("refresh_token", ""),
                    "client_id": cred.get("client_id", ""), "client_secret": cred.get("client_secret", "")})
                return self._token(uri, body, path)
            if kind == "service_account":
                return self._token(uri, urllib.parse.urlencode({
                    "grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                    "assertion": self._jwt(cred, uri, path)}), path)
            raise ShardIOError(f"{path}: credentials of type {kind!r} are not supported by prepshards; "
                               "use a service account key or `gcloud auth application-default login`")
        host = os.environ.get("GCE_METADATA_HOST", "metadata.google.internal")
        try:
            got = _http("GET", "http://" + host, "/computeMetadata/v1/instance/service-accounts/default/token",
                        {"Metadata-Flavor": "Google"}, timeout=5)
            tok = json.loads(got)
            return tok["access_token"], float(tok.get("expires_in", 3600))
        except (OSError, ValueError, KeyError, http.client.HTTPException, _HTTPError) as e:
            raise ShardIOError(
                f"no Google credentials: ${'{'}GOOGLE_APPLICATION_CREDENTIALS{'}'} is unset, {path} does not exist "
                f"and the metadata server ({host}) did not answer ({e}); run `gcloud auth "
                "application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS to a key file") from None

    def _token(self, uri, body, path):
        try:
            got = _http("POST", uri, "", {"Content-Type": "application/x-www-form-urlencoded"},
                        body=body.encode(), timeout=30)
            tok = json.loads(got)
            return tok["access_token"], float(tok.get("expires_in", 3600))
        except (OSError, ValueError, KeyError, http.client.HTTPException, _HTTPError) as e:
            raise ShardIOError(f"{path}: exchanging the credentials for a token at {uri} failed ({e}); "
                               "run `gcloud auth application-default login` again, or check the key") from None

    def _jwt(self, cred, uri, path):
        try:
            from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
            from cryptography.hazmat.primitives.asymmetric import padding  # noqa: PLC0415
        except ImportError:
            raise ShardIOError(f"{path}: a service account key needs the cryptography package to sign "
                               "its token: apt install python3-cryptography (or pip install cryptography), "
                               "or use `gcloud auth application-default login`") from None
        import base64  # noqa: PLC0415

        def b64(b):
            return base64.urlsafe_b64encode(b).rstrip(b"=")
        now = int(time.time())
        head = b64(json.dumps({"alg": "RS256", "typ": "JWT", "kid": cred.get("private_key_id", "")}).encode())
        claims = b64(json.dumps({"iss": cred.get("client_email"), "aud": uri, "iat": now, "exp": now + 3600,
                                 "scope": "https://www.googleapis.com/auth/devstorage.read_only"}).encode())
        key = serialization.load_pem_private_key(cred["private_key"].encode(), password=None)
        sig = key.sign(head + b"." + claims, padding.PKCS1v15(), hashes.SHA256())
        return (head + b"." + claims + b"." + b64(sig)).decode()


class _HTTPError(Exception):
    def __init__(self, status, body):
        super().__init__(f"HTTP {status}: {body[:200]!r}")
        self.status = status


def _http(method, base, path, headers, body=None, timeout=30):
    """One request on a fresh connection (token and metadata calls)."""
    u = urllib.parse.urlsplit(base)
    conn_cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
    c = conn_cls(u.netloc, timeout=timeout)
    try:
        c.request(method, (u.path or "") + path, body=body, headers=headers)
        r = c.getresponse()
        data = r.read()
        if r.status != 200:
            raise _HTTPError(r.status, data)
        return data
    finally:
        c.close()


class _TLSSocket:
    """A TLS client connection that receives ciphertext in pieces of up to ``_RECV`` bytes
    and decrypts them in memory (ssl.MemoryBIO). Python's SSLSocket lets OpenSSL read
    the socket itself: a 5-byte record header, then the record (16 KiB at most), two
    system calls for each 16 KiB, and the kernel acknowledging each: 55% of a reader's
    CPU in a first epoch over HTTPS was kernel time. What http.client needs of a socket:
    sendall, makefile("rb"), close."""

    def __init__(self, sock, ctx, host):
        self.sock = sock
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.incoming, self.outgoing, server_hostname=host)
        self.buf = bytearray(_RECV)
        self.refs = 0  # files from makefile not closed yet: the socket outlives the connection's close
        self.closed = False
        while True:
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                self._fill()
        self._flush()

    def _flush(self):
        out = self.outgoing.read()
        if out:
            self.sock.sendall(out)

    def _fill(self):
        n = self.sock.recv_into(self.buf)  # the GIL is let go while it waits
        if not n:
            self.incoming.write_eof()
        else:
            self.incoming.write(memoryview(self.buf)[:n])

    def sendall(self, data):
        self.obj.write(data)
        self._flush()

    def recv_into(self, b):
        """Decrypt into b what has arrived; wait for more only when nothing has."""
        mv = memoryview(b).cast("B")
        got = 0
        while got < len(mv):
            try:
                k = self.obj.read(len(mv) - got, mv[got:])
            except ssl.SSLWantReadError:
                if got:
                    break
                self._fill()
                continue
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                break  # the server closed the connection
            if not k:
                break
            got += k
        return got

    def makefile(self, mode="rb"):
        self.refs += 1
        return io.BufferedReader(_TLSFile(self))

    def close(self):
        self.closed = True
        if self.refs <= 0:
            self.sock.close()


_RECV = 1 << 20  # ciphertext taken from the socket at once, at most


class _TLSFile(io.RawIOBase):
    def __init__(self, s):
        self.s = s

    def readable(self):
        return True

    def readinto(self, b):
        return self.s.recv_into(b)

    def close(self):
        if not self.closed:
            self.s.refs -= 1
            if self.s.closed:
                self.s.close()
        super().close()


class _HTTPSConnection(http.client.HTTPConnection):
    """HTTPS over _TLSSocket."""

    default_port = 443

    def __init__(self, host, ctx, timeout):
        super().__init__(host, timeout=timeout)
        self.ctx = ctx

    def connect(self):
        sock = socket.create_connection((self.host, self.port), self.timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sock = _TLSSocket(sock, self.ctx, self.host)
        except BaseException:
            sock.close()
            raise


class Client:
    """The JSON API over keep-alive connections, one per thread, with retries."""

    def __init__(self):
        emu = os.environ.get("STORAGE_EMULATOR_HOST")
        if emu:
            self.base = emu if "://" in emu else "http://" + emu
        else:  # another endpoint, credentials still sent: Private Service Connect, a proxy
            self.base = os.environ.get("PREPSHARDS_GCS_ENDPOINT") or "https://storage.googleapis.com"
        u = urllib.parse.urlsplit(self.base)
        self.netloc, self.https, self.root = u.netloc, u.scheme == "https", u.path.rstrip("/")
        if self.https:
            self.ctx = ssl.create_default_context()  # SSL_CERT_FILE / SSL_CERT_DIR honoured
            self.ctx.set_alpn_protocols(["http/1.1"])
        self.auth = _Auth(bool(emu))
        self.timeout = float(os.environ.get("PREPSHARDS_GCS_TIMEOUT", 30))
        self.retries = _env_int("PREPSHARDS_GCS_RETRIES", 6)
        self.local = threading.local()
        self.lock = threading.Lock()
        self.conns = weakref.WeakSet()  # every live thread's connection, to close them all
        self.requests = 0
        self.retried = collections.Counter()  # what made a request be tried again, by kind

    def _conn(self):
        c = getattr(self.local, "conn", None)
        if c is None:
            if self.https:
                c = _HTTPSConnection(self.netloc, self.ctx, self.timeout)
            else:
                c = http.client.HTTPConnection(self.netloc, timeout=self.timeout)
            self.local.conn = c
            with self.lock:
                self.conns.add(c)
            # closed when its thread is gone: a reader's fetch threads go with the reader,
            # and their sockets must not stay open for the life of the process
            self.local.closer = weakref.finalize(threading.current_thread(), c.close)
        return c

    def close(self):
        """Close every thread's connection (one in use reconnects on its next request)."""
        with self.lock:
            conns, self.conns = list(self.conns), weakref.WeakSet()
        for c in conns:
            c.close()

    def _drop(self):
        c = getattr(self.local, "conn", None)
        if c is not None:
            c.close()
            self.local.closer.detach()
            with self.lock:
                self.conns.discard(c)
        self.local.conn = None

    def get(self, url, path, query, headers=None, want=None, into=None):
        """GET with retries: the body (exactly ``want`` bytes when given; read into the
        writable buffer ``into`` when given, and then a memoryview of it)."""
        q = urllib.parse.urlencode(query)
        target = f"{self.root}{path}?{q}"
        delay = 0.05
        last = None
        refreshed = False
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
            h = dict(headers or {})
            h.update(self.auth.header())
            try:
                c = self._conn()
                self.requests += 1
                c.request("GET", target, headers=h)
                r = c.getresponse()
                if into is not None and r.status in (200, 206) and r.length == want:
                    data = _read_into(r, memoryview(into)[:want])
                else:
                    data = r.read()
            except ssl.SSLCertVerificationError as e:  # not the network's fault: no retry mends it
                self._drop()
                raise ShardIOError(f"{url}: the server's certificate ({self.netloc}) could not be checked "
                                   f"({e.verify_message}); install the CA certificates (apt install "
                                   "ca-certificates), or name the right ones in SSL_CERT_FILE") from None
            except (OSError, http.client.HTTPException) as e:  # resets, stalls (timeouts), cut replies
                self._drop()
                last = f"{type(e).__name__}: {e}"
                self.retried["timeout" if isinstance(e, TimeoutError) else "connection"] += 1
                continue
            if r.status in (200, 206):
                if want is not None and len(data) != want:
                    self._drop()
                    last = f"a reply of {len(data)} bytes instead of {want}"
                    self.retried["short"] += 1
                    continue
                return data
            if r.status in (408, 429) or r.status >= 500:
                last = f"HTTP {r.status}"
                self.retried[r.status] += 1
                continue
            if r.status == 404:
                raise _HTTPError(404, data)
            if r.status == 401 and not refreshed and not self.auth.emulated:
                refreshed = True  # a token refused once may have expired early: take a new one
                self.auth.invalidate()
                self.retried[401] += 1
                continue
            if r.status in (401, 403):
                raise ShardIOError(f"{url}: GCS refused access (HTTP {r.status}: {data[:200]!r}); give the "
                                   "credentials (Application Default Credentials) storage.objects.get and "
                                   "storage.objects.list on the bucket")
            raise ShardIOError(f"{url}: GCS answered HTTP {r.status} ({data[:200]!r}); check the path")
        raise ShardIOError(f"{url}: GCS did not answer after {self.retries + 1} tries (last: {last}); "
                           "check the network, or raise PREPSHARDS_GCS_RETRIES / PREPSHARDS_GCS_TIMEOUT")

    def media(self, bucket, name, generation=None, start=None, length=None, into=None):
        q = {"alt": "media"}
        if generation is not None:
            q["generation"] = str(generation)
        h = {}
        if start is not None:
            h["Range"] = f"bytes={start}-{start + length - 1}"
        path = f"/storage/v1/b/{urllib.parse.quote(bucket, safe='')}/o/{urllib.parse.quote(name, safe='')}"
        return self.get(f"gs://{bucket}/{name}", path, q, h, want=length, into=into)

    def list(self, bucket, prefix):
        """{name: (size, generation, content encoding)} of the objects under prefix."""
        out, token, after = {}, None, None
        while True:
            q = {"prefix": prefix, "fields": "items(name,size,generation,contentEncoding),nextPageToken",
                 "maxResults": str(_PAGE)}
            if token:
                q["pageToken"] = token
            elif after is not None:
                q["startOffset"] = after
            try:
                got = json.loads(self.get(f"gs://{bucket}/{prefix}",
                                          f"/storage/v1/b/{urllib.parse.quote(bucket, safe='')}/o", q))
            except _HTTPError:
                raise ShardIOError(f"gs://{bucket}/{prefix}: no such bucket; check the path") from None
            items = got.get("items", [])
            for it in items:
                out[it["name"]] = (int(it["size"]), str(it.get("generation", "")), it.get("contentEncoding", ""))
            token = got.get("nextPageToken")
            if not token:
                if len(items) < _PAGE:
                    return out
                # a full page without a token: fake-gcs-server cuts the listing at maxResults
                # and gives none; go on from the last name (sorted; startOffset includes it,
                # so each page brings at least one new name while _PAGE > 1)
                after = items[-1]["name"]


_PAGE = 1000  # objects per list call (GCS's most)


def _read_into(r, mv):
    """Read the body of r into mv; a memoryview of what came."""
    got = 0
    while got < len(mv):
        k = r.readinto(mv[got:])
        if not k:
            break
        got += k
    return mv[:got]


_clients = {}


def client():
    """This process's client (a new one after a fork: connections are not shared; and when the
    environment that configures it changed)."""
    key = (os.getpid(),) + tuple(os.environ.get(n) for n in (
        "STORAGE_EMULATOR_HOST", "PREPSHARDS_GCS_ENDPOINT", "PREPSHARDS_GCS_TIMEOUT", "PREPSHARDS_GCS_RETRIES",
        "GOOGLE_APPLICATION_CREDENTIALS", "GCE_METADATA_HOST", "HOME"))
    c = _clients.get(key)
    if c is None:
        with _clients_lock:  # fetch threads ask at once
            c = _clients.get(key)
            if c is None:
                reset_clients()
                c = _clients[key] = Client()
    return c


def reset_clients():
    """Forget the clients, closing this process's connections (they would linger until collected)."""
    with _clients_lock:
        old = [c for k, c in _clients.items() if k[0] == os.getpid()]
        _clients.clear()
    for c in old:
        c.close()


_clients_lock = threading.RLock()


def _after_fork():
    global _clients_lock
    _clients_lock = threading.RLock()  # a parent's thread may have held it at the fork


os.register_at_fork(after_in_child=_after_fork)


def read_object(url):
    """The bytes of a small object (the manifest)."""
    bucket, name = split(url)
    try:
        return client().media(bucket, name)
    except _HTTPError:
        raise FileNotFoundError(url) from None


def _folder(url):
    """(bucket, the prefix of the folder holding url's object)."""
    bucket, name = split(url)
    return bucket, name.rsplit("/", 1)[0] + "/" if "/" in name else ""


# (pid, manifest URL) -> (time, listing): the folder's listing taken while
# its manifest was read, for the RemoteFiles made next from that manifest.
_early = {}
_EARLY_FOR = 5.0  # seconds a listing taken beside the manifest stands in for a fresh one


def read_manifest(url):
    """The manifest's bytes, its folder listed at the same time: a reader's first
    two requests (the manifest, then the shards' sizes and generations) cost one
    round trip instead of two. A failed listing is left for RemoteFiles to redo
    and report."""
    bucket, prefix = _folder(url)
    box = {}

    def lst():
        try:
            box["objs"] = client().list(bucket, prefix)
        except Exception:  # noqa: BLE001 — RemoteFiles lists again and says what failed
            pass

    t = threading.Thread(target=lst, name="prepshards-gcs-list", daemon=True)
    t.start()
    try:
        data = read_object(url)
    finally:
        t.join()
    if "objs" in box:
        _early[(os.getpid(), url)] = (time.monotonic(), box["objs"])
    return data


def _listing(url):
    """The objects in url's folder: the listing taken beside the manifest when it is
    at most _EARLY_FOR seconds old (used once), else a new one."""
    early = _early.pop((os.getpid(), url), None)
    if early is not None and time.monotonic() - early[0] <= _EARLY_FOR:
        return early[1]
    return client().list(*_folder(url))


_STALE = 600  # seconds after which a .tmp or .lock file in the cache is a dead process's


class Cache:
    """Chunk files under a folder, capped in size, least recently used evicted.

    Each process keeps its own notion of recency (chunks it read get their
    mtime touched once per process); eviction takes the oldest mtimes
    first. A chunk evicted under an open descriptor stays readable.
    """

    def __init__(self, root, limit):
        self.root, self.limit = root, limit
        try:
            os.makedirs(root, exist_ok=True)
        except OSError as e:
            raise self.unwritable(e) from None
        self.lock = threading.Lock()
        self.added = 0
        self.evicted = 0
        self.direct = _O_DIRECT != 0

    def path(self, obj_key, chunk):
        return os.path.join(self.root, obj_key, f"{chunk:08d}")

    def unwritable(self, e):
        return ShardIOError(f"{self.root}: the chunk cache cannot be written there ({e.strerror or e}); "
                            "point PREPSHARDS_CACHE at a writable folder on a local disk")

    def put(self, obj_key, chunk, buf, n, direct=False):
        """Store a chunk: the first n bytes of buf. ``direct``: past the page cache
        (O_DIRECT; buf page-aligned, as mmap's are, with room to the next 4 KiB), for a
        chunk its reader serves from memory; where the file system refuses, as usual."""
        p = self.path(obj_key, chunk)
        tmp = f"{p}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            os.makedirs(os.path.dirname(p), exist_ok=True)
            if not (direct and self.direct and self._put_direct(tmp, buf, n)):
                with open(tmp, "wb") as f:
                    f.write(memoryview(buf)[:n])
            os.replace(tmp, p)  # whole chunks only: a reader never sees a half-written one
        except OSError as e:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise ShardIOError(f"{self.root}: cannot write a chunk to the cache ({e.strerror or e}); free "
                               "space there, lower PREPSHARDS_CACHE_BYTES or point PREPSHARDS_CACHE at "
                               "another disk") from None
        with self.lock:
            self.added += n
            check = self.added > max(self.limit // 16, 1)
            if check:
                self.added = 0
        if check:
            self.evict()

    def _put_direct(self, tmp, buf, n):
        """Write buf[:n] to tmp with O_DIRECT: False (nothing left behind) where refused."""
        padded = memoryview(buf)[:-(-n // _ALIGN) * _ALIGN]  # O_DIRECT writes whole blocks
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _O_DIRECT | os.O_CLOEXEC, 0o600)
        except OSError as e:
            if e.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
                raise
            self.direct = False  # tmpfs and some FUSE file systems: no O_DIRECT
            return False
        try:
            done = 0
            while done < len(padded):
                k = os.write(fd, padded[done:])
                if k <= 0:
                    raise OSError(errno.EIO, "the disk took no bytes")
                done += k
            os.ftruncate(fd, n)
        except OSError as e:
            os.close(fd)
            os.unlink(tmp)
            if e.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
                raise
            self.direct = False  # blocks larger than 4 KiB
            return False
        os.close(fd)
        return True

    def evict(self):
        files, total = [], 0
        stale = time.time() - _STALE
        for dirpath, _, names in os.walk(self.root):
            for n in names:
                p = os.path.join(dirpath, n)
                try:
                    st = os.stat(p)
                except FileNotFoundError:
                    continue
                if n.endswith((".tmp", ".lock")):
                    # being written or fetched right now, unless left by a process that was
                    # killed (a preempted job): those would pile up outside the limit
                    if st.st_mtime < stale:
                        try:
                            os.unlink(p)
                        except FileNotFoundError:
                            pass
                    continue
                files.append((st.st_mtime_ns, st.st_size, p))
                total += st.st_size
        if total <= self.limit:
            return
        files.sort()
        goal = self.limit * 0.9
        for _, size, p in files:
            if total <= goal:
                break
            try:
                os.unlink(p)
                total -= size
                self.evicted += 1
            except FileNotFoundError:
                pass


class RemoteFiles:
    """Files (see _io) for shards on gs://: the same interface, reads through the chunk cache.

    ``fd(k)`` gives a RemoteFile; ``pread_into`` reads from it. The
    identity recorded per shard is (generation, size): a replaced object
    is refused as a local file replaced under the reader is.
    """

    def __init__(self, shards, manifest_path):
        self._shards = shards
        self._manifest_path = manifest_path
        self._ident = {}
        self._pid = None
        self._state = None
        self.chunk = _env_int("PREPSHARDS_GCS_CHUNK", 8 << 20)
        self.ahead = _env_int("PREPSHARDS_GCS_AHEAD", 16)
        self.threads = _env_int("PREPSHARDS_GCS_THREADS", 16)
        self.cache_root = os.environ.get("PREPSHARDS_CACHE") or os.path.join(
            os.path.expanduser("~"), ".cache", "prepshards")
        self.cache_limit = _env_int("PREPSHARDS_CACHE_BYTES", 10 << 30)

    def __getstate__(self):
        st = dict(self.__dict__)
        st["_pid"] = None
        st["_state"] = None
        return st

    # -- identity -------------------------------------------------------------

    def _check(self, record):
        if record:  # the first look, just after the manifest: the listing taken beside it does
            objs = _listing(self._manifest_path)
        else:
            objs = client().list(*_folder(self._manifest_path))
        for k, s in enumerate(self._shards):
            _, name = split(s["path"])
            got = objs.get(name)
            if got is None:
                if k in self._ident:
                    raise self._changed(k, "was removed")
                raise ShardSizeError(f"{s['path']}: shard listed in {self._manifest_path} is missing; "
                                     "upload it again or reconvert (prep convert --resume)")
            size, gen, enc = got
            if enc == "gzip":
                raise ShardIOError(
                    f"{s['path']}: stored gzip-compressed (Content-Encoding: gzip, as `gsutil cp -Z` or `gcloud "
                    "storage cp --gzip-local-all` upload): GCS then serves it whole and decompressed, never a "
                    "byte range; upload the shards without compression (they are uncompressed by design)")
            want = self._ident.get(k)
            if want is None:
                if size != s["bytes"]:
                    raise ShardSizeError(
                        f"{s['path']}: {size} bytes in the bucket, the manifest ({self._manifest_path}) says "
                        f"{s['bytes']}; the shard is truncated, still being uploaded or from another run: "
                        "upload it again or reconvert (prep convert --resume)")
                if record:
                    self._ident[k] = (gen, size)
            elif want != (gen, size):
                raise self._changed(k, f"was replaced (generation {want[0]} -> {gen}, {size} bytes)")

    def _changed(self, k, what):
        return ShardChangedError(
            f"{self._shards[k]['path']}: the shards changed under the reader: this object {what} since "
            f"the reader first saw it (another prep convert or a copy); restart the reader from the new "
            f"manifest ({self._manifest_path})")

    def record_all(self):
        self._check(True)

    def check_unchanged(self):
        """One list call per 1,000 shards: a replaced or removed object raises ShardChangedError."""
        if self._ident:
            self._check(False)

    # -- reading --------------------------------------------------------------

    def _st(self):
        pid = os.getpid()
        if self._pid != pid or self._state is None:
            if not self._ident:
                self._check(True)
            self._pid = pid
            self._state = _ReadState(self)
        return self._state

    def fd(self, k):
        return RemoteFile(self, k)  # cheap: state lives in _ReadState, per process

    def plan(self, ranges, hold=True):
        """The reads to come, in order: (shard, offset, length) each; chunks are fetched in that
        order. ``hold``: the reads run through the plan front to back, so a chunk may be served
        from memory until its planned bytes are read (direct mode); False for scattered reads
        (map-style batches), whose chunks go through the page cache."""
        self._st().plan(ranges, hold)

    def whole(self, shards, hold=True):
        """Plan whole shards in this order (tar: the member index reads every header)."""
        self.plan([(k, 0, int(self._shards[k]["bytes"])) for k in shards], hold)

    def close(self):
        st = self._state
        if st is not None and self._pid == os.getpid():
            st.close()
        self._state = None

    def __del__(self):
        # a reader dropped without close(): its chunk descriptors, fetch threads and
        # buffers go with it (a new reader each epoch would otherwise run out of files)
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def stats(self):
        st = self._state
        return {} if st is None else {"requests": client().requests, "fetched": st.fetched,
                                      "evicted": st.cache.evicted, "from_memory": st.from_mem,
                                      "held": len(st.mem), "buffers": st.buffers, "loaded": st.loaded,
                                      "from_file": st.from_file}


def _touch(fd):
    """Mark a chunk recently used (evicted last); a cache shared read-only cannot be marked."""
    try:
        os.utime(fd)
    except OSError:
        pass


def _mtime(path):
    try:
        return os.stat(path).st_mtime
    except FileNotFoundError:
        return 0.0


class RemoteFile:
    __slots__ = ("files", "k")

    def __init__(self, files, k):
        self.files, self.k = files, k

    def readinto(self, mv, offset, path):
        self.files._st().read(self.k, mv, offset, path)


class _ReadState:
    """Per process: the cache, the fetch pool, the planned chunks, chunks held in memory
    and open chunk descriptors.

    ``direct`` (see _direct_default): a planned chunk is fetched into a
    buffer and written to the cache past the page cache (O_DIRECT), or, if
    cached, read from there the same way, and served from that buffer until
    its planned reads are done (or the reader is past them). An epoch then
    costs one copy of each byte by the CPU (from the socket; none from the
    disk), not three (socket, page cache, back out) or two. The buffers are
    mmaps reused from a free list, so their pages are touched once per
    process. Otherwise chunks go through the page cache, where DataLoader
    workers of one rank share them and the next epoch finds them.
    """

    def __init__(self, files):
        self.files = files
        self.cache = Cache(files.cache_root, files.cache_limit)
        self.pool = ThreadPoolExecutor(max(1, files.threads), thread_name_prefix="prepshards-gcs")
        self.lock = threading.Lock()
        self.queue = collections.deque()  # planned chunks not yet submitted
        self.inflight = collections.OrderedDict()  # chunk -> future, in plan order
        self.fds = collections.OrderedDict()  # chunk -> descriptor, least recently used first
        self.keys = {}
        self.fetched = 0
        self.from_mem = 0  # reads (per chunk) served from a fetch buffer
        self.loaded = 0  # chunks read from the cache into a buffer
        self.from_file = 0  # reads (per chunk) from a cache file
        self.buffers = 0  # fetch buffers made
        self.cache_failed = False  # a cache write failed (warned once)
        self.direct = _direct_default(sum(int(s["bytes"]) for s in files._shards))
        self.hold = True  # the plan is read front to back: see plan
        # chunks seen in the cache (one evicted since is fetched when read, not before)
        self.present = set()
        self.most_present = max(4096, 2 * files.cache_limit // files.chunk)
        self.evicted = 0  # the cache's evictions when present was last cleared
        self.refs = {}  # planned chunk -> bytes planned to be read from it (a read may come in parts)
        self.span = {}  # planned chunk -> (its first planned read, its last), positions in the plan
        # chunk -> [buffer, bytes, planned bytes left, read yet, being written], least recently used first
        self.mem = collections.OrderedDict()
        self.unread = 0  # chunks in mem not read yet: prefetched, as the futures in inflight are
        self.free = []  # fetch buffers not in use
        self.most = files.ahead + 16  # chunks held in memory at most (prefetched, and being read)
        self.window = files.ahead  # chunks prefetched at most now: see plan

    def key(self, k):
        if k not in self.keys:
            s = self.files._shards[k]
            gen = self.files._ident[k][0]
            self.keys[k] = hashlib.sha256(f"{s['path']}#{gen}".encode()).hexdigest()[:32]
        return self.keys[k]

    def nchunks(self, k):
        c = self.files.chunk
        return -(-int(self.files._shards[k]["bytes"]) // c)

    def plan(self, ranges, hold=True):
        refs, span = plan_chunks(ranges, self.files.chunk)
        with self.lock:
            self.queue = collections.deque(refs)  # first-read order
            self.refs, self.span, self.hold = refs, span, hold
            if not self.inflight:
                # start with a few requests, one more as each arrives: the first chunks, which
                # the reader waits for, do not share the link with `ahead` others (a plan made
                # while fetches run, the next map-style batch, goes on at the current width)
                self.window = min(_START, self.files.ahead)
            for ch, e in list(self.mem.items()):  # held for an earlier plan
                e[2] = refs.get(ch, 0) if hold else 0
                if e[2] <= 0:
                    self._release(ch)
            self._pump()

    def _pump(self):  # under self.lock
        while len(self.inflight) + self.unread < self.window and self.queue:
            ch = self.queue.popleft()
            if ch in self.inflight or ch in self.mem:
                continue
            if not self._keeps(ch) and (ch in self.present or
                                        os.path.exists(self.cache.path(self.key(ch[0]), ch[1]))):
                # read from the file when its turn comes; remembered, so that the next plan
                # (a map-style batch touches a chunk per sample) need not look again
                if len(self.present) > self.most_present or self.evicted != self.cache.evicted:
                    self.present.clear()  # and after this process evicted chunks
                    self.evicted = self.cache.evicted
                self.present.add(ch)
                continue
            self.inflight[ch] = self.pool.submit(self._fetch, ch)

    def _arrived(self):  # under self.lock
        """A chunk came (fetched, or loaded from the cache): one more request may be in flight."""
        self.window = min(self.window + 1, self.files.ahead)
        self._pump()

    # -- fetch buffers (under self.lock) --------------------------------------

    def _take(self):
        if self.free:
            return self.free.pop()
        self.buffers += 1
        # page-aligned (O_DIRECT), rounded up to whole blocks
        return mmap.mmap(-1, -(-self.files.chunk // _ALIGN) * _ALIGN, flags=mmap.MAP_PRIVATE)

    def _release(self, ch):
        e = self.mem.pop(ch)
        if not e[3]:
            self.unread -= 1
        if e[4]:
            e[4] = _LET_GO  # still being written to the cache: the writer frees it
        else:
            self.free.append(e[0])

    def _hold(self, ch, buf, n, writing=False):
        """Keep a fetched chunk in memory for its planned reads; the least recently
        used beyond ``most`` go (their reads then come from the cache file). ``writing``:
        the buffer is being written to the cache; the entry is returned."""
        e = self.mem[ch] = [buf, n, self.refs.get(ch, 0), False, writing]
        self.unread += 1
        self.inflight.pop(ch, None)  # fetched: prefetch is now bounded by unread
        while len(self.mem) > self.most:
            self._release(next(iter(self.mem)))
        return e

    def _keeps(self, ch):
        """Whether chunk ch is held in memory once fetched or loaded (see the class)."""
        return self.direct and self.hold and self.refs.get(ch, 0) > 0

    def _load(self, ch, p):
        """Read a cached chunk into a buffer past the page cache and hold it: False (nothing
        held) when it is not in the cache or not whole."""
        try:
            try:
                fd = os.open(p, os.O_RDONLY | (_O_DIRECT if self.cache.direct else 0) | os.O_CLOEXEC)
            except OSError as e:
                if e.errno != errno.EINVAL:
                    raise
                self.cache.direct = False  # no O_DIRECT here: through the page cache
                fd = os.open(p, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        with self.lock:
            buf = self._take()
        try:
            k, i = ch
            c = self.files.chunk
            n = min(c, int(self.files._shards[k]["bytes"]) - i * c)
            if os.fstat(fd).st_size != n:
                return False  # being replaced, or cut: fetch it again
            mv, got = memoryview(buf), 0
            while got < n:  # O_DIRECT reads whole blocks: the last one stops at the end
                try:
                    r = os.preadv(fd, [mv[got:-(-n // _ALIGN) * _ALIGN]], got)
                except OSError:
                    return False  # an unreadable cache file: fetch the chunk again
                if r <= 0:
                    return False
                got += r
            _touch(fd)
            with self.lock:
                self._hold(ch, buf, n)
                buf = None
                self._arrived()
            self.loaded += 1
            return True
        finally:
            os.close(fd)
            if buf is not None:
                with self.lock:
                    self.free.append(buf)

    def _fetch(self, ch):
        k, i = ch
        p = self.cache.path(self.key(k), i)
        with self.lock:
            keep = self._keeps(ch)
        if keep and self._load(ch, p):
            return True
        # DataLoader workers of one rank read the same shards: the first to
        # take a chunk's lock file fetches it, the others wait for the file
        # (a lock older than a minute is from a process that died: ignored)
        lock = p + ".lock"
        try:
            os.makedirs(os.path.dirname(p), exist_ok=True)
            os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            while os.path.exists(lock) and time.time() - _mtime(lock) < 60:
                if os.path.exists(p):
                    return True
                time.sleep(0.005)
            if os.path.exists(p):
                return True
        except OSError as e:
            raise self.cache.unwritable(e) from None
        with self.lock:
            buf = self._take()
        try:
            s = self.files._shards[k]
            bucket, name = split(s["path"])
            c = self.files.chunk
            start = i * c
            n = min(c, int(s["bytes"]) - start)
            try:
                client().media(bucket, name, self.files._ident[k][0], start, n, into=buf)
            except _HTTPError:
                raise self.files._changed(k, "was replaced or removed (its generation is gone)") from None
            self.fetched += 1
            with self.lock:
                e = self._hold(ch, buf, n, writing=True) if keep else None
                self._arrived()
            # held first, written second: the reader need not wait for the disk
            try:
                self.cache.put(self.key(k), i, buf, n, direct=keep)
            except ShardIOError as err:
                if e is None:
                    raise  # the reader reads it from the file: it must know
                with self.lock:  # held: the epoch goes on; only the cache misses it
                    first, self.cache_failed = not self.cache_failed, True
                if first:
                    warnings.warn(f"{err} (reading goes on from memory, without caching)", stacklevel=1)
            finally:
                if e is not None:
                    with self.lock:
                        if e[4] is not _LET_GO:
                            buf = None  # still held: _release frees it
                        e[4] = False
        finally:
            if buf is not None:
                with self.lock:
                    self.free.append(buf)
            try:
                os.unlink(lock)
            except FileNotFoundError:
                pass
        return True

    # -- reading --------------------------------------------------------------

    def _open(self, ch):
        """A descriptor of the chunk's cache file, fetching it first if needed; None when
        the fetch left it in memory."""
        fd = self.fds.get(ch)
        if fd is not None:
            self.fds.move_to_end(ch)
            return fd
        p = self.cache.path(self.key(ch[0]), ch[1])
        for _ in range(3):
            with self.lock:
                fut = None
                if ch in self.inflight:
                    # chunks planned before this one were passed over: stop holding them
                    while True:
                        first, f = self.inflight.popitem(last=False)
                        if first == ch:
                            fut = f
                            break
                if fut is None and ch not in self.mem and not os.path.exists(p):
                    # not planned (map-style access): fetch it, and the next chunks of the object
                    nxt = [(ch[0], j) for j in range(ch[1] + 1, min(ch[1] + 1 + self.files.ahead // 4,
                                                                    self.nchunks(ch[0])))]
                    fut = self.pool.submit(self._fetch, ch)
                    if not self.queue:
                        self.queue.extend(nxt)
                self._pump()
            if fut is not None:
                fut.result()
            if ch in self.mem:
                return None
            try:
                fd = os.open(p, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except FileNotFoundError:
                self.present.discard(ch)
                continue  # evicted between fetch and open: fetch again
            _touch(fd)
            self.fds[ch] = fd
            if len(self.fds) > 64:
                _, old = self.fds.popitem(last=False)
                os.close(old)
            return fd
        raise ShardIOError(f"{self.files._shards[ch[0]]['path']}: chunk {ch[1]} was evicted from the cache "
                           f"({self.cache.root}) as soon as it was fetched; raise PREPSHARDS_CACHE_BYTES")

    def _from_mem(self, ch, dst, at, path):
        """Copy the chunk's bytes at..at+len(dst) from memory into dst: False if not held."""
        with self.lock:
            e = self.mem.get(ch)
            if e is None:
                return False
            if at + len(dst) > e[1]:
                raise ShardIOError(f"{path}: chunk {ch[1]} from GCS is short; read again")
            # numpy copies without the GIL: the fetch threads go on receiving meanwhile
            np.copyto(np.frombuffer(dst, np.uint8), np.frombuffer(e[0], np.uint8, len(dst), at))
            self.from_mem += 1
            first = not e[3]
            if first:
                e[3] = True
                self.unread -= 1
            e[2] -= len(dst)
            if e[2] <= 0:  # its planned reads are done
                self._release(ch)
            else:
                self.mem.move_to_end(ch)
            if first:
                self._reached(ch)
            return True

    def _reached(self, ch):  # under self.lock
        """The reader got to ch: chunks whose planned reads all come before ch's first are done
        (a crop reads part of a sample, so counting reads alone would keep some)."""
        first = self.span.get(ch, (-1,))[0]
        for old in [o for o in self.mem if self.span.get(o, (first,))[1] < first]:
            self._release(old)
        self._pump()

    def read(self, k, mv, offset, path):
        c = self.files.chunk
        n = len(mv)
        done = 0
        while done < n:
            pos = offset + done
            ch = (k, pos // c)
            m = min(n - done, c - pos % c)
            fd = self.fds.get(ch)  # the common cases: a chunk already open, or in memory
            if fd is None:
                if self.mem and self._from_mem(ch, mv[done:done + m], pos % c, path):
                    done += m
                    continue
                fd = self._open(ch)
                if fd is None:
                    continue  # fetched into memory just now
            got = os.preadv(fd, [mv[done:done + m]], pos % c)
            self.from_file += 1
            if got != m:
                raise ShardIOError(f"{path}: cached chunk {ch[1]} in {self.cache.root} is short; "
                                   "delete the cache folder and read again")
            done += m

    def close(self):
        for fd in self.fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds.clear()
        with self.lock:
            self.queue.clear()  # a fetch finishing now submits no more
            self.mem.clear()
            self.free.clear()
        self.pool.shutdown(wait=False, cancel_futures=True)
        # let the executor go: it holds its threads, and a thread's connection closes
        # when the thread is gone (Client._conn)
        self.pool = _Closed()


class _Closed:
    """The fetch pool of a closed _ReadState: what a late caller submits is refused."""

    def submit(self, *a, **kw):
        raise ShardIOError("the reader was closed")


def plan_chunks(ranges, c):
    """The chunks of size c that reads (shard, offset, length) touch: ({chunk: bytes read from
    it}, {chunk: (first read, last read)}), in the order they are first touched; chunk is
    (shard, chunk number), reads are numbered by their place in ranges. Vectorised: a
    stream's plan has a read per sample, a million in a large epoch."""
    r = np.asarray(ranges, np.int64).reshape(-1, 3)
    at = np.flatnonzero(r[:, 2] > 0)
    if not len(at):
        return {}, {}
    k, off, n = r[at, 0], r[at, 1], r[at, 2]
    c0, c1 = off // c, (off + n - 1) // c
    cnt = c1 - c0 + 1
    i = np.repeat(np.arange(len(at)), cnt)  # one entry per (read, chunk it touches)
    ch = c0[i] + np.arange(len(i)) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    nbytes = np.minimum(off[i] + n[i], (ch + 1) * c) - np.maximum(off[i], ch * c)
    key = k[i] * (int(c1.max()) + 1) + ch
    uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
    total = np.zeros(len(uniq), np.int64)
    np.add.at(total, inv, nbytes)
    last = np.zeros(len(uniq), np.int64)
    np.maximum.at(last, inv, i)
    refs, span = {}, {}
    for u in np.argsort(first, kind="stable").tolist():
        j = int(first[u])
        chunk = (int(k[i[j]]), int(ch[j]))
        refs[chunk] = int(total[u])
        span[chunk] = (int(at[i[j]]), int(at[last[u]]))
    return refs, span


def _direct_default(total):
    """Whether planned chunks skip the page cache and are served from their fetch buffers
    (see _ReadState): ``PREPSHARDS_GCS_DIRECT`` 1 or 0; else (auto) when this process is
    not one of several DataLoader workers (which share chunks through the page cache) and
    the shards, ``total`` bytes, are more than half the memory (``memory()``: their pages
    would not stay cached until the next epoch, so writing them there only costs copies)."""
    v = os.environ.get("PREPSHARDS_GCS_DIRECT", "auto")
    if v not in ("auto", "0", "1"):
        raise ShardError(f"$PREPSHARDS_GCS_DIRECT={v!r}: give auto, 0 or 1")
    if v != "auto":
        return v == "1"
    from . import _torch  # noqa: PLC0415
    if _torch.worker_info()[1] > 1:
        return False
    ram = memory()
    return ram is not None and total > ram // 2


def memory(cgroup_root="/sys/fs/cgroup", proc_cgroup="/proc/self/cgroup"):
    """Bytes of memory this process's page cache can use: the machine's RAM, or less where
    its cgroup has a limit (a Kubernetes pod, a Slurm job, a container), since the cgroup's
    page cache is charged to it. None if unknown."""
    try:
        ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        ram = None
    try:
        with open(proc_cgroup) as f:
            lines = [ln.rstrip("\n").split(":", 2) for ln in f]
    except OSError:
        return ram
    candidates = []
    for _, controllers, path in (ln for ln in lines if len(ln) == 3):
        path = path.lstrip("/")
        if controllers == "":  # cgroup v2
            candidates.append(os.path.join(cgroup_root, path, "memory.max"))
            candidates.append(os.path.join(cgroup_root, "unified", path, "memory.max"))
        elif "memory" in controllers.split(","):  # cgroup v1
            candidates.append(os.path.join(cgroup_root, "memory", path, "memory.limit_in_bytes"))
            candidates.append(os.path.join(cgroup_root, "memory", "memory.limit_in_bytes"))
    for c in candidates:
        try:
            with open(c) as f:
                v = f.read().strip()
        except OSError:
            continue
        if v.isdigit() and (ram is None or int(v) < ram):  # "max", or v1's huge "no limit", are no limit
            ram = int(v)
    return ram
