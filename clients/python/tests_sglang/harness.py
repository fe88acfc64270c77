"""SGLang's own HiCache storage layer, built on the CPU for the tests: a device KV pool (MHA or
MLA), its host pool in a chosen layout, and a HiCacheController whose storage backend SGLang's
factory loads the way `--hicache-storage-backend dynamic` does. The test then plays SGLang's
scheduler: it queues writes and prefetches and drains the controller's acknowledgement queues.

SGLang's full server cannot serve with HiCache on the CPU: its host<->device KV transfer kernels
(transfer_kv_per_layer... in pool_host/mha.py) are imported for CUDA, ROCm, XPU and NPU only, so
these tests drive the storage layer (host pool + controller + backend) directly."""
import os
import tempfile
import threading

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch
import torch.distributed as dist

from sglang.srt.managers.cache_controller import HiCacheController
from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator
from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool, MLATokenToKVPool
from sglang.srt.mem_cache.pool_host.base import host_memory_budget_scope
from sglang.srt.mem_cache.pool_host.mha import MHATokenToKVPoolHost
from sglang.srt.mem_cache.pool_host.mla import MLATokenToKVPoolHost
from sglang.srt.mem_cache.utils import get_storage_hash_str
from sglang.srt.runtime_context import get_parallel

PAGE = 16
LAYERS = 3
DEVICE_TOKENS = 256
HOST_BUDGET = 4 << 30
BACKEND = {"backend_name": "kvcache_store", "module_path": "kvcache_store.sglang_backend", "class_name": "KVCacheStoreHiCache"}

_init_lock = threading.Lock()
_inited = False


def init_runtime(tp_rank: int = 0, tp_size: int = 1) -> None:
    """One gloo process group of this process alone, and the parallel widths SGLang reads.
    (tp_rank/tp_size here only name the rank in the storage config, see make_controller.)"""
    global _inited
    with _init_lock:
        if _inited:
            return
        if not dist.is_initialized():
            dist.init_process_group("gloo", store=dist.FileStore(tempfile.mktemp(prefix="sgl-gloo-"), 1), rank=0, world_size=1)
        get_parallel().override_permanently(attn_dcp_size=1, attn_dcp_rank=0, tp_rank=tp_rank, tp_size=tp_size, pp_rank=0, pp_size=1)
        _inited = True


class Engine:
    """One engine's KV side: device pool, allocator, host pool in `layout`, controller."""

    def __init__(self, kind: str, layout: str, extra: dict, model: str = "tiny-llama", dtype=torch.bfloat16, layers: int = LAYERS, heads: int = 2, head_dim: int = 16, device_tokens: int = DEVICE_TOKENS, host_ratio: float = 2.0):
        init_runtime()
        self.kind = kind
        # SGLang sizes host pools against the machine's free memory less a 10 GiB reserve, which a
        # shared test machine may not have: these small pools are booked against a budget instead
        with host_memory_budget_scope(HOST_BUDGET):
            self._pools(kind, layout, dtype, layers, heads, head_dim, device_tokens, host_ratio)
        self.allocator = PagedTokenToKVPoolAllocator(device_tokens, PAGE, dtype, "cpu", self.device, need_sort=False)
        self.controller = HiCacheController(
            self.allocator,
            self.host,
            PAGE,
            dist.group.WORLD,
            threading.Event(),
            io_backend="direct",
            storage_backend="dynamic",
            model_name=model,
            storage_backend_extra_config={**BACKEND, **extra},
        )
        self.backend = self.controller.storage_backend

    def _pools(self, kind, layout, dtype, layers, heads, head_dim, device_tokens, host_ratio) -> None:
        if kind == "mha":
            self.device = MHATokenToKVPool(size=device_tokens, page_size=PAGE, dtype=dtype, head_num=heads, head_dim=head_dim, layer_num=layers, device="cpu", enable_memory_saver=False)
            self.host = MHATokenToKVPoolHost(self.device._mha_buffer_info(), host_ratio, 0, PAGE, layout, pin_memory=False, device="cpu", device_capacity_tokens=device_tokens, start_layer=0, end_layer=layers - 1)
        else:
            self.device = MLATokenToKVPool(size=device_tokens, page_size=PAGE, dtype=dtype, kv_lora_rank=2 * head_dim, qk_rope_head_dim=head_dim, layer_num=layers, device="cpu", enable_memory_saver=False)
            self.host = MLATokenToKVPoolHost(self.device._mla_buffer_info(), host_ratio, 0, PAGE, layout, pin_memory=False, device="cpu", device_capacity_tokens=device_tokens, start_layer=0, end_layer=layers - 1, target_layer_num=layers)

    def fill(self, host_indices: torch.Tensor, seed: int) -> None:
        """Random bytes in the host pool's pages at host_indices (as a forward pass would leave)."""
        g = torch.Generator().manual_seed(seed)
        for start in range(0, host_indices.numel(), PAGE):
            page = self.host.get_data_page(int(host_indices[start]), flat=True)
            data = torch.randint(-(2**15), 2**15 - 1, (page.numel() * page.element_size() // 2,), generator=g, dtype=torch.int16)
            self.host.set_from_flat_data_page(int(host_indices[start]), data.view(page.dtype))

    def pages(self, host_indices: torch.Tensor) -> list:
        """The bytes of each page at host_indices."""
        return [bytes(self.host.get_data_page(int(host_indices[s]), flat=True).contiguous().view(torch.uint8).numpy()) for s in range(0, host_indices.numel(), PAGE)]

    def write(self, host_indices: torch.Tensor, tokens: list, timeout: float = 60) -> int:
        """SGLang's write-through to L3: queues the pages and waits for the backup ack; the
        tokens written."""
        hashes = get_storage_hash_str(tokens, None, page_size=PAGE)
        op_id = self.controller.write_storage(host_indices, tokens, hash_value=hashes)
        op = self.controller.ack_backup_queue.get(timeout=timeout)
        assert op.id == op_id
        return op.completed_tokens

    def prefetch(self, tokens: list, timeout: float = 60):
        """SGLang's prefetch from L3, the scheduler's part played here: the hit query, host pages
        for the hit, the transfer, the acks. Returns (host_indices, tokens loaded)."""
        c = self.controller
        op = c.prefetch("rid-%d" % id(tokens), tokens)
        hit = c.prefetch_hit_queue.get(timeout=timeout)
        assert hit is op
        n = op.storage_hit_count
        if n == 0:
            return None, 0
        op.host_indices = c.alloc_prefetch_host_buffers(op, n)
        c.prefetch_buffer.put(op)
        loaded = 0
        while True:
            ack = c.ack_prefetch_queue.get(timeout=timeout)
            if ack.completed_tokens is not None:
                loaded = ack.completed_tokens
            if ack.completed_req:
                return op.host_indices, loaded

    def close(self) -> None:
        self.controller.detach_storage_backend()
