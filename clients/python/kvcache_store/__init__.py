"""kvcache_store: the Python client of kvcache-store for inference engines.

`DummyClient` talks to a real client (store_service, the sidecar) over a Unix socket or TCP and
moves values through shared memory; its methods follow Mooncake's MooncakeDistributedStore.
See clients/python/README.md.
"""
from .adopted_memory import AdoptedMemory
from .buffer_pool import BufferLease, BufferPool
from .config import ReplicateConfig
from .dummy_client import DummyClient
from .errors import (
    BufferExhaustedError,
    DeadlineExceededError,
    InvalidParamsError,
    LeaseExpiredError,
    LeaseInUseError,
    NoSpaceError,
    ObjectExistsError,
    ObjectLeasedError,
    ObjectNotFoundError,
    ObjectNotReadyError,
    StoreError,
    TransferError,
    UnauthenticatedError,
    UnavailableError,
)

__version__ = "0.1.0"

__all__ = [
    "DummyClient",
    "ReplicateConfig",
    "BufferLease",
    "BufferPool",
    "AdoptedMemory",
    "StoreError",
    "ObjectNotFoundError",
    "ObjectNotReadyError",
    "ObjectExistsError",
    "ObjectLeasedError",
    "InvalidParamsError",
    "LeaseInUseError",
    "NoSpaceError",
    "TransferError",
    "LeaseExpiredError",
    "BufferExhaustedError",
    "UnavailableError",
    "UnauthenticatedError",
    "DeadlineExceededError",
]
