"""KVCacheStoreConnector: vLLM's v1 KV connector backed by kvcache-store.

Load it without changing vLLM:
    vllm serve MODEL --kv-transfer-config '{"kv_connector":"KVCacheStoreConnector",
        "kv_connector_module_path":"kvcache_store.vllm_connector","kv_role":"kv_both"}'
with the store service's address in STORE_SIDECAR_ADDRESS (and STORE_SHM_DIR), as the operator's
webhook sets them, or in kv_connector_extra_config ("address", "shm_dir"). Other extra keys:
"lookup_timeout", "load_timeout", "save_timeout", "connect_timeout", "retry_interval" (seconds),
"buffer_size" (bytes), "zero_copy" (bool), "model_id" (the model's name in the keys; default: the
model argument).

Scheduler side (engine core process): for a new request, the full blocks past vLLM's own prefix
hit are looked up in the store (one batch_is_exist, with a deadline); the leading blocks that
every layer and tensor-parallel rank has are reported as external tokens, loaded synchronously
before the step's forward pass. Each step's metadata lists the loads and the blocks the step
fills, which the worker saves after the step.
Worker side: register_kv_caches shares vLLM's KV cache memory with the store service (see
vllm_transfer.py); start_load_kv reads the matched blocks into their pages in one call;
wait_for_save writes the step's new full blocks in one call. A failed or late load reports its
blocks through get_block_ids_with_load_errors and vLLM recomputes them: the store being down or
slow costs a deadline, never a hang, a crash or wrong tokens. A failed load must be recomputed,
not fail the request, so this connector sets kv_load_failure_policy to "recompute" (vLLM's
default, "fail", would end the request with an error).

Counters (KVCacheStoreStats) are summed over the workers and the scheduler, logged by vLLM and
exported on its /metrics as vllm:kvcache_store_<name> (see README "vLLM").

The pure logic is in vllm_plan.py, the data path in vllm_transfer.py.
"""
import logging
import os
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Dict, List, Optional

import torch

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
)
from vllm.distributed.kv_transfer.kv_connector.v1.metrics import KVConnectorPromMetrics, KVConnectorStats

from .vllm_plan import LoadSpec, SaveSpec, StepPlanner, fingerprint
from .vllm_transfer import Counters, KVPages, StoreLookup, StoreTransfer, TransferConfig

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.forward_context import ForwardContext
    from vllm.v1.attention.backend import AttentionMetadata
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.request import Request

log = logging.getLogger("kvcache_store.vllm")

#: Prometheus names are vllm:kvcache_store_<counter>; seconds and bytes keep their unit.
METRIC_PREFIX = "vllm:kvcache_store_"


@dataclass
class KVCacheStoreMetadata(KVConnectorMetadata):
    """Scheduler -> worker, once per step: blocks to load before the forward pass, blocks to
    save after it."""

    loads: List[LoadSpec] = field(default_factory=list)
    saves: List[SaveSpec] = field(default_factory=list)


def transfer_config(extra: Dict[str, Any]) -> TransferConfig:
    """TransferConfig from kv_connector_extra_config; unknown or ill-typed keys raise."""
    cfg = TransferConfig()
    known = {f.name: f for f in fields(TransferConfig)}
    for k, v in (extra or {}).items():
        if k in ("model_id",):
            continue
        if k not in known:
            raise ValueError(f"KVCacheStoreConnector: unknown kv_connector_extra_config key {k!r} (known: {sorted(known) + ['model_id']})")
        default = getattr(cfg, k)
        if isinstance(default, bool):
            ok = isinstance(v, bool)
        elif isinstance(default, (int, float)) and not isinstance(default, bool):
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
        else:
            ok = v is None or isinstance(v, str)
        if not ok:
            raise ValueError(f"KVCacheStoreConnector: kv_connector_extra_config {k!r} = {v!r} is not a valid {type(default).__name__}")
        setattr(cfg, k, int(v) if k == "buffer_size" else v)
    return cfg


