"""Shared regions: files in the shared directory (STORE_SHM_DIR) that this process maps and the
real client maps too (RegisterRegion), so that bytes in them move between the engine and the
cluster with no copy in either process.

A SharedRegion owns its file, descriptor and mapping (closed and the file deleted by close(), or
at interpreter exit for regions still open). `window(offset, length)` maps a page-aligned part of
the file a second time, for buffer leases whose views must be tracked on their own (see
buffer_pool.py): both mappings share the same pages.
"""
import atexit
import ctypes
import fcntl
import mmap
import os
import threading
import uuid
from typing import Optional, Set, Tuple

from .errors import InvalidParamsError, UnavailableError

#: The real client maps only files with this prefix.
REGION_PREFIX = "kvstore-region-"
PAGE = mmap.PAGESIZE
_MAP_POPULATE = getattr(mmap, "MAP_POPULATE", 0x8000)

_live_paths: Set[str] = set()
_live_lock = threading.Lock()


def _remove_live_files() -> None:
    with _live_lock:
        paths = list(_live_paths)
        _live_paths.clear()
    for p in paths:
        _unlink(p)


atexit.register(_remove_live_files)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def round_up(n: int, to: int = PAGE) -> int:
    return (n + to - 1) // to * to


def address_of(buf) -> int:
    """Address of the first byte of a writable buffer (mmap, bytearray, writable memoryview)."""
    return ctypes.addressof(ctypes.c_char.from_buffer(buf))


def new_region_path(shm_dir: str) -> Tuple[str, str]:
    """The name `kvstore-region-<pid>-<uuid>` of a new region file, and its path in `shm_dir`."""
    name = f"{REGION_PREFIX}{os.getpid()}-{uuid.uuid4().hex}"
    return name, os.path.join(shm_dir, name)


def open_region_file(path: str, size: int) -> int:
    """Creates the region file at `path` (exclusively, 0600) of `size` bytes and returns its fd.
    The file is deleted at exit if still there, and share-locked while this process lives (the
    kernel drops the lock at death): the real client deletes region files nobody holds a lock on,
    so a crashed process leaves none behind. On failure (OSError) nothing is left."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        with _live_lock:
            _live_paths.add(path)
        fcntl.flock(fd, fcntl.LOCK_SH)
        os.ftruncate(fd, size)
    except OSError:
        discard_region_file(fd, path)
        raise
    return fd


def discard_region_file(fd: Optional[int], path: str) -> None:
    """Closes the region file's fd (if open) and deletes the file."""
    if fd is not None:
        os.close(fd)
    with _live_lock:
        _live_paths.discard(path)
    _unlink(path)


class SharedRegion:
    """A file `kvstore-region-<pid>-<uuid>` of `size` bytes in `shm_dir`, mapped read-write."""

    def __init__(self, shm_dir: str, size: int):
        if not isinstance(size, int) or size <= 0:
            raise InvalidParamsError(f"shared region size must be a positive integer, got {size!r}")
        self.size = round_up(size)
        self.name, self.path = new_region_path(shm_dir)
        self._fd: Optional[int] = None
        try:
            self._fd = open_region_file(self.path, self.size)
            self.mm = mmap.mmap(self._fd, self.size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError as e:
            self._discard()
            raise UnavailableError(f"cannot create shared region {self.path} of {self.size} bytes: {e}") from e
        self.address = address_of(self.mm)
        self.view = memoryview(self.mm)
        self.closed = False

    def contains(self, address: int, length: int) -> bool:
        return self.address <= address and address + length <= self.address + self.size

    def window(self, offset: int, length: int) -> mmap.mmap:
        """A second mapping of [offset, offset+length) (offset page-aligned), pages pre-faulted."""
        if offset % PAGE != 0 or offset < 0 or offset + length > self.size:
            raise InvalidParamsError(f"window [{offset}, +{length}) of region {self.name} is not page-aligned or out of range")
        return mmap.mmap(self._fd, length, flags=mmap.MAP_SHARED | _MAP_POPULATE, prot=mmap.PROT_READ | mmap.PROT_WRITE, offset=offset)

    def close(self) -> None:
        """Unmaps (once no view of the mapping is alive: the caller released them) and deletes."""
        if self.closed:
            return
        self.closed = True
        self.view.release()
        try:
            self.mm.close()
        except BufferError:
            # a view of it escaped: the mapping stays until that view is collected
            pass
        self._discard()

    def _discard(self) -> None:
        discard_region_file(self._fd, self.path)
        self._fd = None
