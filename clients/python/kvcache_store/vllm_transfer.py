"""The vLLM connector's data path on the worker: vLLM's KV cache pages moved to and from the
store with no copy in the engine process.

`KVPages` describes the KV cache vLLM allocated: per layer a [blocks, ...] tensor view whose
block b is one contiguous page at `base + b * stride`. `StoreTransfer` holds the store
connection (a DummyClient to the store service), adopts the KV cache's memory into a shared
region (DummyClient.adopt_memory: the pages' addresses stay, the bytes now live in a file the
store service maps, so batch_get_into/batch_put_from on them copy nothing here; pages in the
partial first and last memory page are staged, one memmove each), and loads and saves blocks
with one batch call each, every call with its deadline.

Failure is a miss: a load that fails or misses its deadline reports its blocks (vLLM recomputes
them); a save that fails is dropped. After a deadline miss the store service may still write or
read the pages late, so the memory is remapped onto a fresh file first (AdoptedMemory.remap:
the late transfer lands in the old file, which nobody reads) before vLLM reuses the blocks.
After any failure the store is left alone for `retry_interval` (vllm_plan.Health).

Only torch and the store client are imported here (no vLLM): tests drive it with plain tensors.
"""
import logging
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Set

from .dummy_client import DummyClient
from .errors import DeadlineExceededError, StoreError
from . import errors as E
from .vllm_plan import Health, block_keys, leading_hits

log = logging.getLogger("kvcache_store.vllm")


@dataclass
class TransferConfig:
    address: Optional[str] = None  # the store service (host:port); None: STORE_SIDECAR_ADDRESS
    shm_dir: Optional[str] = None  # None: STORE_SHM_DIR, else /dev/shm
    load_timeout: float = 2.0
    save_timeout: float = 2.0
    lookup_timeout: float = 0.5
    connect_timeout: float = 1.0
    retry_interval: float = 10.0
    buffer_size: int = 16 << 20  # the client's staging pool (head and tail pages, fallbacks)
    zero_copy: bool = True  # adopt the KV cache memory into a shared region


class Counters:
    """Counts since the last take() (vLLM collects them every step)."""

    NAMES = (
        "lookups", "lookup_blocks", "lookup_hit_blocks", "lookup_errors", "lookups_skipped", "lookup_seconds",
        "load_blocks", "load_bytes", "load_failed_blocks", "load_seconds", "loads_skipped",
        "save_blocks", "save_bytes", "save_existing_blocks", "save_failed_blocks", "save_seconds", "saves_skipped",
        "staged_bytes", "read_here_bytes", "remaps",
    )

    def __init__(self):
        self.data: Dict[str, float] = {n: 0 for n in self.NAMES}

    def add(self, name: str, n: float = 1) -> None:
        self.data[name] += n

    def take(self) -> Dict[str, float]:
        out = {k: v for k, v in self.data.items() if v}
        self.data = {n: 0 for n in self.NAMES}
        return out


def _staged(c: DummyClient) -> int:
    """Bytes the client copied through its staging pool so far (pages outside the region)."""
    st = c.stats()
    return st["staged_bytes_put"] + st["staged_bytes_get"]


def _read_here(c: DummyClient) -> int:
    """Bytes the client copied out of same-host store memory itself so far (local and direct reads)."""
    return c.stats().get("local_reads", {}).get("bytes", 0)


class KVPages:
    """Where each (layer, block) page of vLLM's KV cache lies: `layers` views in key order."""

    def __init__(self, views: Sequence, num_blocks: int):
        self.num_blocks = num_blocks
        self.layers = len(views)
        self.base: List[int] = []
        self.stride: List[int] = []
        self.page: List[int] = []
        for i, t in enumerate(views):
            if t.shape[0] % num_blocks:
                raise ValueError(f"KV layer {i}: {t.shape[0]} kernel blocks is not a multiple of {num_blocks} blocks")
            per = t.shape[0] // num_blocks
            first = t[0:per]
            if not first.is_contiguous():
                raise ValueError(f"KV layer {i}: a block's page is not contiguous in this KV cache layout (shape {tuple(t.shape)}, "
                                 f"strides {t.stride()}): the store connector needs block-contiguous pages")
            elt = t.element_size()
            self.base.append(t.data_ptr())
            self.stride.append(t.stride(0) * per * elt)
            self.page.append(first.numel() * elt)
        lo = min(self.base)
        hi = max(b + s * (num_blocks - 1) + p for b, s, p in zip(self.base, self.stride, self.page))
        self.span = (lo, hi - lo)  # the memory holding every page

    def address(self, layer: int, block: int) -> int:
        return self.base[layer] + block * self.stride[layer]

    @property
    def block_bytes(self) -> int:
        return sum(self.page)

    def targets(self, block_ids: Sequence[int]):
        """(pointers, sizes, owning block id) of the blocks' pages, layer by layer per block."""
        ptrs, sizes, owners = [], [], []
        for b in block_ids:
            if not 0 <= b < self.num_blocks:
                raise ValueError(f"block id {b} outside the KV cache's {self.num_blocks} blocks")
            for layer in range(self.layers):
                ptrs.append(self.address(layer, b))
                sizes.append(self.page[layer])
                owners.append(b)
        return ptrs, sizes, owners