class _Layout:
    """What both sides derive from the configuration: layer order, block size, fingerprints."""

    def __init__(self, vllm_config: "VllmConfig", kv_cache_config: "KVCacheConfig"):
        groups = kv_cache_config.kv_cache_groups
        if len(groups) != 1:
            raise ValueError(f"KVCacheStoreConnector: models with {len(groups)} KV cache groups (hybrid attention) are not supported")
        spec = groups[0].kv_cache_spec
        self.layer_names: List[str] = list(groups[0].layer_names)
        self.block_size: int = spec.block_size
        cache = vllm_config.cache_config
        self.hash_block_size = getattr(cache, "hash_block_size", None) or self.block_size
        layout = getattr(kv_cache_config, "kv_cache_layout", None) or getattr(cache, "kv_cache_layout", None) or "default"
        par = vllm_config.parallel_config
        self.tp_size = par.tensor_parallel_size
        if par.pipeline_parallel_size != 1:
            raise ValueError("KVCacheStoreConnector: pipeline parallelism is not supported")
        extra = vllm_config.kv_transfer_config.kv_connector_extra_config or {}
        self.page_bytes = spec.page_size_bytes
        self._fp_args = dict(
            model=str(extra.get("model_id") or vllm_config.model_config.model),
            dtype=str(getattr(spec, "dtype", cache.cache_dtype)),
            block_size=self.block_size,
            layout=f"{layout}:{type(spec).__name__}:{getattr(spec, 'num_kv_heads', '')}x{getattr(spec, 'head_size', '')}",
            page_bytes=self.page_bytes,
            layers=len(self.layer_names),
            tp_size=self.tp_size,
            hash_algo=str(cache.prefix_caching_hash_algo),
        )

    def fingerprint(self, tp_rank: int) -> str:
        return fingerprint(tp_rank=tp_rank, **self._fp_args)


class KVCacheStoreConnector(KVConnectorBase_V1):
    def __init__(self, vllm_config: "VllmConfig", role: KVConnectorRole, kv_cache_config: "KVCacheConfig"):
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        ktc = self._kv_transfer_config
        self._cfg = transfer_config(ktc.kv_connector_extra_config)
        self._layout = _Layout(vllm_config, kv_cache_config)
        self._counters = Counters()
        self._load_errors: set = set()
        self._transfer: Optional[StoreTransfer] = None
        self._lookup: Optional[StoreLookup] = None
        self._planner: Optional[StepPlanner] = None
        if role == KVConnectorRole.SCHEDULER:
            if ktc.kv_load_failure_policy != "recompute":
                log.info("kvcache_store: kv_load_failure_policy set to 'recompute': a failed load is a cache miss")
                ktc.kv_load_failure_policy = "recompute"
            self._planner = StepPlanner(self._layout.block_size, self._layout.hash_block_size,
                                        load=ktc.is_kv_consumer, save=ktc.is_kv_producer)
            fps = [self._layout.fingerprint(r) for r in range(self._layout.tp_size)]
            self._lookup = StoreLookup(self._cfg, fps, len(self._layout.layer_names), self._counters)
            if str(vllm_config.cache_config.prefix_caching_hash_algo).startswith("xxhash") and os.getenv("PYTHONHASHSEED") is None:
                log.warning("kvcache_store: %s block hashes are random per process without PYTHONHASHSEED: "
                            "other engines will never find this one's blocks (set PYTHONHASHSEED or use sha256)",
                            vllm_config.cache_config.prefix_caching_hash_algo)

    @property
    def requires_kv_delivery(self) -> bool:
        return False  # a cache: a save dropped is a later miss

    # ------------------------------------------------------------------ worker side

    def register_kv_caches(self, kv_caches: Dict[str, torch.Tensor]) -> None:
        from vllm.distributed.parallel_state import get_tensor_model_parallel_rank

        names = self._layout.layer_names
        devices = {str(t.device) for t in kv_caches.values()}
        if devices != {"cpu"}:
            raise ValueError(f"KVCacheStoreConnector: the KV cache is on {sorted(devices)}; this connector serves KV caches in host "
                             "memory (vLLM's CPU backend) only")
        missing = [n for n in names if n not in kv_caches]
        if missing:
            raise ValueError(f"KVCacheStoreConnector: no KV cache for layers {missing}")
        pages = KVPages([kv_caches[n] for n in names], self._kv_cache_config.num_blocks)
        for i, p in enumerate(pages.page):
            if p != self._layout.page_bytes:
                raise ValueError(f"KVCacheStoreConnector: layer {names[i]} pages are {p} B, the KV cache spec says {self._layout.page_bytes} B")
        rank = get_tensor_model_parallel_rank()
        self._transfer = StoreTransfer(self._cfg, pages, self._layout.fingerprint(rank), self._counters,
                                       client_name=f"vllm worker tp{rank} pid {os.getpid()}")
        self._transfer.client()  # connect and share the KV cache now if the store is there

    def start_load_kv(self, forward_context: "ForwardContext", **kwargs: Any) -> None:
        meta = self._connector_metadata
        if not isinstance(meta, KVCacheStoreMetadata) or not meta.loads or self._transfer is None:
            return
        block_ids = [b for spec in meta.loads for b in spec.block_ids]
        hashes = [h for spec in meta.loads for h in spec.hashes]
        self._load_errors |= self._transfer.load(block_ids, hashes)

    def wait_for_layer_load(self, layer_name: str) -> None:
        return  # start_load_kv loaded every layer

    def save_kv_layer(self, layer_name: str, kv_layer: torch.Tensor, attn_metadata: "AttentionMetadata", **kwargs: Any) -> None:
        return  # wait_for_save writes whole blocks, all layers in one call

    def wait_for_save(self) -> None:
        meta = self._connector_metadata
        if not isinstance(meta, KVCacheStoreMetadata) or not meta.saves or self._transfer is None:
            return
        self._transfer.save([b for s in meta.saves for b in s.block_ids], [h for s in meta.saves for h in s.hashes])

    def get_finished(self, finished_req_ids: set) -> tuple:
        return None, None  # loads and saves are synchronous

    def get_block_ids_with_load_errors(self) -> set:
        out, self._load_errors = self._load_errors, set()
        return out

    def get_kv_connector_stats(self) -> Optional[KVConnectorStats]:
        data = self._counters.take()
        return KVCacheStoreStats(data=data) if data else None

    def shutdown(self) -> None:
        for part in (self._transfer, self._lookup):
            if part is not None:
                part.close()

    # ------------------------------------------------------------------ scheduler side

    def get_num_new_matched_tokens(self, request: "Request", num_computed_tokens: int) -> tuple:
        planner = self._planner
        if planner is None or not planner.load:
            return 0, False
        start, limit = planner.lookup_range(request, num_computed_tokens)
        if limit <= start:
            return 0, False
        hits = planner.cached_lookup(request.request_id, start, limit)
        if hits is None:
            hits = self._lookup.hits(planner.hashes(request)[start:limit])
            planner.looked_up(request.request_id, start, limit, hits)
        return hits * self._layout.block_size, False

    def update_state_after_alloc(self, request: "Request", blocks: "KVCacheBlocks", num_external_tokens: int) -> None:
        if self._planner is None:
            return
        ids = blocks.get_block_ids()[0] if num_external_tokens > 0 else []
        self._planner.allocated(request, ids, num_external_tokens)

    def build_connector_meta(self, scheduler_output: "SchedulerOutput") -> KVConnectorMetadata:
        plan = self._planner.step(scheduler_output.scheduled_new_reqs, scheduler_output.scheduled_cached_reqs,
                                  scheduler_output.num_scheduled_tokens)
        return KVCacheStoreMetadata(loads=plan.loads, saves=plan.saves)

    def request_finished(self, request: "Request", block_ids: List[int]) -> tuple:
        if self._planner is not None:
            self._planner.finished(request.request_id)
        return False, None

    # ------------------------------------------------------------------ metrics

    @classmethod
    def build_kv_connector_stats(cls, data: Optional[Dict[str, Any]] = None) -> Optional[KVConnectorStats]:
        return KVCacheStoreStats(data=dict(data) if data else {})

    @classmethod
    def build_prom_metrics(cls, vllm_config, metric_types, labelnames, per_engine_labelvalues) -> Optional[KVConnectorPromMetrics]:
        return KVCacheStorePromMetrics(vllm_config, metric_types, labelnames, per_engine_labelvalues)


