"""The vLLM connector's pure logic: store keys from vLLM's block hashes and a fingerprint, the
matched prefix from the store's existence answers, what each engine step loads and saves, and
when to try the store again after it failed. Nothing here imports vLLM, torch or the store:
vllm_connector.py feeds it plain values (and request objects only for `.block_hashes`), so it is
tested on its own (tests/test_vllm_plan.py).

Keys: one object per (block, layer): `vllm/<fingerprint>/<block hash hex>/<layer>`. vLLM's block
hash chains the hashes of all earlier blocks (and the LoRA, multimodal inputs and cache salt), so
it names the whole prefix. The fingerprint hashes what makes KV bytes differ for the same tokens:
the model, the KV dtype, the block size, the cache layout and page shape, the layer count, the
tensor-parallel rank and size, and the block-hash algorithm; any difference is a miss, never
another model's KV. One object per layer because the CPU backend (and every layer-outer layout)
keeps a block's layers apart: each (block, layer) page is one contiguous range that the store
reads into or writes from directly.
"""
import hashlib
import json
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

KEY_PREFIX = "vllm"


def fingerprint(*, model: str, dtype: str, block_size: int, layout: str, page_bytes: int, layers: int,
                tp_rank: int, tp_size: int, hash_algo: str, extra: str = "") -> str:
    """A short stable hash of everything that makes KV bytes differ for the same tokens."""
    desc = json.dumps(
        {
            "model": model,
            "dtype": dtype,
            "block_size": block_size,
            "layout": layout,
            "page_bytes": page_bytes,
            "layers": layers,
            "tp": [tp_rank, tp_size],
            "hash": hash_algo,
            "extra": extra,
        },
        sort_keys=True,
    )
    return hashlib.sha256(desc.encode()).hexdigest()[:24]


def block_keys(fp: str, block_hash: bytes, layers: int) -> List[str]:
    """The store keys of one block: one per layer."""
    h = bytes(block_hash).hex()
    return [f"{KEY_PREFIX}/{fp}/{h}/{layer}" for layer in range(layers)]


def hashes_per_block(block_hashes: Sequence[bytes], block_size: int, hash_block_size: int) -> List[bytes]:
    """One hash per KV block. vLLM hashes in units of hash_block_size tokens, which divides the
    block size: a block's hash is the one of its last unit (it chains all before it)."""
    if not hash_block_size or hash_block_size == block_size:
        return list(block_hashes)
    if block_size % hash_block_size:
        raise ValueError(f"block size {block_size} is not a multiple of the hash block size {hash_block_size}")
    ratio = block_size // hash_block_size
    return list(block_hashes[ratio - 1::ratio])