class StoreTransfer:
    """The worker's store connection and its loads and saves of KV pages."""

    def __init__(self, cfg: TransferConfig, pages: KVPages, fp: str, counters: Counters,
                 client_name: str = "vllm worker", make_client: Callable[[], DummyClient] = lambda: DummyClient(raise_errors=True),
                 clock: Callable[[], float] = time.monotonic):
        self.cfg = cfg
        self._now = clock
        self.pages = pages
        self.fp = fp
        self.counters = counters
        self.health = Health(cfg.retry_interval)
        self._client_name = client_name
        self._make_client = make_client
        self._client: Optional[DummyClient] = None
        self.adopted = None

    # ------------------------------------------------------------------ connection

    def client(self) -> Optional[DummyClient]:
        """The connected client, or None while the store is left alone after a failure."""
        if not self.health.usable(self._now()):
            return None
        if self._client is not None:
            return self._client
        c = self._make_client()
        try:
            c.setup(address=self.cfg.address, shm_dir=self.cfg.shm_dir, buffer_size=self.cfg.buffer_size,
                    timeout=self.cfg.connect_timeout, client_name=self._client_name)
        except StoreError as e:
            self.health.failed(self._now())
            log.warning("kvcache_store: store service unreachable (%s); KV blocks are recomputed, next try in %.0f s", e, self.cfg.retry_interval)
            return None
        self._client = c
        if self.cfg.zero_copy:
            self._adopt(c)
        return c

    def _adopt(self, c: DummyClient) -> None:
        lo, size = self.pages.span
        try:
            self.adopted = c.adopt_memory(lo, size)
            log.info("kvcache_store: KV cache of %d B shared with the store service (%d B in the region; the pages in the first and last "
                     "memory page are staged)", size, self.adopted.shared_bytes)
        except StoreError as e:
            log.warning("kvcache_store: cannot share the KV cache with the store service (%s); every page is staged (one copy)", e)

    def _failed(self, what: str, e: Exception) -> None:
        self.health.failed(self._now())
        if isinstance(e, DeadlineExceededError) and self.adopted is not None:
            # the store service may still write or read the pages: move them to a fresh file
            self.adopted.remap()
            self.counters.add("remaps")
        log.warning("kvcache_store: %s failed (%s); the store is left alone for %.0f s", what, e, self.cfg.retry_interval)

    # ------------------------------------------------------------------ data

    def load(self, block_ids: Sequence[int], hashes: Sequence[bytes]) -> Set[int]:
        """Reads the blocks' pages from the store; the ids of the blocks that did not load."""
        if not block_ids:
            return set()
        c = self.client()
        if c is None:
            self.counters.add("loads_skipped")
            self.counters.add("load_failed_blocks", len(block_ids))
            return set(block_ids)
        keys = [k for h in hashes for k in block_keys(self.fp, h, self.pages.layers)]
        ptrs, sizes, owners = self.pages.targets(block_ids)
        t0 = time.perf_counter()
        staged0, here0 = _staged(c), _read_here(c)
        try:
            got = c.batch_get_into(keys, ptrs, sizes, timeout=self.cfg.load_timeout)
        except StoreError as e:
            self._failed(f"loading {len(block_ids)} blocks", e)
            self.counters.add("load_failed_blocks", len(block_ids))
            return set(block_ids)
        self.counters.add("load_seconds", time.perf_counter() - t0)
        self.counters.add("staged_bytes", _staged(c) - staged0)
        self.counters.add("read_here_bytes", _read_here(c) - here0)
        failed = {b for b, n, size in zip(owners, got, sizes) if n != size}
        if failed:
            codes = sorted({E.code_name(n) if n < 0 else f"{n} of {size} B" for n, size in zip(got, sizes) if n != size})
            log.info("kvcache_store: %d of %d blocks did not load (%s); vLLM recomputes them", len(failed), len(block_ids), ", ".join(codes))
        ok = len(set(block_ids) - failed)
        self.counters.add("load_blocks", ok)
        self.counters.add("load_bytes", ok * self.pages.block_bytes)
        self.counters.add("load_failed_blocks", len(failed))
        return failed

    def save(self, block_ids: Sequence[int], hashes: Sequence[bytes]) -> None:
        """Writes the blocks' pages to the store (a block already there counts as saved)."""
        if not block_ids:
            return
        c = self.client()
        if c is None:
            self.counters.add("saves_skipped")
            return
        keys = [k for h in hashes for k in block_keys(self.fp, h, self.pages.layers)]
        ptrs, sizes, owners = self.pages.targets(block_ids)
        t0 = time.perf_counter()
        staged0 = _staged(c)
        try:
            codes = c.batch_put_from(keys, ptrs, sizes, timeout=self.cfg.save_timeout)
        except StoreError as e:
            self._failed(f"saving {len(block_ids)} blocks", e)
            self.counters.add("save_failed_blocks", len(block_ids))
            return
        self.counters.add("save_seconds", time.perf_counter() - t0)
        self.counters.add("staged_bytes", _staged(c) - staged0)
        per: Dict[int, Set[int]] = {}
        for b, code in zip(owners, codes):
            per.setdefault(b, set()).add(code)
        failed = [b for b, cs in per.items() if cs - {0, E.OBJECT_ALREADY_EXISTS}]
        existing = [b for b, cs in per.items() if cs == {E.OBJECT_ALREADY_EXISTS}]
        if failed:
            names = sorted({E.code_name(x) for b in failed for x in per[b] if x not in (0, E.OBJECT_ALREADY_EXISTS)})
            log.info("kvcache_store: %d of %d blocks not saved (%s)", len(failed), len(block_ids), ", ".join(names))
        self.counters.add("save_blocks", len(per) - len(failed) - len(existing))
        self.counters.add("save_bytes", (len(per) - len(failed) - len(existing)) * self.pages.block_bytes)
        self.counters.add("save_existing_blocks", len(existing))
        self.counters.add("save_failed_blocks", len(failed))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None



