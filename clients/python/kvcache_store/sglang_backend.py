"""KVCacheStoreHiCache: SGLang's HiCache storage backend (its L3 tier) on kvcache-store.

SGLang loads it without any change to SGLang:

    --enable-hierarchical-cache --hicache-storage-backend dynamic
    --hicache-storage-backend-extra-config '{"backend_name": "kvcache_store",
        "module_path": "kvcache_store.sglang_backend", "class_name": "KVCacheStoreHiCache",
        "interface_v1": 1}'

`interface_v1: 1` makes SGLang's HiCacheController use the zero-copy page path (batch_exists,
batch_get_v1, batch_set_v1 on host-pool indices); without it SGLang uses the plain get/set path,
which copies each page through a temporary tensor (served too, on keys of its own).

Zero copy: register_mem_pool_host adopts the host pool's memory as a shared region in place
(DummyClient.adopt_memory: the pool keeps its addresses and bytes, now in a region file the store
service maps), so a page moves between the pool and the cluster with no copy in the engine
process. Pages that straddle an unaligned edge of the pool, and every page of a pool pinned for a
GPU (whose pinning a remap would break), are staged through the client's buffer pool (one memmove).

Keys: sglang_keys.py (a fingerprint of model, dtype, page size, layout, geometry and the rank's
shard; then the page hash and the part: K and V apart for MHA, one object for MLA, per layer in the
layer_first layout).

The store is a cache: every call has a deadline (`timeout`), an unreachable store or a failed call
is a miss (the engine recomputes), and after a failure that says the store is unreachable calls
are skipped for a backoff (breaker.py) so requests do not each wait out a deadline. A zero-copy
call that misses its deadline returns only once the store service is done with the pool's memory
(its late reply, or the connection dropped after `late_grace` seconds): SGLang reuses the pages of
a failed transfer, and a late write into them would corrupt another request's KV.

extra_config keys (all optional): address ("host:port" of the store service, default
$STORE_SIDECAR_ADDRESS), socket_path, shm_dir (default $STORE_SHM_DIR or /dev/shm), buffer_size
(staging pool bytes, default 64 MiB), timeout (seconds per call, default 5), late_grace (default
30), adopt_host_pool (default true), namespace (separates deployments that must not share pages).
"""
import logging
import re
import threading
import time
from typing import Any, List, Optional

import torch
from sglang.srt.mem_cache.hicache_storage import HiCacheStorage, HiCacheStorageConfig, HiCacheStorageExtraInfo, PoolName

from . import errors as E
from .breaker import Breaker
from .dummy_client import DummyClient
from .errors import DeadlineExceededError, ObjectNotFoundError, StoreError, UnavailableError
from .sglang_keys import MHA, MLA, PageFormat, flat_key, leading, page_keys, pages_ok, part_names

log = logging.getLogger("kvcache_store.sglang")

DEFAULT_TIMEOUT = 5.0
DEFAULT_LATE_GRACE = 30.0
DEFAULT_BUFFER_SIZE = 64 << 20
_PING_KEY = "sglang/ping"


