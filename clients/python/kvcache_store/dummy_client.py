"""DummyClient: the store client of an inference process that holds no cluster memory.

It forwards every call to a real client (store_service, usually the injected sidecar) over the
KVD1 channel (channel.py): the Unix socket in the shared directory when there is one, else TCP.
Values live in shared regions (shm_region.py), files that the real client maps once and reads
and writes directly, so a value put from alloc_buffer() memory, or read into it, is never copied
in either process. Memory outside the regions is staged through a lease of the pool (one memmove
here). When the real client cannot map our files (another host), values travel inside the
messages.

Method names, argument order and return conventions follow Mooncake's MooncakeDistributedStore,
so an engine integration switches with its import:
    from kvcache_store import DummyClient as MooncakeDistributedStore
By default failures are return values as there (0 ok / negative ErrorCode, b"" for a failed
get); `DummyClient(raise_errors=True)` raises the typed errors of errors.py instead. Methods
returning collections Mooncake has no return code for (query_by_regex, batch_query_ip,
batch_replica_clear, alloc_buffer) always raise. The connection is shared by all threads, every
call has a deadline (`timeout`), and a restart of the real client is survived: calls in flight
fail with UnavailableError, the next call reconnects and registers the regions again.

A repeated read on the same host costs no message: the real client says where the bytes of an
object it read lie, and while its read lease holds this client copies them itself
(local_reads.py; `local_reads=False` or STORE_DUMMY_LOCAL_READS=0 turns it off). A first read of
an object in same-host memory costs none either: this client asks the master itself, at the
address the real client gave (direct_reads.py; `direct_reads=False` or STORE_DUMMY_DIRECT_READS=0
turns it off).
"""
import logging
import os
import threading
import time
from typing import Dict, List, Optional, Sequence

from . import errors as E
from ._proto import store_client_pb2 as pb
from .buffer_pool import BufferLease, BufferPool
from .channel import Channel
from .config import to_wire
from ._proto.store_master_pb2 import ReplicateConfig as _WireConfig
from .connection import resolve_endpoint, open_socket
from .dummy_adopt import AdoptCalls
from .dummy_metadata import MetadataCalls
from .cluster_auth import client_secret
from .errors import DeadlineExceededError, InvalidParamsError, StoreError, UnauthenticatedError, UnavailableError, code_name
from .dummy_tasks import TaskCalls
from .protocol import METHODS, plain_key
from .local_reads import DEFAULT_LOCAL_READ_ENTRIES, LocalReads
from .direct_reads import DirectReads
from .direct_puts import DirectPuts
from .call_combiner import CallCombiner
from .shm_region import SharedRegion
from .values import Buf, as_buffer, copy_in, copy_out

log = logging.getLogger("kvcache_store")

MiB = 1024 * 1024
DEFAULT_BUFFER_SIZE = 256 * MiB
DEFAULT_TIMEOUT = 30.0
#: Gets of at most this many bytes come back inside the reply; larger ones go through a lease.
INLINE_GET_BYTES = 64 * 1024
#: Objects up to this size are read here from same-host memory when the real client (or the
#: master) said where. Grants' page tables are filled in by a thread (shm_grant.py), so a first
#: copy takes no page fault per 4 KiB; 4 MiB reads here ran at 2,779-3,862 first reads/s and
#: 6,950-7,128 repeated against 2,000-2,857 and 2,148-4,125 through the real client. Larger ones
#: go through the real client, whose engine copies with two threads (here the copy holds the GIL).
LOCAL_READ_MAX = 4 * MiB
_now = time.monotonic


class _Conn:
    """One connection to the real client and the ids of our regions on it."""

    def __init__(self, channel: Channel, hello):
        self.channel = channel
        self.instance_id = hello.instance_id
        self.client_id = hello.client_id
        self.max_inline = int(hello.max_inline_bytes) or 16 * MiB
        self.shared = True
        self.ids: Dict[str, int] = {}
        self.reg_lock = threading.Lock()


def _switched_on(env, name: str) -> bool:
    """A setting that is on unless the environment says 0/false/no/off."""
    return env.get(name, "").strip().lower() not in ("0", "false", "no", "off")


def _size_env(env, name: str, fallback: int) -> int:
    v = env.get(name)
    if not v:
        return fallback
    try:
        n = int(v)
    except ValueError:
        n = 0
    if n <= 0:
        raise InvalidParamsError(f"{name} must be a positive number of bytes, got {v!r}")
    return n


