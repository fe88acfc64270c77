"""The shared-memory buffer pool: leases of memory in shared regions (spec "Client local buffer
and Python buffer pool").

- One primary region, carved by a first-fit RangeAllocator. When it has no room, a temporary
  overflow region (a new region file) is made for one lease and deleted when it is released.
- Caps: `max_regions` (leases outstanding), `max_bytes` (bytes outstanding, overflow included).
  `acquire` waits in FIFO order up to its timeout, then raises BufferExhaustedError.
- Engine leases (`tracked`, from DummyClient.alloc_buffer) check the lifetime of their views:
  each has its own mapping of its range, so `release()` can tell whether any view of it is still
  alive (the memoryview it handed out, a slice, a numpy array over it...). Then release raises
  LeaseInUseError and keeps the lease, with memoryview.release()'s semantics; otherwise the
  mapping is closed and the range returned. Internal staging leases are views of the region's
  own mapping (the client drops its views before it releases them).
- Internal staging and engine leases share the pool.

The pool also answers which region holds an address (`locate`), so that a buffer inside one
(a lease, a slice of one, a pointer into one) is passed to the real client as a span, uncopied.
"""
import bisect
import collections
import threading
import time
from typing import Callable, List, Optional, Tuple

from .errors import BufferExhaustedError, InvalidParamsError, LeaseInUseError
from .range_allocator import RangeAllocator
from .shm_region import SharedRegion, address_of


class BufferLease:
    """Memory in a shared region: `buffer` (a writable memoryview of `size` bytes), `ptr` (its
    address), `release()`. A context manager (release at exit). put_from/get_into on it (or on a
    slice of it, or a pointer into it) copy nothing."""

    __slots__ = ("_pool", "region", "offset", "size", "ptr", "_mm", "_mv", "overflow", "tracked", "_released", "__weakref__")

    def __init__(self, pool, region: SharedRegion, offset: int, size: int, overflow: bool, tracked: bool):
        self._pool = pool
        self.region = region
        self.offset = offset  # in the region file
        self.size = size
        self.overflow = overflow
        self.tracked = tracked
        self._released = False
        self._mm = None
        if tracked and not overflow:
            self._mm = region.window(offset, pool.allocator.rounded(size))
            self.ptr = address_of(self._mm)
        else:
            self.ptr = region.address + offset
        self._mv: Optional[memoryview] = None

    @property
    def buffer(self) -> memoryview:
        """The leased bytes. Raises InvalidParamsError once released."""
        if self._released:
            raise InvalidParamsError(f"buffer lease at 0x{self.ptr:x} ({self.size} B) used after release")
        if self._mv is None:
            if self._mm is not None:
                self._mv = memoryview(self._mm)[: self.size]
            else:
                self._mv = self.region.view[self.offset:self.offset + self.size]
        return self._mv

    @property
    def released(self) -> bool:
        return self._released

    def release(self) -> None:
        """Returns the memory to the pool. Raises LeaseInUseError (keeping the lease) while a view
        of it is alive, InvalidParamsError when released twice."""
        if self._released:
            raise InvalidParamsError(f"buffer lease at 0x{self.ptr:x} released twice")
        if self.tracked:
            self._close_views()
        elif self._mv is not None:
            self._mv.release()
            self._mv = None
        self._released = True
        self._pool._return(self._record())
        self._mm = None

    def _close_views(self) -> None:
        if self._mv is not None:
            try:
                self._mv.release()
            except BufferError:
                raise LeaseInUseError(
                    f"buffer lease at 0x{self.ptr:x} ({self.size} B): a buffer exported from lease.buffer (a numpy array, "
                    "torch tensor...) is still alive; drop it before release()"
                ) from None
            self._mv = None
        mm = self._mm if self._mm is not None else (self.region.mm if self.overflow else None)
        if mm is None:
            return
        if self.overflow:
            self.region.view.release()
        try:
            mm.close()
        except BufferError:
            if self.overflow:
                self.region.view = memoryview(self.region.mm)
            raise LeaseInUseError(
                f"buffer lease at 0x{self.ptr:x} ({self.size} B): a view of its memory (a slice of lease.buffer, "
                "memoryview, numpy array...) is still alive; release or drop it before release()"
            ) from None

    def __enter__(self) -> "BufferLease":
        return self

    def __exit__(self, *exc) -> None:
        if not self._released:
            self.release()

    def __del__(self) -> None:
        # A lease dropped without release(): its range goes back once no view can reach it. The
        # pool is not touched here (a collection may run while this thread holds its lock): the
        # range is queued and the pool takes it back on its next acquire.
        if getattr(self, "_released", True) or self._pool._closed:
            return
        try:
            if self.tracked:
                self._close_views()
        except Exception:
            return  # a view outlives it: the range stays allocated (never handed to someone else)
        self._released = True
        self._pool._dropped.append(self._record())

    def _record(self) -> tuple:
        return (self.size, self.overflow, self.region, self.offset, self.ptr if self._mm is not None else None)

    def __repr__(self) -> str:
        state = "released" if self._released else ("overflow" if self.overflow else "live")
        return f"BufferLease(ptr=0x{self.ptr:x}, size={self.size}, {state})"