class KVCacheStoreHiCache(HiCacheStorage):
    def __init__(self, storage_config: HiCacheStorageConfig, kwargs: Optional[dict] = None, *, client: Optional[DummyClient] = None, breaker: Optional[Breaker] = None):
        """SGLang's factory calls this with the storage config and a dict of extra arguments."""
        extra = dict(storage_config.extra_config or {})
        self.storage_config = storage_config
        self.zero_copy = bool(extra.get("interface_v1", 0))
        self.timeout = float(extra.get("timeout", DEFAULT_TIMEOUT))
        self.late_grace = float(extra.get("late_grace", DEFAULT_LATE_GRACE))
        self.adopt_host_pool = bool(extra.get("adopt_host_pool", True))
        self.namespace = str(extra.get("namespace", ""))
        if self.timeout <= 0 or self.late_grace <= 0:
            raise ValueError(f"kvcache_store: timeout and late_grace must be positive seconds, got {self.timeout}, {self.late_grace}")
        self.breaker = breaker or Breaker()
        self.client = client or DummyClient(raise_errors=True)
        if client is None:
            ret = self.client.setup(
                address=extra.get("address"),
                socket_path=extra.get("socket_path"),
                shm_dir=extra.get("shm_dir"),
                buffer_size=int(extra.get("buffer_size", DEFAULT_BUFFER_SIZE)),
                timeout=self.timeout,
                lazy=True,
                client_name=f"sglang hicache tp{storage_config.tp_rank}/{storage_config.tp_size} pp{storage_config.pp_rank}",
            )
            if ret != 0:  # not reached with raise_errors; kept for a client passed in without it
                raise RuntimeError(f"kvcache_store: DummyClient.setup failed ({E.code_name(ret)})")
        self.mem_pool_host = None
        self.format: Optional[PageFormat] = None
        self.prefix: Optional[str] = None
        self.parts: List[str] = []
        self.adopted: list = []  # AdoptedMemory (adopted_memory.py)
        self._lock = threading.Lock()
        self._counters = {"pages_read": 0, "pages_missed": 0, "pages_written": 0, "pages_failed": 0, "calls_failed": 0, "late_settled": 0, "late_dropped": 0}
        self._metrics = {"prefetch_pgs": [], "backup_pgs": [], "prefetch_bandwidth": [], "backup_bandwidth": []}

    # ------------------------------------------------------------------ registration

    def register_mem_pool_host(self, mem_pool_host) -> None:
        """Learns the pool's page format (and so the keys), then adopts its memory in place."""
        super().register_mem_pool_host(mem_pool_host)
        pool = mem_pool_host
        if getattr(pool, "kv_buffer", None) is None:
            raise NotImplementedError("kvcache_store: this host pool has no KV buffer of its own (a hybrid model's logical pool); not served")
        cfg = self.storage_config
        if cfg.should_split_heads:
            raise NotImplementedError("kvcache_store: heterogeneous tensor-parallel sizes (tp_lcm_size, split heads) are not served")
        kind = MLA if cfg.is_mla_model else MHA
        try:
            ptrs, sizes = pool.get_page_buffer_meta(torch.arange(pool.page_size, dtype=torch.int64))
            self.parts = part_names(kind, pool.layout, len(ptrs), pool.layer_num)
        except (ValueError, NotImplementedError, AssertionError) as e:
            raise NotImplementedError(f"kvcache_store: host pool layout {pool.layout!r} is not served: {e}") from e
        geometry = (pool.head_num, pool.head_dim, getattr(pool, "v_head_dim", pool.head_dim)) if kind == MHA else (pool.kv_cache_dim,)
        self.format = PageFormat(
            model=cfg.model_name or "",
            kind=kind,
            dtype=str(pool.dtype),
            page_size=pool.page_size,
            layout=pool.layout,
            layer_num=pool.layer_num,
            geometry=tuple(int(g) for g in geometry),
            tp_rank=cfg.tp_rank,
            tp_size=cfg.tp_size,
            pp_rank=cfg.pp_rank,
            pp_size=cfg.pp_size,
            cp_rank=cfg.attn_cp_rank,
            cp_size=cfg.attn_cp_size,
            dcp_rank=cfg.dcp_rank,
            dcp_size=cfg.dcp_size,
            namespace=self.namespace,
        )
        self.prefix = self.format.prefix()
        log.info("kvcache_store: HiCache pages under %s/ (%s, parts %s of %s B)", self.prefix, "zero-copy v1" if self.zero_copy else "plain get/set", self.parts, list(sizes))
        if self.adopt_host_pool:
            self._adopt(pool)

    def _adopt(self, pool) -> None:
        buffers = pool.kv_buffer if isinstance(pool.kv_buffer, (list, tuple)) else [pool.kv_buffer]
        if getattr(pool, "pin_memory", False) and torch.cuda.is_available():
            log.warning("kvcache_store: the host pool is pinned for the GPU; it is not remapped (that would undo the pinning): pages are staged, one memmove each way")
            return
        for t in buffers:
            try:
                self.adopted.append(self.client.adopt_memory(t.data_ptr(), t.numel() * t.element_size()))
            except StoreError as e:
                log.warning("kvcache_store: the host pool could not be adopted as a shared region (%s): pages are staged, one memmove each way", e)

    def register_mem_host_pool_v2(self, host_pool, host_pool_name) -> None:
        if host_pool_name in (PoolName.KV, "kv"):
            return
        raise NotImplementedError(f"kvcache_store: host pool {host_pool_name!r} (hybrid models: Mamba, SWA, indexer...) is not served; only the KV pool")

    # ------------------------------------------------------------------ calls

    def _count(self, **kw) -> None:
        with self._lock:
            for k, v in kw.items():
                self._counters[k] += v

    def _require(self) -> str:
        if self.prefix is None:
            raise RuntimeError("kvcache_store: register_mem_pool_host() must come first (the keys depend on the pool's format)")
        return self.prefix

    def _guarded(self, what: str, fn):
        """Runs one store call; None when the breaker skips it or it fails (a miss)."""
        if not self.breaker.allow():
            return None
        try:
            out = fn()
        except UnavailableError as e:
            self.breaker.failed()
            self._count(calls_failed=1)
            log.warning("kvcache_store: %s: store unreachable, a miss (%s)", what, e.message)
            return None
        except StoreError as e:
            self._count(calls_failed=1)
            log.warning("kvcache_store: %s failed, a miss: %s", what, e)
            return None
        self.breaker.succeeded()
        return out

    def _transfer(self, what: str, fn, keys, ptrs, sizes):
        """A zero-copy batch call on pool memory; on a missed deadline it returns (None) only once
        the store service is done with that memory."""
        done = threading.Event()

        def call():
            try:
                return fn(keys, ptrs, sizes, timeout=self.timeout, on_late=done.set)
            except DeadlineExceededError:
                self._settle(done)
                raise

        return self._guarded(what, call)

    def _settle(self, done: threading.Event) -> None:
        """Waits for the late reply of a call on pool memory. Small calls read the socket (a late
        reply is delivered by whoever reads); past late_grace the connection is dropped, which
        ends the call for this client."""
        end = time.monotonic() + self.late_grace
        while not done.is_set():
            left = end - time.monotonic()
            if left <= 0:
                self._count(late_dropped=1)
                log.error("kvcache_store: the store service did not finish a transfer within %.0f s of its deadline; dropping the connection", self.timeout + self.late_grace)
                self.client.disconnect()
                return
            try:
                self.client.is_exist(_PING_KEY, timeout=min(1.0, left))
            except StoreError:
                pass
        self._count(late_settled=1)

    # ------------------------------------------------------------------ zero-copy page path (interface_v1)

    def _page_meta(self, keys: List[str], host_indices: torch.Tensor):
        pool = self.mem_pool_host
        if host_indices.numel() != len(keys) * pool.page_size:
            raise ValueError(f"kvcache_store: {len(keys)} pages need {len(keys) * pool.page_size} host indices, got {host_indices.numel()}")
        ptrs, sizes = pool.get_page_buffer_meta(host_indices)
        if len(ptrs) != len(keys) * len(self.parts):
            raise ValueError(f"kvcache_store: the pool gave {len(ptrs)} buffers for {len(keys)} pages of {len(self.parts)} parts")
        return page_keys(self._require(), keys, self.parts), ptrs, sizes

    def batch_exists(self, keys: List[str], extra_info: Optional[HiCacheStorageExtraInfo] = None) -> int:
        """How many pages from the start are stored whole (all parts)."""
        if not keys:
            return 0
        prefix = self._require()
        query = page_keys(prefix, keys, self.parts) if self.zero_copy else [flat_key(prefix, k) for k in keys]
        per = len(self.parts) if self.zero_copy else 1
        res = self._guarded("batch_exists", lambda: self.client.batch_is_exist(query, timeout=self.timeout))
        if res is None:
            return 0
        return leading(pages_ok([r == 1 for r in res], per))

    def batch_get_v1(self, keys: List[str], host_indices: torch.Tensor, extra_info: Optional[HiCacheStorageExtraInfo] = None) -> List[bool]:
        """Reads pages into the host pool at `host_indices`: per page, True when every part came
        back whole."""
        if not keys:
            return []
        part_keys, ptrs, sizes = self._page_meta(keys, host_indices)
        start = time.perf_counter()
        res = self._transfer("batch_get_v1", self.client.batch_get_into, part_keys, ptrs, sizes)
        ok = [False] * len(keys) if res is None else pages_ok([r == s for r, s in zip(res, sizes)], len(self.parts))
        n = sum(ok)
        self._count(pages_read=n, pages_missed=len(keys) - n)
        self._metric("prefetch", n, sum(sizes) * n // len(keys), time.perf_counter() - start)
        return ok

    def batch_set_v1(self, keys: List[str], host_indices: torch.Tensor, extra_info: Optional[HiCacheStorageExtraInfo] = None) -> List[bool]:
        """Writes pages from the host pool at `host_indices` (a page stored already counts as
        written: keys name content)."""
        if not keys:
            return []
        part_keys, ptrs, sizes = self._page_meta(keys, host_indices)
        start = time.perf_counter()
        res = self._transfer("batch_set_v1", self.client.batch_put_from, part_keys, ptrs, sizes)
        ok = [False] * len(keys) if res is None else pages_ok([r in (0, E.OBJECT_ALREADY_EXISTS) for r in res], len(self.parts))
        n = sum(ok)
        self._count(pages_written=n, pages_failed=len(keys) - n)
        self._metric("backup", n, sum(sizes) * n // len(keys), time.perf_counter() - start)
        return ok

    # ------------------------------------------------------------------ plain path (flat pages)

    def get(self, key: str, target_location: Optional[Any] = None, target_sizes: Optional[Any] = None) -> Optional[torch.Tensor]:
        """The page's flat copy: read into `target_location` (a tensor) and returned, or a new
        uint8 tensor without one; None when missing or failed."""
        k = flat_key(self._require(), key)
        if target_location is None:
            data = self._guarded("get", lambda: _missing_none(lambda: self.client.get(k, timeout=self.timeout)))
            return None if data is None else torch.frombuffer(bytearray(data), dtype=torch.uint8)
        want = target_location.numel() * target_location.element_size()
        n = self._guarded("get", lambda: _missing_none(lambda: self.client.get_into(k, target_location, timeout=self.timeout)))
        return target_location if n == want else None

    def batch_get(self, keys: List[str], target_locations: Optional[Any] = None, target_sizes: Optional[Any] = None) -> List[Optional[torch.Tensor]]:
        if target_locations is None:
            return [self.get(k) for k in keys]
        if len(target_locations) != len(keys):
            raise ValueError(f"kvcache_store: batch_get has {len(keys)} keys and {len(target_locations)} targets")
        if not keys:
            return []
        prefix = self._require()
        wants = [t.numel() * t.element_size() for t in target_locations]
        res = self._guarded("batch_get", lambda: self.client.batch_get_into([flat_key(prefix, k) for k in keys], list(target_locations), wants, timeout=self.timeout))
        if res is None:
            return [None] * len(keys)
        return [t if r == w else None for t, r, w in zip(target_locations, res, wants)]

    def set(self, key: str, value: Optional[Any] = None, target_location: Optional[Any] = None, target_sizes: Optional[Any] = None) -> bool:
        """Stores a page's flat copy: `value` (a tensor), or `target_sizes` bytes at the pointer
        `target_location`."""
        k = flat_key(self._require(), key)
        if value is not None:
            res = self._guarded("set", lambda: _exists_ok(lambda: self.client.put(k, value.contiguous(), timeout=self.timeout)))
        elif target_location is not None and target_sizes is not None:
            res = self._guarded("set", lambda: _exists_ok(lambda: self.client.put_from(k, target_location, target_sizes, timeout=self.timeout)))
        else:
            raise ValueError("kvcache_store: set needs a value, or a target_location with its target_sizes")
        return res == 0

    def batch_set(self, keys: List[str], values: Optional[Any] = None, target_locations: Optional[Any] = None, target_sizes: Optional[Any] = None) -> bool:
        """True when every page is stored."""
        if not keys:
            return True
        prefix = self._require()
        fkeys = [flat_key(prefix, k) for k in keys]
        if values is not None:
            if len(values) != len(keys):
                raise ValueError(f"kvcache_store: batch_set has {len(keys)} keys and {len(values)} values")
            res = self._guarded("batch_set", lambda: self.client.batch_put(fkeys, [v.contiguous() for v in values], timeout=self.timeout))
        elif target_locations is not None and target_sizes is not None:
            res = self._guarded("batch_set", lambda: self.client.batch_put_from(fkeys, list(target_locations), list(target_sizes), timeout=self.timeout))
        else:
            raise ValueError("kvcache_store: batch_set needs values, or target_locations with their target_sizes")
        return res is not None and all(r in (0, E.OBJECT_ALREADY_EXISTS) for r in res)

    def exists(self, key: str) -> bool:
        """Whether the page is stored whole, on the keys of the path in use."""
        return self.batch_exists([key]) == 1

    # ------------------------------------------------------------------ not served

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        raise NotImplementedError("kvcache_store: the v2 pool-transfer interface (hybrid models) is not served; use interface_v1")

    def batch_get_v2(self, transfers, extra_info=None):
        raise NotImplementedError("kvcache_store: the v2 pool-transfer interface (hybrid models) is not served; use interface_v1")

    def batch_set_v2(self, transfers, extra_info=None):
        raise NotImplementedError("kvcache_store: the v2 pool-transfer interface (hybrid models) is not served; use interface_v1")

    # ------------------------------------------------------------------ housekeeping

    def clear(self) -> bool:
        """Removes this rank's pages (this fingerprint) from the store; objects being read stay."""
        prefix = self._require()
        n = self._guarded("clear", lambda: self.client.remove_by_regex("^" + re.escape(prefix) + "/", timeout=self.timeout))
        return n is not None

    def _metric(self, which: str, pages: int, nbytes: int, seconds: float) -> None:
        if not self.storage_config.enable_storage_metrics or pages == 0:
            return
        with self._lock:
            self._metrics[f"{which}_pgs"].append(pages)
            self._metrics[f"{which}_bandwidth"].append(nbytes / max(seconds, 1e-9) / (1 << 30))

    def get_stats(self):
        """SGLang's StorageMetrics (pages and GB/s per batch) since the last call, when storage
        metrics are enabled; else None."""
        if not self.storage_config.enable_storage_metrics:
            return None
        from sglang.srt.observability.metrics_collector import StorageMetrics

        m = StorageMetrics()
        with self._lock:
            for name, values in self._metrics.items():
                getattr(m, name).extend(values)
                values.clear()
        return m

    def counters(self) -> dict:
        """Pages read, missed, written, failed; failed calls; breaker skips; the client's bytes by
        path (zero_copy_bytes_*, staged_bytes_*); the adopted ranges."""
        with self._lock:
            out = dict(self._counters)
        out["calls_skipped"] = self.breaker.skipped
        out["client"] = self.client.stats()
        out["adopted"] = [m.summary() for m in self.adopted]
        return out

    def close(self) -> None:
        """Closes the client: the store service unmaps the adopted pool, whose memory stays."""
        self.client.close()


def _missing_none(fn):
    try:
        return fn()
    except ObjectNotFoundError:
        return None


def _exists_ok(fn):
    try:
        return fn()
    except E.ObjectExistsError:
        return 0