class DummyClient(MetadataCalls, AdoptCalls, TaskCalls):
    def __init__(self, raise_errors: bool = False):
        self.raise_errors = raise_errors
        self._conn: Optional[_Conn] = None
        self._connect_lock = threading.Lock()
        self._regions: List[SharedRegion] = []
        self._adopted: list = []  # AdoptedMemory, dummy_adopt.py
        self._pool: Optional[BufferPool] = None
        self._closed = False
        self._timeout = DEFAULT_TIMEOUT
        self._registered: Dict[int, int] = {}
        self._late = threading.local()
        self._stats_lock = threading.Lock()
        self._stats = {
            "zero_copy_bytes_put": 0,
            "zero_copy_bytes_get": 0,
            "staged_bytes_put": 0,
            "staged_bytes_get": 0,
            "inline_bytes_put": 0,
            "inline_bytes_get": 0,
            "reconnects": 0,
        }
        self.endpoint = None
        self.instance_id = ""
        self._secret: Optional[bytes] = None
        #: our own reads of same-host memory (local_reads.py); None when turned off
        self._local: Optional[LocalReads] = None
        #: first reads looked up at the master here (direct_reads.py); None when turned off
        self._direct: Optional[DirectReads] = None
        #: puts written into same-host memory here (direct_puts.py); None when turned off
        self._puts: Optional[DirectPuts] = None
        #: first reads and puts of many threads combined into batches (call_combiner.py); None when turned off
        self._reads: Optional[CallCombiner] = None
        self._writes: Optional[CallCombiner] = None

    # ------------------------------------------------------------------ setup

    def setup(
        self,
        local_hostname=None,
        metadata_server=None,
        global_segment_size=0,
        local_buffer_size=None,
        protocol=None,
        rdma_devices=None,
        master_server_addr=None,
        *,
        address: Optional[str] = None,
        socket_path: Optional[str] = None,
        shm_dir: Optional[str] = None,
        buffer_size: Optional[int] = None,
        max_regions: int = 0,
        max_bytes: int = 0,
        acquire_timeout: float = 10.0,
        overflow: bool = True,
        timeout: float = DEFAULT_TIMEOUT,
        spin_us: float = 100.0,
        client_name: Optional[str] = None,
        lazy: bool = False,
        cluster_secret_file: Optional[str] = None,
        local_reads: Optional[bool] = None,
        local_read_entries: int = DEFAULT_LOCAL_READ_ENTRIES,
        direct_reads: Optional[bool] = None,
        direct_puts: Optional[bool] = None,
        combine_calls: Optional[bool] = None,
        env=None,
    ) -> int:
        """Connects to the real client. Mooncake's positional arguments are accepted: the cluster
        ones (hostname, metadata server, segment size, protocol, devices, master) belong to the
        real client and are ignored here; `local_buffer_size` sizes the shared buffer pool.
        A dict as the only argument is read as keyword arguments. `lazy=True`: an unreachable
        real client does not fail setup; each call connects within its own deadline (a cache
        whose store is down at start). `local_reads` (default: on unless STORE_DUMMY_LOCAL_READS
        is 0/false/no/off): repeated reads of same-host memory copy the bytes here while the
        real client's read lease holds, keeping up to `local_read_entries` locations; with them,
        `direct_reads` (default: on unless STORE_DUMMY_DIRECT_READS is 0/false/no/off): a first
        read of same-host memory is looked up at the master here and copied here; with those,
        `direct_puts` (default: on unless STORE_DUMMY_DIRECT_PUTS is 0/false/no/off): a put of at
        most 64 KiB whose placement is same-host memory is made here when the real client allows
        it (its Hello says so). `combine_calls` (default: on unless STORE_DUMMY_COMBINE_CALLS
        is 0/false/no/off): first reads (get_into) and puts (put, put_from of one buffer) of
        threads calling at the same time with the default timeout are made in batch calls
        (call_combiner.py). Returns 0
        (or raises with raise_errors=True; else a negative ErrorCode)."""
        if isinstance(local_hostname, dict):
            return self.setup(**local_hostname)
        try:
            env = os.environ if env is None else env
            if global_segment_size:
                log.info("kvcache_store: global_segment_size is ignored by a dummy client (the real client owns the segment)")
            size = buffer_size or local_buffer_size or _size_env(env, "STORE_DUMMY_BUFFER_SIZE", DEFAULT_BUFFER_SIZE)
            if not isinstance(size, int) or size <= 0:
                raise InvalidParamsError(f"setup: the buffer size must be a positive integer, got {size!r}")
            if not (isinstance(timeout, (int, float)) and timeout > 0):
                raise InvalidParamsError(f"setup: timeout must be a positive number of seconds, got {timeout!r}")
            self._secret = client_secret(cluster_secret_file, {**os.environ, **env})
            if local_reads is None:
                local_reads = _switched_on(env, "STORE_DUMMY_LOCAL_READS")
            if local_reads:
                self._local = LocalReads(self._secret, local_read_entries, self._locate, LOCAL_READ_MAX)
                if direct_reads is None:
                    direct_reads = _switched_on(env, "STORE_DUMMY_DIRECT_READS")
                if direct_reads:
                    self._direct = DirectReads(self._local, self._secret, self._ask_master, spin_us)
                    if direct_puts is None:
                        direct_puts = _switched_on(env, "STORE_DUMMY_DIRECT_PUTS")
                    if direct_puts:
                        self._puts = DirectPuts(self._direct, self._local)
            if combine_calls is None:
                combine_calls = _switched_on(env, "STORE_DUMMY_COMBINE_CALLS")
            if combine_calls:
                self._reads = CallCombiner(
                    lambda key, target, _: self._first_read_into(key, target, None),
                    lambda keys, targets, _: self._first_reads_into(keys, targets, self._deadline(None), None),
                )
                self._writes = CallCombiner(self._one_put, lambda keys, bufs, config: self._batch_write("put", keys, bufs, config, None))
            self._setup(resolve_endpoint(address, socket_path, shm_dir, env), size, max_regions, max_bytes, acquire_timeout, overflow, timeout, spin_us, client_name, lazy)
            return 0
        except (StoreError, TypeError, ValueError) as e:
            e = _as_store_error(e)
            self.close()
            if self.raise_errors:
                raise e from None
            log.error("kvcache_store: setup failed: %s", e)
            return e.code

    def setup_dummy(self, mem_pool_size: int, local_buffer_size: int, server_address: str, **kw) -> int:
        """Mooncake's dummy-client setup: the shared pool holds both sizes; `server_address` is
        the real client's host:port."""
        size = int(mem_pool_size or 0) + int(local_buffer_size or 0)
        return self.setup(buffer_size=size or None, address=server_address, **kw)

    def _setup(self, ep, size, max_regions, max_bytes, acquire_timeout, overflow, timeout, spin_us, client_name, lazy=False) -> None:
        if self._pool is not None:
            raise InvalidParamsError("setup: this client is set up already")
        self.endpoint = ep
        self._timeout = float(timeout)
        self._spin_us = spin_us
        self._client_name = client_name or f"python pid {os.getpid()}"
        primary = self._new_region(size)
        self._pool = BufferPool(
            primary,
            new_region=self._new_region if overflow else None,
            drop_region=self._drop_region,
            max_regions=max_regions,
            max_bytes=max_bytes,
            default_timeout=acquire_timeout,
        )
        try:
            self._connection(_now() + self._timeout)
        except UnavailableError as e:
            if not lazy:
                raise
            log.warning("kvcache_store: real client %s unreachable at setup (%s); calls will connect on demand", ep.describe(), e.message)

    # ------------------------------------------------------------------ regions

    def _new_region(self, size: int) -> SharedRegion:
        r = SharedRegion(self.endpoint.shm_dir, size)
        self._regions.append(r)
        return r

    def _drop_region(self, region: SharedRegion) -> None:
        """Unregisters (waiting for the real client, except inside a late reply's cleanup, which
        runs on the reading thread) and deletes an overflow region."""
        if region in self._regions:
            self._regions.remove(region)
        c = self._conn
        rid = c.ids.pop(region.name, None) if c is not None else None
        if c is not None and rid is not None and not c.channel.closed:
            req = pb.UnregisterRegionRequest(region_id=rid).SerializeToString()
            m = METHODS["UnregisterRegion"]
            if getattr(self._late, "active", False):
                c.channel.call_nowait(m.name, m.index, req)
            else:
                try:
                    c.channel.call(m.name, m.index, req, _now() + min(self._timeout, 5.0))
                except StoreError:
                    pass  # the connection went: the real client released it then
        region.close()

    def _region_id(self, c: _Conn, region: SharedRegion, deadline: float) -> int:
        rid = c.ids.get(region.name)
        if rid is not None:
            return rid
        with c.reg_lock:
            rid = c.ids.get(region.name)
            if rid is None:
                res = self._call(c, "RegisterRegion", pb.RegisterRegionRequest(name=region.name, size=region.size, offset=0), deadline)
                rid = c.ids[region.name] = res.region_id
        return rid

    # ------------------------------------------------------------------ connection

    def _connection(self, deadline: float) -> _Conn:
        c = self._conn
        if c is not None and not c.channel.closed:
            return c
        if self._closed:
            raise UnavailableError("DummyClient: closed")
        if self._pool is None:
            raise UnavailableError("DummyClient: not set up (call setup() first)")
        with self._connect_lock:
            c = self._conn
            if c is not None and not c.channel.closed:
                return c
            c = self._reconnect(deadline)
            self._conn = c
            return c

    def _reconnect(self, deadline: float) -> _Conn:
        wait = 0.05
        attempt = 0
        while True:
            attempt += 1
            try:
                c = self._open(deadline)
                if self.instance_id and c.instance_id != self.instance_id:
                    log.warning("kvcache_store: the real client restarted (instance %s); regions registered again", c.instance_id)
                if self.instance_id:
                    with self._stats_lock:
                        self._stats["reconnects"] += 1
                self.instance_id = c.instance_id
                if self._local is not None:
                    self._local.clear()  # a restarted real client's leases are not the ones we knew
                    self._local.watch(c.channel.fileno())
                return c
            except (StoreError, TypeError, ValueError) as e:
                if self._closed:
                    raise UnavailableError("DummyClient: closed") from None
                if isinstance(e, (InvalidParamsError, UnauthenticatedError)):
                    raise  # a refused secret stays refused
                if _now() + wait > deadline:
                    raise UnavailableError(f"DummyClient: real client {self.endpoint.describe()} unreachable after {attempt} attempt(s): {e.message}") from None
                if attempt == 1:
                    log.warning("kvcache_store: real client %s unreachable (%s); retrying", self.endpoint.describe(), e.message)
                time.sleep(wait)  # backoff between connection attempts
                wait = min(wait * 2, 1.0)

    def _open(self, deadline: float) -> _Conn:
        sock = open_socket(self.endpoint, deadline)
        channel = Channel(sock, self.endpoint.describe(), self._spin_us, self._secret)
        try:
            hello = self._call_on(channel, "Hello", self._hello_request(), deadline)
            self._configure_direct(hello)
            c = _Conn(channel, hello)
            try:
                self._region_id(c, self._pool.primary, deadline)
            except InvalidParamsError as e:
                c.shared = False
                log.warning("kvcache_store: the real client at %s cannot map our shared files (%s); values travel inside messages", channel.where, e.message)
            return c
        except BaseException:
            channel.close()
            raise

    def _hello_request(self):
        return pb.HelloRequest(client_name=self._client_name, protocol_version=1, local_reads=self._local is not None)

    def _ask_master(self) -> None:
        """Asks the real client again where the master is (its master failed us or moved: HA)."""
        deadline = _now() + min(self._timeout, 5.0)
        hello = self._call(self._connection(deadline), "Hello", self._hello_request(), deadline)
        self._configure_direct(hello)

    def _configure_direct(self, hello) -> None:
        """What a Hello reply says of first reads and puts made here."""
        if self._direct is not None:
            self._direct.configure(hello.master_address, hello.te_endpoint)
        if self._puts is not None:
            self._puts.configure(hello.direct_puts, hello.checksums)

    def _call_on(self, channel: Channel, name: str, req, deadline: float, on_late=None):
        m = METHODS[name]
        payload = channel.call(name, m.index, req.SerializeToString(), deadline, on_late, _spins(name, req))
        res = m.response.FromString(payload)
        if res.status_code != 0:
            raise StoreError.from_code(res.status_code, res.error or f"{name}: {E.code_name(res.status_code)}")
        return res

    def _call(self, c: _Conn, name: str, req, deadline: float, on_late=None):
        return self._call_on(c.channel, name, req, deadline, on_late)

    def _read_call(self, c: _Conn, key: str, name: str, req, deadline: float, on_late=None):
        """A read of `key`: its reply's LocalReplica (where the bytes lie) is kept for repeated reads."""
        local = self._local
        if local is None:
            return self._call(c, name, req, deadline, on_late)
        stamp = local.begin()
        res = self._call(c, name, req, deadline, on_late)
        local.end(key, stamp, res)
        return res

    def _in_region(self, buf: Buf) -> bool:
        """`buf` lies in a shared region and the real client maps them: a batch of such buffers
        carries spans only (one of other memory would be staged in one lease for all, which may
        not fit where each alone would)."""
        c = self._conn
        return c is not None and c.shared and buf.address is not None and self._locate(buf.address, buf.size) is not None

    def _combined(self, r, what: str, key: str) -> int:
        """A combined call's result as the single call's: raised again, or a code raised with raise_errors."""
        if isinstance(r, BaseException):
            raise r
        if r < 0 and self.raise_errors:
            raise StoreError.from_code(r, f"{what} {key!r}: {code_name(r)}")
        return r

    def _one_put(self, key: str, buf: Buf, config) -> int:
        self._write("put", key, [buf], config, None)
        return 0

    def _live(self) -> bool:
        """Connected: the locations we keep came from this real client (a reconnection drops them)."""
        c = self._conn
        return c is not None and not c.channel.closed

    def _locate(self, address: int, size: int):
        pool = self._pool
        return pool.locate(address, size) if pool is not None else None

    def _forget(self, keys) -> None:
        """Our own write or removal of `keys`: the locations we knew of them may be stale."""
        local = self._local
        if local is not None:
            local.cache.forget_many(keys)

    def _forget_all(self) -> None:
        if self._local is not None:
            self._local.clear()

    def _deadline(self, timeout: Optional[float]) -> float:
        return _now() + (self._timeout if timeout is None else timeout)

    def _count(self, key: str, n: int) -> None:
        with self._stats_lock:
            self._stats[key] += n

    # ------------------------------------------------------------------ return conventions

    def _code(self, e: Exception, exists_ok: bool = False) -> int:
        e = _as_store_error(e)
        if self.raise_errors:
            raise e
        if exists_ok and e.code == E.OBJECT_ALREADY_EXISTS:
            return 0
        return e.code

    def _item_code(self, r, exists_ok: bool) -> int:
        if r.status_code == E.OBJECT_ALREADY_EXISTS and exists_ok and not self.raise_errors:
            return 0
        return r.status_code

    # ------------------------------------------------------------------ staging

    def _stage(self, c: _Conn, bufs: Sequence[Buf], deadline: float):
        """Spans for `bufs`: in place when inside a region, else copied into one lease (returned,
        to be released by the caller after the call)."""
        pool = self._pool
        locs = [pool.locate(b.address, b.size) if b.address is not None else None for b in bufs]
        outside = sum(b.size for b, loc in zip(bufs, locs) if loc is None)
        lease = None
        if outside:
            lease = pool.try_acquire(outside) or pool.acquire(outside, timeout=max(0.0, deadline - _now()))
        try:
            spans = []
            at = 0
            for b, loc in zip(bufs, locs):
                if loc is None:
                    view = lease.region.view[lease.offset + at:lease.offset + at + b.size]
                    copy_in(view, lease.ptr + at, b)
                    del view
                    loc = (lease.region, lease.offset + at)
                    at += b.size
                region, offset = loc
                spans.append(pb.RegionSpan(region_id=self._region_id(c, region, deadline), offset=offset, length=b.size))
        except BaseException:
            if lease is not None:
                lease.release()
            raise
        return spans, lease, outside

    def _late_release(self, lease: Optional[BufferLease], on_late=None):
        """Cleanup of a call that missed its deadline: the real client may still use the lease
        (and the caller's memory) until its reply comes or the connection ends, so the lease is
        released, and the caller's `on_late` called, only then."""
        if lease is None:
            return on_late

        def release():
            self._late.active = True
            try:
                lease.release()
            finally:
                self._late.active = False
                if on_late is not None:
                    on_late()

        return release

    def _run_with_lease(self, c: _Conn, name: str, req, deadline: float, lease: Optional[BufferLease], on_late=None):
        try:
            res = self._call(c, name, req, deadline, self._late_release(lease, on_late))
        except DeadlineExceededError:
            raise  # the lease is released when the late reply comes
        except BaseException:
            if lease is not None:
                lease.release()
            raise
        if lease is not None:
            lease.release()
        return res

    # ------------------------------------------------------------------ writes

    def _write(self, verb: str, key: str, parts: List[Buf], config, timeout) -> None:
        if not isinstance(key, str) or not key:
            raise InvalidParamsError(f"{verb}: the key must be a non-empty string, got {key!r}")
        deadline = self._deadline(timeout)
        puts = self._puts
        if verb == "put" and puts is not None and self._live() and puts.usable(config, sum(b.size for b in parts)):
            self._forget((key,))
            if puts.put(key, parts, config):
                return
        c = self._connection(deadline)
        self._forget((key,))
        if not c.shared:
            req = pb.PutRequest(key=key, value=b"".join(_bytes_of(b) for b in parts))
            to_wire(config, req.config)
            self._call(c, "Put" if verb == "put" else "Upsert", req, deadline)
            self._count("inline_bytes_put", len(req.value))
            return
        spans, lease, staged = self._stage(c, parts, deadline)
        req = pb.PutFromRequest(key=key, slices=spans)
        to_wire(config, req.config)
        self._run_with_lease(c, "PutFrom" if verb == "put" else "UpsertFrom", req, deadline, lease)
        self._count("staged_bytes_put", staged)
        self._count("zero_copy_bytes_put", sum(b.size for b in parts) - staged)

    def put(self, key: str, value, config=None, *, timeout: Optional[float] = None) -> int:
        """Stores `value` (bytes-like, numpy array, torch tensor, BufferLease, or a list of them
        stored as one object). 0 on success (an existing key counts as success, as in Mooncake;
        with raise_errors it raises ObjectExistsError)."""
        try:
            return self._put("put", key, _parts(value, "put"), config, timeout)
        except (StoreError, TypeError, ValueError) as e:
            return self._code(e, exists_ok=True)

    def _put(self, what: str, key: str, parts: List[Buf], config, timeout) -> int:
        writes = self._writes
        if writes is None or timeout is not None or len(parts) != 1 or not plain_key(key) or not self._in_region(parts[0]):
            self._write("put", key, parts, config, timeout)
            return 0
        # many threads' puts go in batches of one config (call_combiner.py)
        return self._combined(writes.call(key, parts[0], config), what, key)

    def upsert(self, key: str, value, config=None, *, timeout: Optional[float] = None) -> int:
        """Inserts or replaces. 0 on success."""
        try:
            self._write("upsert", key, _parts(value, "upsert"), config, timeout)
            return 0
        except (StoreError, TypeError, ValueError) as e:
            return self._code(e)

    def put_from(self, key: str, buffer_ptr, size: Optional[int] = None, config=None, *, timeout: Optional[float] = None) -> int:
        """Stores `size` bytes at `buffer_ptr` (a pointer, or any buffer; size optional then).
        Zero copy when the memory lies in a shared region (alloc_buffer)."""
        try:
            return self._put("put_from", key, [as_buffer(buffer_ptr, size, what=f"put_from {key!r}")], config, timeout)
        except (StoreError, TypeError, ValueError) as e:
            return self._code(e, exists_ok=True)

    def upsert_from(self, key: str, buffer_ptr, size: Optional[int] = None, config=None, *, timeout: Optional[float] = None) -> int:
        try:
            self._write("upsert", key, [as_buffer(buffer_ptr, size, what=f"upsert_from {key!r}")], config, timeout)
            return 0
        except (StoreError, TypeError, ValueError) as e:
            return self._code(e)

    def _batch_write(self, verb: str, keys: Sequence[str], bufs: List[Buf], config, timeout, on_late=None, direct: bool = True) -> List[int]:
        if len(keys) != len(bufs):
            raise InvalidParamsError(f"batch {verb}: {len(keys)} keys but {len(bufs)} values")
        if not keys:
            return []
        puts = self._puts if direct else None
        if verb == "put" and puts is not None and self._live() and _distinct_keys(keys) and puts.usable(config, max(b.size for b in bufs)):
            self._forget(keys)
            here = [0 if r == E.OBJECT_ALREADY_EXISTS and not self.raise_errors else r for r in puts.batch_put(keys, bufs, config)]
            rest = [i for i, r in enumerate(here) if r is None]
            if rest:
                there = self._batch_write(verb, [keys[i] for i in rest], [bufs[i] for i in rest], config, timeout, on_late, direct=False)
                for i, r in zip(rest, there):
                    here[i] = r
            return here
        deadline = self._deadline(timeout)
        c = self._connection(deadline)
        exists_ok = verb == "put"
        self._forget(keys)
        if not c.shared:
            req = pb.BatchPutRequest()
            wire = _WireConfig()
            to_wire(config, wire)
            add = req.items.add
            for k, b in zip(keys, bufs):
                add(key=k, value=_bytes_of(b), config=wire)
            res = self._call(c, "BatchPut" if verb == "put" else "BatchUpsert", req, deadline)
            self._count("inline_bytes_put", sum(b.size for b in bufs))
        else:
            spans, lease, staged = self._stage(c, bufs, deadline)
            req = pb.BatchPutFromRequest()
            wire = _WireConfig()
            to_wire(config, wire)  # once: every item has the same
            add = req.items.add
            for k, s in zip(keys, spans):
                add(key=k, slices=(s,), config=wire)
            res = self._run_with_lease(c, "BatchPutFrom" if verb == "put" else "BatchUpsertFrom", req, deadline, lease, on_late)
            self._count("staged_bytes_put", staged)
            self._count("zero_copy_bytes_put", sum(b.size for b in bufs) - staged)
        out = [self._item_code(r, exists_ok) for r in res.results]
        return out + [E.INTERNAL_ERROR] * (len(keys) - len(out))

    def batch_put_from(self, keys: Sequence[str], buffer_ptrs: Sequence, sizes: Sequence[int], config=None, *, timeout: Optional[float] = None, on_late=None) -> List[int]:
        """Stores each key from its buffer in one call: a list of 0 / negative ErrorCode per key.
        `on_late`: called (on a reading thread) when a call that missed its deadline is answered
        late or its connection ends: only then has the real client stopped reading the buffers."""
        return self._batch("put", keys, lambda: self._bufs(keys, buffer_ptrs, sizes, "batch_put_from"), config, timeout, on_late)

    def batch_upsert_from(self, keys: Sequence[str], buffer_ptrs: Sequence, sizes: Sequence[int], config=None, *, timeout: Optional[float] = None) -> List[int]:
        return self._batch("upsert", keys, lambda: self._bufs(keys, buffer_ptrs, sizes, "batch_upsert_from"), config, timeout)

    def batch_put(self, keys: Sequence[str], values: Sequence, config=None, *, timeout: Optional[float] = None) -> List[int]:
        """Stores each key's value (bytes-like, numpy, torch...): a list of 0 / negative codes."""
        return self._batch("put", keys, lambda: [as_buffer(v, what=f"batch_put {k!r}") for k, v in zip(keys, values)], config, timeout)

    def batch_upsert(self, keys: Sequence[str], values: Sequence, config=None, *, timeout: Optional[float] = None) -> List[int]:
        return self._batch("upsert", keys, lambda: [as_buffer(v, what=f"batch_upsert {k!r}") for k, v in zip(keys, values)], config, timeout)

    def put_batch(self, keys: Sequence[str], values: Sequence, config=None, *, timeout: Optional[float] = None) -> int:
        """Mooncake's form of batch_put: 0 when every key is stored, else the first failure."""
        return next((r for r in self.batch_put(keys, values, config, timeout=timeout) if r != 0), 0)

    def upsert_batch(self, keys: Sequence[str], values: Sequence, config=None, *, timeout: Optional[float] = None) -> int:
        return next((r for r in self.batch_upsert(keys, values, config, timeout=timeout) if r != 0), 0)

    def _batch(self, verb, keys, make_bufs, config, timeout, on_late=None) -> List[int]:
        try:
            return self._batch_write(verb, keys, make_bufs(), config, timeout, on_late)
        except (StoreError, TypeError, ValueError) as e:
            return [self._code(e)] * len(keys)

    def _bufs(self, keys, ptrs, sizes, what: str, writable: bool = False) -> List[Buf]:
        if not (len(keys) == len(ptrs) == len(sizes)):
            raise InvalidParamsError(f"{what}: {len(keys)} keys, {len(ptrs)} buffers and {len(sizes)} sizes must match")
        return [as_buffer(p, s, writable, f"{what} {k!r}") for k, p, s in zip(keys, ptrs, sizes)]

    # ------------------------------------------------------------------ reads

    def _get(self, key: str, timeout) -> bytes:
        local = self._local
        if local is not None and self._live():
            value = local.read_bytes(key)
            if value is not None:
                return value
            direct = self._direct
            if direct is not None and direct.usable():
                value = direct.read_bytes(key)
                if value is not None:
                    return value
        deadline = self._deadline(timeout)
        c = self._connection(deadline)
        res = self._read_call(c, key, "Get", pb.GetRequest(key=key, max_inline=INLINE_GET_BYTES if c.shared else c.max_inline), deadline)
        size = int(res.size)
        if len(res.value) == size:
            self._count("inline_bytes_get", size)
            return res.value
        if not c.shared:
            raise InvalidParamsError(f"get {key!r}: {size} bytes exceed the {c.max_inline}-byte limit of values inside messages")
        lease = self._pool.try_acquire(size) or self._pool.acquire(size, timeout=max(0.0, deadline - _now()))
        out = self._get_into_lease(c, key, lease, size, deadline)
        self._count("staged_bytes_get", len(out))
        return out

    def _get_into_lease(self, c: _Conn, key: str, lease: BufferLease, size: int, deadline: float) -> bytes:
        try:
            span = pb.RegionSpan(region_id=self._region_id(c, lease.region, deadline), offset=lease.offset, length=size)
        except BaseException:
            lease.release()
            raise
        res = self._run_with_lease_keep(c, "GetInto", pb.GetIntoRequest(key=key, target=span), deadline, lease, key=key)
        try:
            return bytes(lease.region.view[lease.offset:lease.offset + int(res.size)])
        finally:
            lease.release()

    def _run_with_lease_keep(self, c, name, req, deadline, lease, on_late=None, key=None):
        """Like _run_with_lease, but on success the caller still holds the lease. With `key`: a
        read of it (_read_call)."""
        try:
            if key is not None:
                return self._read_call(c, key, name, req, deadline, self._late_release(lease, on_late))
            return self._call(c, name, req, deadline, self._late_release(lease, on_late))
        except DeadlineExceededError:
            raise
        except BaseException:
            lease.release()
            raise

    def get(self, key: str, *, timeout: Optional[float] = None) -> bytes:
        """The value, or b"" when it is missing or the call failed (as in Mooncake; with
        raise_errors the typed error, e.g. ObjectNotFoundError)."""
        try:
            return self._get(key, timeout)
        except (StoreError, TypeError, ValueError) as e:
            self._code(e)
            return b""

    def _get_into(self, c: _Conn, key: str, target: Buf, deadline: float) -> int:
        loc = self._pool.locate(target.address, target.size) if target.address is not None and c.shared else None
        if loc is not None:
            region, offset = loc
            span = pb.RegionSpan(region_id=self._region_id(c, region, deadline), offset=offset, length=target.size)
            n = int(self._read_call(c, key, "GetInto", pb.GetIntoRequest(key=key, target=span), deadline).size)
            self._count("zero_copy_bytes_get", n)
            return n
        if target.size <= INLINE_GET_BYTES or not c.shared:
            res = self._read_call(c, key, "Get", pb.GetRequest(key=key, max_inline=min(target.size, c.max_inline)), deadline)
            if len(res.value) != int(res.size):
                raise InvalidParamsError(f"get_into {key!r}: the buffer holds {target.size} B, the object is {int(res.size)} B")
            n = len(res.value)
            copy_out(target, memoryview(res.value), 0, n) if target.view is not None else _memmove_from_bytes(target.address, res.value)
            self._count("inline_bytes_get", n)
            return n
        lease = self._pool.try_acquire(target.size) or self._pool.acquire(target.size, timeout=max(0.0, deadline - _now()))
        try:
            span = pb.RegionSpan(region_id=self._region_id(c, lease.region, deadline), offset=lease.offset, length=target.size)
        except BaseException:
            lease.release()
            raise
        res = self._run_with_lease_keep(c, "GetInto", pb.GetIntoRequest(key=key, target=span), deadline, lease, key=key)
        try:
            n = int(res.size)
            copy_out(target, lease.region.view[lease.offset:lease.offset + n], lease.ptr, n)
            self._count("staged_bytes_get", n)
            return n
        finally:
            lease.release()

    def get_into(self, key: str, buffer_ptr, size: Optional[int] = None, *, timeout: Optional[float] = None) -> int:
        """Reads the value into `buffer_ptr` (a pointer with its size, or a writable buffer):
        the number of bytes read, or a negative ErrorCode (e.g. the buffer is too small)."""
        try:
            target = as_buffer(buffer_ptr, size, writable=True, what=f"get_into {key!r}")
            local = self._local
            if local is not None and self._live():
                n = local.read_into(key, target)
                if n is not None:
                    return n
            reads = self._reads
            if reads is None or timeout is not None or not plain_key(key) or not self._in_region(target):
                return self._first_read_into(key, target, timeout)
            # many threads' first reads go in batches (call_combiner.py); one call has one deadline
            return self._combined(reads.call(key, target), "get_into", key)
        except (StoreError, TypeError, ValueError) as e:
            return self._code(e)

    def _first_read_into(self, key: str, target: Buf, timeout: Optional[float]) -> int:
        """get_into of a key with no location known here: looked up at the master here when it
        is in same-host memory (direct_reads.py), else through the real client."""
        local = self._local
        if local is not None and self._live():
            direct = self._direct
            # larger objects are read through the real client anyway (LOCAL_READ_MAX)
            if direct is not None and target.size <= LOCAL_READ_MAX and direct.usable():
                n = direct.read_into(key, target)
                if n is not None:
                    return n
        deadline = self._deadline(timeout)
        return self._get_into(self._connection(deadline), key, target, deadline)

    def batch_get_into(self, keys: Sequence[str], buffer_ptrs: Sequence, sizes: Sequence[int], *, timeout: Optional[float] = None, on_late=None) -> List[int]:
        """Reads each key into its buffer in one call: bytes read or a negative code per key.
        `on_late`: as in batch_put_from; only then has the real client stopped writing them."""
        try:
            targets = self._bufs(keys, buffer_ptrs, sizes, "batch_get_into", writable=True)
            if not targets:
                return []
            deadline = self._deadline(timeout)
            local = self._local
            if local is None or not self._live():
                return self._batch_get_into(keys, targets, deadline, on_late)
            # the keys whose location we know are read here; the rest in one call
            out = None
            if len(local.cache):
                read_into = local.read_into
                for i, (k, t) in enumerate(zip(keys, targets)):
                    n = read_into(k, t)
                    if n is not None:
                        if out is None:
                            out = [None] * len(keys)
                        out[i] = n
            if out is None:
                return self._first_reads_into(keys, targets, deadline, on_late)
            return self._fill(out, keys, targets, lambda ks, ts: self._first_reads_into(ks, ts, deadline, on_late))
        except (StoreError, TypeError, ValueError) as e:
            return [self._code(e)] * len(keys)

    def _first_reads_into(self, keys: Sequence[str], targets: List[Buf], deadline: float, on_late) -> List[int]:
        """batch_get_into of keys with no location known here: one lookup at the master here for
        objects in same-host memory (direct_reads.py), the rest in one call through the real client."""
        direct = self._direct
        if direct is None or not self._live() or not direct.usable():
            return self._batch_get_into(keys, targets, deadline, on_late)
        out = direct.read_many(keys, targets, deadline)
        if out is None:
            return self._batch_get_into(keys, targets, deadline, on_late)
        return self._fill(out, keys, targets, lambda ks, ts: self._batch_get_into(ks, ts, deadline, on_late))

    @staticmethod
    def _fill(out: List[Optional[int]], keys, targets, read) -> List[int]:
        """`out` with each None replaced by what `read(keys, targets)` of those keys gives."""
        rest = [i for i, n in enumerate(out) if n is None]
        if rest:
            for i, n in zip(rest, read([keys[i] for i in rest], [targets[i] for i in rest])):
                out[i] = n
        return out

    def _batch_get_into(self, keys: Sequence[str], targets: List[Buf], deadline: float, on_late) -> List[int]:
        """batch_get_into through the real client: one BatchGetInto."""
        try:
            c = self._connection(deadline)
            if not c.shared:
                return [self._item_get_into(c, k, t, deadline) for k, t in zip(keys, targets)]
            pool = self._pool
            locs = [pool.locate(t.address, t.size) if t.address is not None else None for t in targets]
            staged = sum(t.size for t, loc in zip(targets, locs) if loc is None)
            lease = None
            if staged:
                lease = pool.try_acquire(staged) or pool.acquire(staged, timeout=max(0.0, deadline - _now()))
            req = pb.BatchGetIntoRequest()
            places = []
            at = 0
            try:
                for k, t, loc in zip(keys, targets, locs):
                    if loc is None:
                        loc = (lease.region, lease.offset + at)
                        places.append(at)
                        at += t.size
                    else:
                        places.append(None)
                    region, offset = loc
                    req.items.add(key=k, target=pb.RegionSpan(region_id=self._region_id(c, region, deadline), offset=offset, length=t.size))
            except BaseException:
                if lease is not None:
                    lease.release()
                raise
            local = self._local
            stamp = local.begin() if local is not None else None
            res = self._run_with_lease_keep(c, "BatchGetInto", req, deadline, lease, on_late) if lease else self._call(c, "BatchGetInto", req, deadline, on_late)
            if stamp is not None:
                local.end_many(keys, stamp, res.results)
            try:
                out = []
                staged_bytes = zero_copy_bytes = 0
                for t, place, r in zip(targets, places, res.results):
                    if r.status_code != 0:
                        out.append(r.status_code)
                        continue
                    n = int(r.size)
                    if place is not None:
                        src = lease.region.view[lease.offset + place:lease.offset + place + n]
                        copy_out(t, src, lease.ptr + place, n)
                        del src
                        staged_bytes += n
                    else:
                        zero_copy_bytes += n
                    out.append(n)
                if staged_bytes:
                    self._count("staged_bytes_get", staged_bytes)
                self._count("zero_copy_bytes_get", zero_copy_bytes)
                return out + [E.INTERNAL_ERROR] * (len(keys) - len(out))
            finally:
                if lease is not None:
                    lease.release()
        except (StoreError, TypeError, ValueError) as e:
            return [self._code(e)] * len(keys)

    def _item_get_into(self, c, key, target, deadline) -> int:
        try:
            return self._get_into(c, key, target, deadline)
        except (StoreError, TypeError, ValueError) as e:
            if isinstance(e, UnavailableError):
                raise
            return e.code

    def batch_get(self, keys: Sequence[str], *, timeout: Optional[float] = None) -> List[bytes]:
        """Each key's value, b"" for a key missing or failed (Mooncake's get_batch)."""
        try:
            if not keys:
                return []
            deadline = self._deadline(timeout)
            c = self._connection(deadline)
            try:
                res = self._call(c, "BatchGet", pb.BatchGetRequest(keys=list(keys)), deadline)
            except InvalidParamsError:
                # too large to come back inside one reply: one get per key, each through a lease
                return [self.get(k, timeout=max(0.001, deadline - _now())) for k in keys]
            out = [r.value if r.status_code == 0 else b"" for r in res.results]
            self._count("inline_bytes_get", sum(len(v) for v in out))
            return out + [b""] * (len(keys) - len(out))
        except (StoreError, TypeError, ValueError) as e:
            self._code(e)
            return [b""] * len(keys)

    get_batch = batch_get

    # ------------------------------------------------------------------ buffers

    def alloc_buffer(self, size: int, timeout: Optional[float] = None) -> BufferLease:
        """A lease of `size` bytes in the shared region (`.buffer` memoryview, `.ptr`, `.size`,
        `.release()`, context manager): put_from / get_into on it copy nothing. Waits up to
        `timeout` seconds (default: the pool's acquire_timeout) in FIFO order; raises
        BufferExhaustedError after that."""
        if self._closed or self._pool is None:
            raise UnavailableError("DummyClient: closed" if self._closed else "DummyClient: not set up (call setup() first)")
        return self._pool.acquire(size, timeout, tracked=True)

    def register_buffer(self, buffer_ptr: int, size: int) -> int:
        """Memory inside a shared region needs nothing; other memory is accepted and remembered:
        puts from it and gets into it are staged through a lease (one copy here)."""
        try:
            b = as_buffer(buffer_ptr, size, what="register_buffer")
            if self._pool is None or self._pool.locate(b.address, b.size) is None:
                self._registered[b.address] = b.size
            return 0
        except (StoreError, TypeError, ValueError) as e:
            return self._code(e)

    def unregister_buffer(self, buffer_ptr: int) -> int:
        self._registered.pop(buffer_ptr, None)
        return 0

    def disconnect(self) -> None:
        """Drops the connection to the real client: calls in flight fail, the cleanups of late
        calls run (their on_late too), and the next call reconnects within its deadline."""
        c = self._conn
        if c is not None:
            c.channel.close("dropped by disconnect()")

    @property
    def local_read_stats(self) -> dict:
        """Reads served from same-host memory here (`hits`), reads that had a cached location but
        went through the real client (`fallbacks`: a check failed), and locations held (`entries`);
        first reads looked up at the master and served here (`direct`, among the hits) and those
        that went through the real client after all (`direct_fallbacks`)."""
        out = self._local.stats() if self._local is not None else {"hits": 0, "fallbacks": 0, "entries": 0}
        out.update(self._direct.stats() if self._direct is not None else {"direct": 0, "direct_fallbacks": 0})
        return out

    @property
    def direct_put_stats(self) -> dict:
        """Objects put into same-host memory here (`direct_puts`: no message to the real client;
        `direct_put_bytes`: their bytes, copied from the caller's memory straight into the store's)
        and those tried here that went through the real client after all (`direct_put_fallbacks`)."""
        return self._puts.stats() if self._puts is not None else {"direct_puts": 0, "direct_put_bytes": 0, "direct_put_fallbacks": 0}

    def stats(self) -> dict:
        """Bytes moved per path (zero copy, staged through a lease, inline in messages),
        reconnections, local reads (local_read_stats), puts made here (direct_put_stats), first
        reads and puts combined into batches (combined_reads, combined_puts: calls made and the
        single calls they carried in batches), and the
        buffer pool's state."""
        with self._stats_lock:
            out = dict(self._stats)
        out["local_reads"] = self.local_read_stats
        out["direct_puts"] = self.direct_put_stats
        comb = self._reads
        out["combined_reads"] = {"calls": comb.calls, "batched": comb.batched} if comb else {}
        comb = self._writes
        out["combined_puts"] = {"calls": comb.calls, "batched": comb.batched} if comb else {}
        out["pool"] = self._pool.stats() if self._pool else {}
        out["registered_buffers"] = len(self._registered)
        c = self._conn
        out["shared_memory"] = bool(c.shared) if c else None
        return out

    # ------------------------------------------------------------------ metadata

    def _simple(self, name: str, req, timeout):
        deadline = self._deadline(timeout)
        return self._call(self._connection(deadline), name, req, deadline)

    # ------------------------------------------------------------------ end

    def close(self) -> int:
        """Closes the connection (the real client releases our regions), then unmaps and deletes
        the region files. Leases still held stay readable until released."""
        if self._closed:
            return 0
        self._closed = True
        if self._pool is not None:
            self._pool.close()
        c = self._conn
        self._conn = None
        if c is not None:
            c.channel.close()
        if self._direct is not None:
            self._direct.close()
        if self._local is not None:
            self._local.close()
        for r in self._regions:
            r.close()
        self._regions.clear()
        return 0

    def __enter__(self) -> "DummyClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