class BufferPool:
    def __init__(
        self,
        primary: SharedRegion,
        new_region: Optional[Callable[[int], SharedRegion]] = None,
        drop_region: Optional[Callable[[SharedRegion], None]] = None,
        max_regions: int = 0,
        max_bytes: int = 0,
        default_timeout: float = 10.0,
    ):
        self.primary = primary
        self.allocator = RangeAllocator(primary.size)
        self._new_region = new_region
        self._drop_region = drop_region
        self.max_regions = max_regions
        self.max_bytes = max_bytes
        self.default_timeout = default_timeout
        self._cond = threading.Condition(threading.Lock())
        self._waiters: collections.deque = collections.deque()
        self._leases = 0
        self._leased_bytes = 0
        self._overflow = 0
        self._closed = False
        self._dropped: collections.deque = collections.deque()
        # address windows: sorted starts, and (end, region, file offset of start) per start
        self._starts: List[int] = []
        self._windows: dict = {}
        self._add_window(primary.address, primary.size, primary, 0)

    # ------------------------------------------------------------------ windows

    def _add_window(self, start: int, length: int, region: SharedRegion, offset: int) -> None:
        # release() unmaps a lease's memory before the pool takes its window back, so another
        # thread's new mapping may get the same address first: the newer window replaces it
        if start not in self._windows:
            bisect.insort(self._starts, start)
        self._windows[start] = (start + length, region, offset)

    def _remove_window(self, start: int, region: SharedRegion, offset: int) -> None:
        """Removes the window at `start` if it is still that of `region` at `offset` (not one a
        newer mapping at the same address has put in its place)."""
        w = self._windows.get(start)
        if w is None or w[1] is not region or w[2] != offset:
            return
        del self._starts[bisect.bisect_left(self._starts, start)]
        del self._windows[start]

    def add_region(self, region) -> None:
        """Makes a region that is not a lease (adopted engine memory, adopted_memory.py) known to locate()."""
        with self._cond:
            self._add_window(region.address, region.size, region, 0)

    def remove_region(self, region) -> None:
        with self._cond:
            self._remove_window(region.address, region, 0)

    def locate(self, address: int, length: int) -> Optional[Tuple[SharedRegion, int]]:
        """(region, file offset) of [address, address+length) when it lies in one of our mappings."""
        starts = self._starts
        i = bisect.bisect_right(starts, address) - 1
        if i < 0:
            return None
        start = starts[i]
        w = self._windows.get(start)
        if w is None or address + length > w[0]:
            return None
        return w[1], w[2] + (address - start)

    # ------------------------------------------------------------------ leases

    def stats(self) -> dict:
        with self._cond:
            return {
                "leases": self._leases,
                "leased_bytes": self._leased_bytes,
                "overflow_regions": self._overflow,
                "waiting": len(self._waiters),
                "free_bytes": self.allocator.free_bytes,
            }

    def _check(self, size: int) -> None:
        if self._closed:
            raise BufferExhaustedError("buffer pool is closed")
        if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
            raise InvalidParamsError(f"buffer lease size must be a positive integer, got {size!r}")
        if self.max_bytes and size > self.max_bytes:
            raise BufferExhaustedError(f"lease of {size} B exceeds the pool's max_bytes {self.max_bytes}")
        if self._new_region is None and self.allocator.rounded(size) > self.primary.size:
            raise BufferExhaustedError(f"lease of {size} B exceeds the shared buffer ({self.primary.size} B) and overflow is disabled")

    def try_acquire(self, size: int, tracked: bool = False) -> Optional[BufferLease]:
        """A lease now, or None when the caps or the space do not allow one (or others wait)."""
        with self._cond:
            drops = self._reap() if self._dropped else []
            self._check(size)
            lease = None if self._waiters else self._grant(size, tracked)
        self._drop_all(drops)
        return lease

    def acquire(self, size: int, timeout: Optional[float] = None, tracked: bool = False) -> BufferLease:
        """A lease, waiting in FIFO order up to `timeout` seconds (None: the pool's default;
        0: do not wait); BufferExhaustedError after that."""
        wait = self.default_timeout if timeout is None else timeout
        if self._dropped:
            with self._cond:
                drops = self._reap()
            self._drop_all(drops)
        with self._cond:
            self._check(size)
            if not self._waiters:
                lease = self._grant(size, tracked)
                if lease is not None:
                    return lease
            if wait <= 0:
                raise BufferExhaustedError(self._exhausted(size, wait))
            deadline = time.monotonic() + wait
            me = object()
            self._waiters.append(me)
            self._cond.notify_all()  # observers of stats() (tests) may wait on the condition
            try:
                while True:
                    if self._closed:
                        raise BufferExhaustedError("buffer pool closed while waiting")
                    if self._waiters[0] is me:
                        lease = self._grant(size, tracked)
                        if lease is not None:
                            return lease
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise BufferExhaustedError(self._exhausted(size, wait))
                    self._cond.wait(remaining)
            finally:
                self._waiters.remove(me)
                self._cond.notify_all()

    def _exhausted(self, size: int, wait: float) -> str:
        return (
            f"no {size} B buffer within {wait:g} s ({self._leases} leases, {self._leased_bytes} B outstanding; "
            f"max_regions {self.max_regions or 'unlimited'}, max_bytes {self.max_bytes or 'unlimited'})"
        )

    def _grant(self, size: int, tracked: bool) -> Optional[BufferLease]:
        if self.max_regions and self._leases >= self.max_regions:
            return None
        if self.max_bytes and self._leased_bytes + size > self.max_bytes:
            return None
        offset = self.allocator.allocate(size) if self.allocator.rounded(size) <= self.primary.size else None
        if offset is not None:
            try:
                lease = BufferLease(self, self.primary, offset, size, False, tracked)
            except Exception:
                self.allocator.free(offset)
                raise
            if lease._mm is not None:
                self._add_window(lease.ptr, self.allocator.rounded(size), self.primary, offset)
        elif self._new_region is not None:
            try:
                region = self._new_region(size)
            except Exception as e:
                raise BufferExhaustedError(f"shared buffer full and no overflow region of {size} B could be made: {e}") from e
            self._add_window(region.address, region.size, region, 0)
            self._overflow += 1
            lease = BufferLease(self, region, 0, size, True, tracked)
        else:
            return None
        self._leases += 1
        self._leased_bytes += size
        return lease

    def _return(self, record: tuple) -> None:
        with self._cond:
            drop = self._take_back(record)
            drops = self._reap()
            self._cond.notify_all()
        for region in ([drop] if drop else []) + drops:
            if self._drop_region is not None:
                self._drop_region(region)

    def _take_back(self, record: tuple) -> Optional[SharedRegion]:
        """Returns a lease's range (lock held); the overflow region to drop, if any."""
        size, overflow, region, offset, window = record
        self._leases -= 1
        self._leased_bytes -= size
        if overflow:
            self._overflow -= 1
            self._remove_window(region.address, region, 0)
            return region
        if window is not None:
            self._remove_window(window, region, offset)
        self.allocator.free(offset)
        return None

    def _reap(self) -> list:
        """Takes back the leases dropped without release() (lock held)."""
        drops = []
        while self._dropped:
            r = self._take_back(self._dropped.popleft())
            if r is not None:
                drops.append(r)
        return drops

    def _drop_all(self, regions: list) -> None:
        for region in regions:
            if self._drop_region is not None:
                self._drop_region(region)

    def close(self) -> None:
        """Fails every waiter; leases outstanding stay valid until released."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