class KVCacheStoreStats(KVConnectorStats):
    """The connector's counters for one interval (Counters.NAMES), summed over workers."""

    def reset(self) -> None:
        self.data = {}

    def aggregate(self, other: KVConnectorStats) -> "KVCacheStoreStats":
        for k, v in (other.data or {}).items():
            self.data[k] = self.data.get(k, 0) + v
        return self

    def reduce(self) -> Dict[str, float]:
        out = dict(self.data)
        if out.get("load_seconds"):
            out["load_bytes_per_s"] = round(out.get("load_bytes", 0) / out["load_seconds"])
        return out

    def is_empty(self) -> bool:
        return not any(self.data.values())


class KVCacheStorePromMetrics(KVConnectorPromMetrics):
    """One Prometheus counter per connector counter: vllm:kvcache_store_<name>_total."""

    def __init__(self, vllm_config, metric_types, labelnames, per_engine_labelvalues):
        super().__init__(vllm_config, metric_types, labelnames, per_engine_labelvalues)
        self._counters = {}
        for name in Counters.NAMES:
            c = self._counter_cls(name=METRIC_PREFIX + name, documentation=f"kvcache-store connector: {name.replace('_', ' ')}",
                                  labelnames=labelnames)
            self._counters[name] = {idx: c.labels(*vals) for idx, vals in per_engine_labelvalues.items()}

    def observe(self, transfer_stats_data: Dict[str, Any], engine_idx: int = 0) -> None:
        for name, v in (transfer_stats_data or {}).items():
            per = self._counters.get(name)
            if per is not None and engine_idx in per and v > 0:
                per[engine_idx].inc(v)