class StoreLookup:
    """The scheduler's question to the store: how many of these blocks, from the first, does it
    hold for every tensor-parallel rank and layer? One batch_is_exist with the lookup deadline;
    an error is a miss (0)."""

    def __init__(self, cfg: TransferConfig, fps: Sequence[str], layers: int, counters: Counters,
                 make_client: Callable[[], DummyClient] = lambda: DummyClient(raise_errors=True),
                 clock: Callable[[], float] = time.monotonic):
        self.cfg = cfg
        self._now = clock
        self.fps = list(fps)
        self.layers = layers
        self.counters = counters
        self.health = Health(cfg.retry_interval)
        self._make_client = make_client
        self._client: Optional[DummyClient] = None

    def _connected(self) -> Optional[DummyClient]:
        if self._client is not None:
            return self._client
        c = self._make_client()
        try:
            # the pool only stages nothing here: the smallest region will do
            c.setup(address=self.cfg.address, shm_dir=self.cfg.shm_dir, buffer_size=1 << 20,
                    timeout=self.cfg.connect_timeout, client_name="vllm scheduler")
        except StoreError as e:
            self.health.failed(self._now())
            log.warning("kvcache_store: store service unreachable (%s); lookups are misses, next try in %.0f s", e, self.cfg.retry_interval)
            return None
        self._client = c
        return c

    def hits(self, hashes: Sequence[bytes]) -> int:
        if not hashes:
            return 0
        if not self.health.usable(self._now()):
            self.counters.add("lookups_skipped")
            return 0
        c = self._connected()
        if c is None:
            self.counters.add("lookups_skipped")
            return 0
        per_block = len(self.fps) * self.layers
        keys = [k for h in hashes for fp in self.fps for k in block_keys(fp, h, self.layers)]
        self.counters.add("lookups")
        self.counters.add("lookup_blocks", len(hashes))
        t0 = time.perf_counter()
        try:
            got = c.batch_is_exist(keys, timeout=self.cfg.lookup_timeout)
            self.counters.add("lookup_seconds", time.perf_counter() - t0)
        except StoreError as e:
            self.health.failed(self._now())
            self.counters.add("lookup_errors")
            log.warning("kvcache_store: lookup failed (%s); a miss, the store is left alone for %.0f s", e, self.cfg.retry_interval)
            return 0
        n = leading_hits([x == 1 for x in got], per_block)
        self.counters.add("lookup_hit_blocks", n)
        return n

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
