"""Adopted memory: a range of this process's own memory (an engine's KV host pool) moved into a
region file in place, so the real client can read and write it directly.

The engine allocated the memory itself and keeps its pointers (a torch tensor's data_ptr()), so
the range cannot be moved. Instead its page-aligned interior is remapped where it lies: a region
file of that size is created in the shared directory, each chunk of the range is copied into the
file and the file is mapped MAP_SHARED|MAP_FIXED over the chunk's own addresses. The memory keeps
its address and its bytes but now lives in the file, which the real client maps too
(RegisterRegion): puts from it and gets into it copy nothing in this process.

Only whole pages can be remapped: the partial pages at the head and tail of an unaligned range
stay where they are (buffers there are staged through a lease, one memmove). Chunks keep the
extra memory during the copy to one chunk instead of the whole range.

Limits: the memory must not be in use while it is adopted (a write between a chunk's copy and its
remap would be lost), and it must outlive the adoption (freeing it while adopted hands shared
pages to whatever reuses the addresses). Memory pinned for a GPU (cudaHostRegister) must not be
adopted: the remap replaces the pinned pages behind the driver's back.
"""
import ctypes
import ctypes.util
import fcntl
import mmap
import os
import uuid
from typing import Optional

from .errors import InvalidParamsError, UnavailableError
from .shm_region import PAGE, REGION_PREFIX, _live_lock, _live_paths, _unlink

#: Bytes copied and remapped per step: bounds the memory held twice during adoption.
CHUNK = 64 << 20

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_MAP_FIXED = 0x10
_MAP_FAILED = ctypes.c_void_p(-1).value


def aligned_interior(address: int, size: int, page: int = PAGE):
    """(start, length) of the whole pages inside [address, address+size); length 0 when none."""
    start = (address + page - 1) // page * page
    end = (address + size) // page * page
    return (start, end - start) if end > start else (start, 0)


class AdoptedRegion:
    """The page-aligned range [address, address+size) of this process, remapped onto a region file
    `kvstore-region-<pid>-<uuid>` in `shm_dir`. Has the attributes the client needs of a region
    (name, size, address); close() deletes the file but leaves the memory mapped: it belongs to
    its owner, who unmaps or frees it."""

    adopted = True

    def __init__(self, shm_dir: str, address: int, size: int, chunk: int = CHUNK):
        if address % PAGE or size % PAGE or size <= 0:
            raise InvalidParamsError(f"adopt: [0x{address:x}, +{size}) is not a non-empty page-aligned range")
        self.address = address
        self.size = size
        self.name = f"{REGION_PREFIX}{os.getpid()}-{uuid.uuid4().hex}"
        self.path = os.path.join(shm_dir, self.name)
        self._fd: Optional[int] = None
        self.closed = False
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            with _live_lock:
                _live_paths.add(self.path)
            # held while this process lives: the real client deletes region files nobody holds
            fcntl.flock(self._fd, fcntl.LOCK_SH)
            os.ftruncate(self._fd, size)
            for off in range(0, size, chunk):
                n = min(chunk, size - off)
                src = (ctypes.c_char * n).from_address(address + off)
                written = 0
                while written < n:
                    written += os.pwrite(self._fd, memoryview(src)[written:], off + written)
                got = _libc.mmap(address + off, n, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED | _MAP_FIXED, self._fd, off)
                if got in (None, _MAP_FAILED) or got != address + off:
                    err = ctypes.get_errno()
                    # the chunks before this one already live in the file; the file stays while mapped
                    raise UnavailableError(f"adopt: mmap over 0x{address + off:x} failed: {os.strerror(err)} (chunks before it stay remapped)")
        except OSError as e:
            self._discard()
            raise UnavailableError(f"adopt: cannot create region file {self.path} of {size} bytes: {e}") from e
        except BaseException:
            self._discard()
            raise

    def contains(self, address: int, length: int) -> bool:
        return self.address <= address and address + length <= self.address + self.size

    def close(self) -> None:
        """Deletes the file and closes its descriptor; the memory stays mapped (its owner's)."""
        if self.closed:
            return
        self.closed = True
        self._discard()

    def _discard(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        with _live_lock:
            _live_paths.discard(self.path)
        _unlink(self.path)

    def __repr__(self) -> str:
        return f"AdoptedRegion(0x{self.address:x}, {self.size} B, {self.name})"
