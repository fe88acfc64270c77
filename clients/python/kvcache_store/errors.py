"""Typed errors of the Python client, mirroring the TypeScript client's (client/errors.ts).

Every error is a StoreError carrying `code` (the ErrorCode of proto/store_master.proto, negative)
and `code_name`. `StoreError.from_code(code, message)` picks the subclass for a status code a
store service returned. `error_code(exc)` gives the negative code of any exception, for the
Mooncake-style return-code methods of DummyClient.
"""
from typing import Optional, Type

from ._proto import store_master_pb2 as _pb

OK = 0
INTERNAL_ERROR = _pb.INTERNAL_ERROR
UNAVAILABLE_IN_CURRENT_STATUS = _pb.UNAVAILABLE_IN_CURRENT_STATUS
NOT_IMPLEMENTED = _pb.NOT_IMPLEMENTED
INVALID_PARAMS = _pb.INVALID_PARAMS
INVALID_KEY = _pb.INVALID_KEY
OBJECT_NOT_FOUND = _pb.OBJECT_NOT_FOUND
OBJECT_ALREADY_EXISTS = _pb.OBJECT_ALREADY_EXISTS
OBJECT_HAS_LEASE = _pb.OBJECT_HAS_LEASE
REPLICA_IS_NOT_READY = _pb.REPLICA_IS_NOT_READY
NO_AVAILABLE_HANDLE = _pb.NO_AVAILABLE_HANDLE
TRANSFER_FAILED = _pb.TRANSFER_FAILED
LEASE_EXPIRED = _pb.LEASE_EXPIRED
ADDRESS_OUT_OF_RANGE = _pb.ADDRESS_OUT_OF_RANGE
BUFFER_EXHAUSTED = _pb.BUFFER_EXHAUSTED
UNAUTHENTICATED = _pb.UNAUTHENTICATED
SEGMENT_NOT_FOUND = _pb.SEGMENT_NOT_FOUND
REPLICA_ALREADY_ON_SEGMENT = _pb.REPLICA_ALREADY_ON_SEGMENT
NO_REPLICA_ON_SEGMENT = _pb.NO_REPLICA_ON_SEGMENT
TASK_NOT_FOUND = _pb.TASK_NOT_FOUND
TASK_QUEUE_FULL = _pb.TASK_QUEUE_FULL
TASK_TIMED_OUT = _pb.TASK_TIMED_OUT


def code_name(code: int) -> str:
    """The proto name of an ErrorCode ("UNKNOWN(<n>)" for a number the proto does not define)."""
    try:
        return _pb.ErrorCode.Name(code)
    except ValueError:
        return f"UNKNOWN({code})"


class StoreError(Exception):
    """Base class of every error the client raises on purpose."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.code_name = code_name(code)

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""

    @staticmethod
    def from_code(code: int, message: str) -> "StoreError":
        """The subclass for `code` (a status a store service returned, or one produced here)."""
        cls = _BY_CODE.get(code)
        if cls is None:
            return StoreError(code, message)
        if cls in (InvalidParamsError, TransferError, UnavailableError):
            return cls(message, code=code)
        return cls(message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code_name}: {self.message})"


class ObjectNotFoundError(StoreError):
    """The key does not exist (or has no complete replica)."""

    def __init__(self, message: str):
        super().__init__(OBJECT_NOT_FOUND, message)


class ObjectNotReadyError(StoreError):
    """The key is being written (PutStart without PutEnd yet)."""

    def __init__(self, message: str):
        super().__init__(REPLICA_IS_NOT_READY, message)


class ObjectExistsError(StoreError):
    """The key is already stored (objects are immutable; use upsert to replace)."""

    def __init__(self, message: str):
        super().__init__(OBJECT_ALREADY_EXISTS, message)


class ObjectLeasedError(StoreError):
    """Remove or upsert refused because a reader holds a lease on the object."""

    def __init__(self, message: str):
        super().__init__(OBJECT_HAS_LEASE, message)


class InvalidParamsError(StoreError):
    """A bad argument (type, size, key, buffer...)."""

    def __init__(self, message: str, code: int = INVALID_PARAMS):
        super().__init__(code, message)


class LeaseInUseError(InvalidParamsError):
    """A buffer lease cannot be released while views of its memory are alive."""


class NoSpaceError(StoreError):
    """The master could not place even one replica."""

    def __init__(self, message: str):
        super().__init__(NO_AVAILABLE_HANDLE, message)


class TransferError(StoreError):
    """Moving bytes failed: every replica was unreachable, refused, or timed out."""

    def __init__(self, message: str, code: int = TRANSFER_FAILED):
        super().__init__(code, message)


class LeaseExpiredError(StoreError):
    """A read's lease ran out before it finished: no data is returned."""

    def __init__(self, message: str):
        super().__init__(LEASE_EXPIRED, message)


class BufferExhaustedError(StoreError):
    """The shared buffer pool could not hand out memory within its caps or timeout."""

    def __init__(self, message: str):
        super().__init__(BUFFER_EXHAUSTED, message)


class UnavailableError(StoreError):
    """The real client is unreachable, died, or did not answer within the call's deadline; or
    this client is closed."""

    def __init__(self, message: str, code: int = UNAVAILABLE_IN_CURRENT_STATUS):
        super().__init__(code, message)


class UnauthenticatedError(StoreError):
    """The cluster secret was refused: this process has none, or a different one, than the store
    service (STORE_CLUSTER_SECRET_FILE / cluster_secret_file). Retrying does not help."""

    def __init__(self, message: str):
        super().__init__(UNAUTHENTICATED, message)


class DeadlineExceededError(UnavailableError):
    """The real client did not answer within the call's deadline (the call may still complete
    there)."""


_BY_CODE = {
    OBJECT_NOT_FOUND: ObjectNotFoundError,
    REPLICA_IS_NOT_READY: ObjectNotReadyError,
    OBJECT_ALREADY_EXISTS: ObjectExistsError,
    OBJECT_HAS_LEASE: ObjectLeasedError,
    INVALID_PARAMS: InvalidParamsError,
    INVALID_KEY: InvalidParamsError,
    NO_AVAILABLE_HANDLE: NoSpaceError,
    TRANSFER_FAILED: TransferError,
    ADDRESS_OUT_OF_RANGE: TransferError,
    LEASE_EXPIRED: LeaseExpiredError,
    BUFFER_EXHAUSTED: BufferExhaustedError,
    UNAVAILABLE_IN_CURRENT_STATUS: UnavailableError,
    UNAUTHENTICATED: UnauthenticatedError,
}


def error_code(exc: BaseException) -> int:
    """The negative ErrorCode of an exception (INTERNAL_ERROR for anything not a StoreError)."""
    return exc.code if isinstance(exc, StoreError) else INTERNAL_ERROR


def error_class(code: int) -> Type[StoreError]:
    return _BY_CODE.get(code, StoreError)


def check(code: int, message: str, what: Optional[str] = None) -> None:
    """Raises the StoreError for a failed status (`message` or `what` as its text)."""
    if code != OK:
        raise StoreError.from_code(code, message or f"{what}: {code_name(code)}")
