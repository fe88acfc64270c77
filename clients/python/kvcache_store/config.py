"""ReplicateConfig: how a put places its replicas (the proto's ReplicateConfig).

Field names follow Mooncake's ReplicateConfig, so a config object made for Mooncake's store (any
object with these attributes) is accepted as well: `replica_num`, `with_soft_pin`,
`with_hard_pin`, `preferred_segment` (or the first of `preferred_segments`).
"""
from typing import List, Optional

from ._proto import store_master_pb2 as pb
from .errors import InvalidParamsError


class ReplicateConfig:
    __slots__ = ("replica_num", "with_soft_pin", "with_hard_pin", "preferred_segment", "preferred_segments")

    def __init__(
        self,
        replica_num: int = 1,
        with_soft_pin: bool = False,
        with_hard_pin: bool = False,
        preferred_segment: str = "",
        preferred_segments: Optional[List[str]] = None,
    ):
        self.replica_num = replica_num
        self.with_soft_pin = with_soft_pin
        self.with_hard_pin = with_hard_pin
        self.preferred_segment = preferred_segment
        self.preferred_segments = list(preferred_segments or [])

    def __repr__(self) -> str:
        return (
            f"ReplicateConfig(replica_num={self.replica_num}, with_soft_pin={self.with_soft_pin}, "
            f"with_hard_pin={self.with_hard_pin}, preferred_segment={self.preferred_segment!r})"
        )


def preferred_segment(config) -> str:
    """The segment `config` prefers ('' : none): `preferred_segment`, else the first of Mooncake's `preferred_segments`."""
    if config is None:
        return ""
    seg = getattr(config, "preferred_segment", "") or ""
    if not seg:
        segs = getattr(config, "preferred_segments", None) or []
        seg = segs[0] if segs else ""
    return str(seg)


def to_wire(config, out: pb.ReplicateConfig) -> None:
    """Fills the proto message from `config` (None: the defaults)."""
    if config is None:
        out.replica_num = 1
        return
    n = getattr(config, "replica_num", 1)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise InvalidParamsError(f"ReplicateConfig.replica_num must be a positive integer, got {n!r}")
    out.replica_num = n
    out.with_soft_pin = bool(getattr(config, "with_soft_pin", False))
    out.with_hard_pin = bool(getattr(config, "with_hard_pin", False))
    out.preferred_segment = preferred_segment(config)
