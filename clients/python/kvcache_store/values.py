"""What DummyClient accepts as a value or a target: bytes-like objects and anything else with the
buffer protocol (bytearray, memoryview, numpy arrays, mmap...), torch tensors (through
data_ptr(); CPU only), and raw pointers (int) with a size. All must be contiguous.

`as_buffer` turns one into a Buf: its address (None when it cannot be in a shared region, e.g. a
bytes object), its size, and a byte memoryview to copy through (None for pointers and tensors,
which are copied with ctypes.memmove).
"""
import ctypes
from typing import NamedTuple, Optional

from .errors import InvalidParamsError


class Buf(NamedTuple):
    address: Optional[int]
    size: int
    view: Optional[memoryview]


def _is_tensor(value) -> bool:
    return hasattr(value, "data_ptr") and hasattr(value, "element_size") and hasattr(value, "numel")


def as_buffer(value, size: Optional[int] = None, writable: bool = False, what: str = "value") -> Buf:
    """The Buf of `value` (its first `size` bytes when size is given). Raises InvalidParamsError."""
    if isinstance(value, bool):
        raise InvalidParamsError(f"{what}: expected a buffer or a pointer, got a bool")
    if isinstance(value, int):
        if value <= 0:
            raise InvalidParamsError(f"{what}: the pointer 0x{value:x} is not a valid address")
        if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
            raise InvalidParamsError(f"{what}: a pointer needs a positive size, got {size!r}")
        return Buf(value, size, None)
    if _is_tensor(value):
        return _tensor_buffer(value, size, what)
    try:
        mv = memoryview(value)
    except TypeError:
        raise InvalidParamsError(
            f"{what}: expected bytes, bytearray, memoryview, a numpy array, a torch tensor, a BufferLease or a pointer (int); "
            f"got {type(value).__name__}"
        ) from None
    if not mv.c_contiguous:
        raise InvalidParamsError(f"{what}: the buffer is not contiguous (make a contiguous copy first, e.g. numpy.ascontiguousarray)")
    if writable and mv.readonly:
        raise InvalidParamsError(f"{what}: the target buffer is read-only")
    if mv.ndim != 1 or mv.itemsize != 1 or mv.format != "B":
        mv = mv.cast("B")
    n = mv.nbytes
    if size is not None:
        if not isinstance(size, int) or isinstance(size, bool) or size <= 0 or size > n:
            raise InvalidParamsError(f"{what}: size {size!r} must be positive and at most the buffer's {n} bytes")
        if size < n:
            mv = mv[:size]
            n = size
    if n == 0:
        raise InvalidParamsError(f"{what}: the buffer is empty")
    address = None
    if not mv.readonly and type(mv.obj) not in (bytearray, bytes):
        address = ctypes.addressof(ctypes.c_char.from_buffer(mv))
    return Buf(address, n, mv)


def _tensor_buffer(t, size: Optional[int], what: str) -> Buf:
    device = getattr(t, "device", None)
    if device is not None and getattr(device, "type", "cpu") != "cpu":
        raise InvalidParamsError(f"{what}: a {device} tensor cannot be read or written here; copy it to a CPU tensor first")
    if not t.is_contiguous():
        raise InvalidParamsError(f"{what}: the tensor is not contiguous (call .contiguous() first)")
    n = t.numel() * t.element_size()
    if size is not None:
        if not isinstance(size, int) or isinstance(size, bool) or size <= 0 or size > n:
            raise InvalidParamsError(f"{what}: size {size!r} must be positive and at most the tensor's {n} bytes")
        n = size
    if n == 0:
        raise InvalidParamsError(f"{what}: the tensor is empty")
    return Buf(t.data_ptr(), n, None)


def copy_in(dst: memoryview, dst_address: int, src: Buf) -> None:
    """Copies src into dst (a byte view of src.size bytes at dst_address)."""
    if src.view is not None:
        dst[: src.size] = src.view
    else:
        ctypes.memmove(dst_address, src.address, src.size)


def copy_out(dst: Buf, src: memoryview, src_address: int, n: int) -> None:
    """Copies the first n bytes of src (at src_address) into dst."""
    if dst.view is not None:
        dst.view[:n] = src[:n]
    else:
        ctypes.memmove(dst.address, src_address, n)
