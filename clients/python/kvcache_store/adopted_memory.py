"""Adopted memory: memory an engine allocated itself (a KV cache pool torch made) moved into a
shared region in place, so the real client reads and writes it with no copy in either process.

The page-aligned interior of the range is remapped: a region file of that size is created in the
shared directory and, 64 MiB at a time, the current bytes are written into it and the file is
mapped MAP_SHARED | MAP_FIXED over the same addresses (mmap through ctypes: Python's mmap cannot
place a mapping).
Tensors over the memory keep their address and their bytes but now live in the file, which the
real client maps too (RegisterRegion). The head and tail of the range that share a page with
other memory cannot be remapped without moving that memory too: they stay where they are, and a
value touching them is staged through a lease as any memory outside a region (one memmove).

`remap()` moves the interior into a fresh file again and returns the previous region, which
the caller detaches. This fences late transfers: after a call on the memory missed its deadline
the real client may still write (or read) the old file, and after the swap those bytes reach
nobody. While remap runs nobody may write the memory (the engine's thread calls it between
steps); it copies the whole interior, so it is for the rare deadline miss, not the data path.

An adopted region is never unmapped by close(): the engine still uses the memory. close()
deletes the file and closes its descriptor; the pages live as long as the mapping, which the
engine's allocator removes when it frees the memory.
"""
import ctypes
import ctypes.util
import mmap
import os
import threading
from typing import Optional

from .errors import InvalidParamsError, UnavailableError
from .shm_region import PAGE, discard_region_file, new_region_path, open_region_file, round_up

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_MAP_FAILED = ctypes.c_void_p(-1).value
_MAP_FIXED = getattr(mmap, "MAP_FIXED", 0x10)

#: Bytes copied and remapped per step: bounds the memory held twice while adopting.
CHUNK = 64 << 20


def interior(address: int, size: int):
    """(start, end) of the whole pages inside [address, address+size); start == end when none."""
    start = round_up(address)
    end = (address + size) // PAGE * PAGE
    return (start, end) if end > start else (start, start)


class AdoptedRegion:
    """A region file mapped over [address, address+size) of engine memory. Quacks like
    SharedRegion where DummyClient uses one (name, path, size, address, closed, close())."""

    def __init__(self, shm_dir: str, address: int, size: int):
        self.address = address
        self.size = size
        self.name, self.path = new_region_path(shm_dir)
        self.closed = False
        self._fd: Optional[int] = None
        try:
            self._fd = open_region_file(self.path, size)
            # A chunk at a time: its bytes are written to the file, then the file is placed over
            # the chunk's own addresses (the chunk's old pages go back to the system), so the
            # memory held twice is one chunk, not the whole range.
            for off in range(0, size, CHUNK):
                n = min(CHUNK, size - off)
                src = (ctypes.c_char * n).from_address(address + off)
                done = 0
                while done < n:
                    done += os.pwrite(self._fd, memoryview(src)[done:], off + done)
                got = _libc.mmap(address + off, n, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED | _MAP_FIXED, self._fd, off)
                if got == _MAP_FAILED or got != address + off:
                    err = ctypes.get_errno()
                    # the chunks before this one live in the file already; it stays while mapped
                    raise OSError(err, f"mmap MAP_FIXED at 0x{address + off:x}: {os.strerror(err)} (the chunks before it stay remapped)")
        except (OSError, BufferError, ValueError) as e:
            self._discard()
            raise UnavailableError(f"cannot adopt {size} B at 0x{address:x} into {self.path}: {e}") from e

    def contains(self, address: int, length: int) -> bool:
        return self.address <= address and address + length <= self.address + self.size

    def close(self) -> None:
        """Deletes the file and closes it; the mapping stays (the engine's memory)."""
        if self.closed:
            return
        self.closed = True
        self._discard()

    def _discard(self) -> None:
        discard_region_file(self._fd, self.path)
        self._fd = None


class AdoptedMemory:
    """Engine memory [address, address+size) whose page-aligned interior [start, end) lives in a
    shared region. Made by DummyClient.adopt_memory(), which keeps the region known to its pool
    (values inside [start, end) move with no copy; the rest is staged)."""

    def __init__(self, shm_dir: str, address: int, size: int, attach, detach):
        if not isinstance(address, int) or not isinstance(size, int) or address <= 0 or size <= 0:
            raise InvalidParamsError(f"adopt_memory: a positive address and size are needed, got {address!r}, {size!r}")
        self.address = address
        self.size = size
        self.start, self.end = interior(address, size)
        if self.end == self.start:
            raise InvalidParamsError(f"adopt_memory: [0x{address:x}, +{size}) holds no whole page of {PAGE} B to remap")
        self._shm_dir = shm_dir
        self._attach = attach
        self._detach = detach
        self._lock = threading.Lock()
        self.remaps = 0
        self.region: Optional[AdoptedRegion] = AdoptedRegion(shm_dir, self.start, self.end - self.start)
        attach(self.region)

    @property
    def head(self) -> int:
        """Bytes before the interior (in a page shared with other memory: staged on use)."""
        return self.start - self.address

    @property
    def tail(self) -> int:
        """Bytes after the interior (staged on use)."""
        return self.address + self.size - self.end

    def summary(self) -> dict:
        """{"address", "size", "head", "tail"}: the adopted interior and the bytes left out."""
        return {"address": self.start, "size": self.shared_bytes, "head": self.head, "tail": self.tail}

    @property
    def shared_bytes(self) -> int:
        """Bytes of the range that moved into the region (the rest is staged on use)."""
        return self.end - self.start

    def covers(self, address: int, length: int) -> bool:
        return self.start <= address and address + length <= self.end

    def remap(self) -> None:
        """Moves the interior into a fresh region file and detaches the old one (see the module
        comment: a fence against late transfers). Nobody may write the memory meanwhile."""
        with self._lock:
            if self.region is None:
                raise InvalidParamsError("adopt_memory: released")
            old = self.region
            self.region = AdoptedRegion(self._shm_dir, self.start, self.end - self.start)
            self.remaps += 1
            self._detach(old)
            self._attach(self.region)

    def release(self) -> None:
        """Detaches the region (the memory stays mapped and keeps its bytes)."""
        with self._lock:
            if self.region is not None:
                self._detach(self.region)
                self.region = None

    def __repr__(self) -> str:
        return f"AdoptedMemory(0x{self.address:x}+{self.size}, shared [0x{self.start:x}, 0x{self.end:x}), remaps={self.remaps})"