#: A GetInto of at least this many bytes does not spin for its reply: the real client's engine
#: copies them with two threads, and on a 2-core machine a spinning caller takes one of their
#: cores. 4 MiB first reads through the real client, Python rows of bench:sidecar against a
#: bench-shaped cluster: 1,881-2,405 reads/s spinning 100 us, 2,667-2,865 not; in bench:sidecar,
#: two alternated pairs, 0.35-0.37x -> 0.41x memcpy in A, 0.40-0.59x -> 0.44-0.60x in B. Puts of
#: 4 MiB gained nothing (they keep the spin), and 1 MiB reads, looked up at the master, lose
#: without it.
NO_SPIN_BYTES = 2 << 20


def _spins(name: str, req) -> bool:
    """Whether the caller of `name` may spin for its reply (Channel.call)."""
    return name != "GetInto" or req.target.length < NO_SPIN_BYTES


def _distinct_keys(keys: Sequence[str]) -> bool:
    """Whether every key is a non-empty string and appears once (else the real client says what is wrong, per key)."""
    return all(isinstance(k, str) and k for k in keys) and len(set(keys)) == len(keys)


def _as_store_error(e: Exception) -> StoreError:
    """Wrong argument types (caught by protobuf or Python) become InvalidParamsError."""
    if isinstance(e, StoreError):
        return e
    err = InvalidParamsError(f"invalid argument: {e}")
    err.__cause__ = e
    return err


def _parts(value, what: str) -> List[Buf]:
    if isinstance(value, (list, tuple)):
        if not value:
            raise InvalidParamsError(f"{what}: the value is an empty list")
        return [as_buffer(v, what=what) for v in value]
    return [as_buffer(value, what=what)]


def _bytes_of(b: Buf) -> bytes:
    if b.view is not None:
        return b.view.tobytes()
    import ctypes

    return ctypes.string_at(b.address, b.size)


def _memmove_from_bytes(address: int, data: bytes) -> None:
    import ctypes

    ctypes.memmove(address, data, len(data))
