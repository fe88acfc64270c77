"""Store keys of SGLang HiCache pages (pure: no SGLang, no torch, no I/O).

A key names one object: one part of one page, as the engine's host pool hands it out for zero-copy
I/O (`get_page_buffer_meta`): K and V apart for MHA pools, one object for MLA, and one per layer
(and per K/V) in the layer_first layout, whose page is spread over the layers. The plain get/set
path stores a page's flat copy (`get_data_page`) as one object of its own.

Every key starts with a fingerprint of what the bytes mean: model, dtype, page size, host layout,
pool kind and geometry, and the shard the rank holds (tensor-parallel rank and size for MHA,
none for MLA, whose KV every rank holds whole; pipeline stage; context-parallel shard). Two engines
share pages exactly when they would lay out the same bytes; any difference is a miss, never another
model's KV. The fingerprint is a digest, with the model name kept readable for operators
(`remove_by_regex("^sglang/<model>/")`).

    sglang/<model>/<digest16>/<page hash>/<part>
"""
import hashlib
import re
from dataclasses import dataclass
from typing import List, Sequence, Tuple

#: Pool kinds: MHA (K and V per head, sharded over tensor-parallel ranks) and MLA (one latent
#: vector per token, the same on every rank).
MHA = "mha"
MLA = "mla"

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class PageFormat:
    model: str
    kind: str  # MHA or MLA
    dtype: str  # e.g. "torch.bfloat16"
    page_size: int  # tokens per page
    layout: str  # the host pool's layout: layer_first, page_first, page_first_direct, page_head
    layer_num: int
    geometry: Tuple[int, ...]  # MHA: (head_num, head_dim, v_head_dim); MLA: (kv_cache_dim,)
    tp_rank: int = 0
    tp_size: int = 1
    pp_rank: int = 0
    pp_size: int = 1
    cp_rank: int = 0
    cp_size: int = 1
    dcp_rank: int = 0
    dcp_size: int = 1
    namespace: str = ""  # extra_config "namespace": separates deployments that must not share

    def __post_init__(self):
        if self.kind not in (MHA, MLA):
            raise ValueError(f"PageFormat: kind must be {MHA!r} or {MLA!r}, got {self.kind!r}")
        if self.page_size <= 0 or self.layer_num <= 0:
            raise ValueError(f"PageFormat: page_size and layer_num must be positive, got {self.page_size}, {self.layer_num}")
        if not (0 <= self.tp_rank < self.tp_size):
            raise ValueError(f"PageFormat: tp_rank {self.tp_rank} is not in [0, {self.tp_size})")

    def shard(self) -> tuple:
        """What identifies this rank's share of a page. MLA pages are whole on every
        tensor-parallel rank, so the tensor-parallel rank and size are not part of it."""
        tp = (0, 1) if self.kind == MLA else (self.tp_rank, self.tp_size)
        return tp + (self.pp_rank, self.pp_size, self.cp_rank, self.cp_size, self.dcp_rank, self.dcp_size)

    def prefix(self) -> str:
        what = (self.kind, self.dtype, self.page_size, self.layout, self.layer_num, self.geometry, self.shard(), self.namespace)
        digest = hashlib.sha256(repr(("sglang-hicache-v1", self.model) + what).encode()).hexdigest()[:16]
        return f"sglang/{model_label(self.model)}/{digest}"


def model_label(model: str) -> str:
    """The model name as it appears in keys: path separators and other odd characters become '-'."""
    label = _UNSAFE.sub("-", model or "").strip("-")
    return label or "model"


def part_names(kind: str, layout: str, per_page: int, layer_num: int) -> List[str]:
    """Names of the objects of one page, in the order the host pool's get_page_buffer_meta lists
    their buffers. Raises ValueError for a split this module does not know."""
    if kind == MHA:
        if per_page == 2:
            return ["k", "v"]
        if layout == "layer_first" and per_page == 2 * layer_num:
            return [f"{kv}{layer}" for layer in range(layer_num) for kv in ("k", "v")]
    elif kind == MLA:
        if per_page == 1:
            return ["kv"]
        if layout == "layer_first" and per_page == layer_num:
            return [f"kv{layer}" for layer in range(layer_num)]
    raise ValueError(f"a {kind} host pool in layout {layout!r} with {per_page} buffers per page ({layer_num} layers) is not served")


#: The part name of a page's flat copy (the plain get/set path).
FLAT = "flat"


def page_keys(prefix: str, page_hashes: Sequence[str], parts: Sequence[str]) -> List[str]:
    """Keys of every part of every page, page by page (the order of get_page_buffer_meta)."""
    return [f"{prefix}/{h}/{p}" for h in page_hashes for p in parts]


def flat_key(prefix: str, page_hash: str) -> str:
    return f"{prefix}/{page_hash}/{FLAT}"


def pages_ok(per_part: Sequence[bool], parts_per_page: int) -> List[bool]:
    """Per page: True when all its parts succeeded."""
    n = len(per_part) // parts_per_page
    return [all(per_part[i * parts_per_page:(i + 1) * parts_per_page]) for i in range(n)]


def leading(flags: Sequence[bool]) -> int:
    """How many pages from the start succeeded (HiCache uses a prefix: a page after a gap is useless)."""
    for i, ok in enumerate(flags):
        if not ok:
            return i
    return len(flags)