def loadable_blocks(num_tokens: int, block_size: int, num_hashes: int) -> int:
    """Full blocks the store may supply for a request of num_tokens: the engine must compute at
    least one token itself (its logits give the next token), as for its own prefix cache."""
    return max(0, min((num_tokens - 1) // block_size, num_hashes))


def leading_hits(exists: Sequence[bool], per_block: int) -> int:
    """Blocks at the front whose objects all exist (`exists` lists per_block answers per block)."""
    n = 0
    for i in range(0, len(exists) - per_block + 1, per_block):
        if not all(exists[i:i + per_block]):
            break
        n += 1
    return n


class Health:
    """Whether to call the store now: after a failure the store is left alone for
    `retry_interval` seconds, so an engine whose store is down pays a call's deadline once per
    interval instead of on every request. Time is a parameter (monotonic seconds)."""

    def __init__(self, retry_interval: float):
        self.retry_interval = retry_interval
        self._until = 0.0
        self.failures = 0

    def usable(self, now: float) -> bool:
        return now >= self._until

    def failed(self, now: float) -> None:
        self.failures += 1
        self._until = now + self.retry_interval

    def succeeded(self) -> None:
        self._until = 0.0


@dataclass
class LoadSpec:
    """Blocks of one request to read from the store before this step's forward pass."""
    req_id: str
    block_ids: List[int]
    hashes: List[bytes]


@dataclass
class SaveSpec:
    """Blocks that became full in this step, to write to the store after it."""
    req_id: str
    block_ids: List[int]
    hashes: List[bytes]


@dataclass
class StepPlan:
    loads: List[LoadSpec] = field(default_factory=list)
    saves: List[SaveSpec] = field(default_factory=list)


@dataclass
class _Track:
    request: object  # has .block_hashes (a list vLLM extends in place)
    block_ids: List[int] = field(default_factory=list)
    saved: int = 0  # blocks at the front that need no save (saved, loaded or cached before)


class StepPlanner:
    """Scheduler-side bookkeeping: what was matched, which blocks were allocated for loads, and
    which full blocks each step produced. Fed by the connector's scheduler hooks."""

    def __init__(self, block_size: int, hash_block_size: int = 0, load: bool = True, save: bool = True):
        self.block_size = block_size
        self.hash_block_size = hash_block_size or block_size
        self.load = load
        self.save = save
        self._lookups: Dict[str, Tuple[int, int, int]] = {}  # req_id -> (start block, limit, hits)
        self._loads: List[LoadSpec] = []
        self._tracks: Dict[str, _Track] = {}

    def hashes(self, request) -> List[bytes]:
        return hashes_per_block(request.block_hashes, self.block_size, self.hash_block_size)

    def lookup_range(self, request, num_computed_tokens: int) -> Tuple[int, int]:
        """[start, limit) of the blocks to ask the store about (start == limit: none)."""
        hashes = self.hashes(request)
        start = num_computed_tokens // self.block_size
        limit = loadable_blocks(request.num_tokens, self.block_size, len(hashes))
        return start, max(start, limit)

    def cached_lookup(self, req_id: str, start: int, limit: int) -> Optional[int]:
        """The hits of an earlier lookup of the same range (the scheduler asks again when it
        could not schedule the request), or None."""
        got = self._lookups.get(req_id)
        return got[2] if got is not None and got[:2] == (start, limit) else None

    def looked_up(self, req_id: str, start: int, limit: int, hits: int) -> None:
        self._lookups[req_id] = (start, limit, hits)

    def allocated(self, request, block_ids: Sequence[int], num_external_tokens: int) -> None:
        """update_state_after_alloc: remembers the request, and the load of its matched blocks."""
        req_id = request.request_id
        look = self._lookups.pop(req_id, None)
        track = self._tracks.get(req_id)
        if track is None:
            track = self._tracks[req_id] = _Track(request)
        if num_external_tokens <= 0 or not self.load:
            return
        if look is None:
            raise ValueError(f"request {req_id}: {num_external_tokens} external tokens without a lookup")
        start = look[0]
        n = num_external_tokens // self.block_size
        hashes = self.hashes(request)
        self._loads.append(LoadSpec(req_id, list(block_ids[start:start + n]), hashes[start:start + n]))

    def step(self, new_reqs, cached_reqs, num_scheduled_tokens: Dict[str, int]) -> StepPlan:
        """build_connector_meta: this step's loads, and saves of the blocks it fills.
        new_reqs: objects with req_id, block_ids (per KV group), num_computed_tokens;
        cached_reqs: vLLM's CachedRequestData (req_ids, resumed_req_ids, new_block_ids,
        num_computed_tokens)."""
        plan = StepPlan(loads=self._loads)
        self._loads = []
        for r in new_reqs:
            track = self._tracks.get(r.req_id)
            if track is None:
                continue
            track.block_ids = list(r.block_ids[0])
            track.saved = r.num_computed_tokens // self.block_size
            self._plan_save(plan, r.req_id, track, r.num_computed_tokens + num_scheduled_tokens.get(r.req_id, 0))
        resumed = getattr(cached_reqs, "resumed_req_ids", set()) or set()
        for i, req_id in enumerate(cached_reqs.req_ids):
            track = self._tracks.get(req_id)
            if track is None:
                continue
            new_ids = cached_reqs.new_block_ids[i]
            computed = cached_reqs.num_computed_tokens[i]
            if req_id in resumed:
                track.block_ids = list(new_ids[0]) if new_ids is not None else []
                track.saved = computed // self.block_size
            elif new_ids is not None:
                track.block_ids.extend(new_ids[0])
            self._plan_save(plan, req_id, track, computed + num_scheduled_tokens.get(req_id, 0))
        return plan

    def _plan_save(self, plan: StepPlan, req_id: str, track: _Track, computed_after: int) -> None:
        hashes = self.hashes(track.request)
        full = min(computed_after // self.block_size, len(hashes), len(track.block_ids))
        if self.save and full > track.saved:
            plan.saves.append(SaveSpec(req_id, track.block_ids[track.saved:full], hashes[track.saved:full]))
        track.saved = max(track.saved, full)

    def finished(self, req_id: str) -> None:
        self._lookups.pop(req_id, None)
        self._tracks.pop(req_id, None)

    @property
    def tracked(self) -> int:
        return len(self._tracks)
