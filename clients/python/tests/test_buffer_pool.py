"""The shared-memory buffer pool's rules (spec "Client local buffer and Python buffer pool"):
caps, blocking FIFO acquire with timeout, memoryview lifetime checks, overflow regions."""
import os
import threading

import numpy as np
import pytest
from in_threads import in_threads

from kvcache_store import BufferExhaustedError, InvalidParamsError, LeaseInUseError
from kvcache_store.buffer_pool import BufferPool
from kvcache_store.shm_region import SharedRegion

MiB = 1 << 20


@pytest.fixture
def pool_dir(tmp_path):
    return str(tmp_path)


def make_pool(d, size=4 * MiB, overflow=True, **kw):
    regions = []

    def new_region(n):
        r = SharedRegion(d, n)
        regions.append(r)
        return r

    pool = BufferPool(SharedRegion(d, size), new_region=new_region if overflow else None, drop_region=lambda r: r.close(), **kw)
    return pool, regions


def wait_waiting(pool, n):
    """Until n acquires wait in the pool (the pool notifies its condition when one queues)."""
    with pool._cond:
        assert pool._cond.wait_for(lambda: len(pool._waiters) == n, 30)


def region_files(d):
    return sorted(f for f in os.listdir(d) if f.startswith("kvstore-region-"))


def test_lease_memory_is_the_region_and_locate_finds_it(pool_dir):
    pool, _ = make_pool(pool_dir)
    with pool.acquire(10000, tracked=True) as lease:
        lease.buffer[:5] = b"hello"
        region, offset = pool.locate(lease.ptr + 1, 4)
        assert region is pool.primary and offset == lease.offset + 1
        assert bytes(pool.primary.view[offset - 1:offset + 4]) == b"hello"  # the same pages
        assert pool.locate(lease.ptr, lease.size + 4096) is None or pool.locate(lease.ptr, lease.size + 4096)[0] is pool.primary
    assert pool.stats()["leases"] == 0


def test_max_regions_and_max_bytes_cap_leases(pool_dir):
    pool, _ = make_pool(pool_dir, max_regions=2, max_bytes=3 * 4096)
    a = pool.acquire(4096)
    b = pool.acquire(4096)
    assert pool.try_acquire(1) is None  # max_regions
    b.release()
    with pytest.raises(BufferExhaustedError):
        pool.acquire(3 * 4096, timeout=0)  # max_bytes: 4096 + 12288 > 12288
    with pytest.raises(BufferExhaustedError, match="max_bytes"):
        pool.acquire(4 * 4096)  # can never fit
    a.release()
    pool.acquire(3 * 4096, timeout=0).release()


def test_acquire_times_out_with_buffer_exhausted(pool_dir):
    pool, _ = make_pool(pool_dir, max_regions=1)
    held = pool.acquire(100)
    with pytest.raises(BufferExhaustedError, match="within 0.05 s"):
        pool.acquire(100, timeout=0.05)
    held.release()


def test_blocked_acquires_are_served_in_fifo_order(pool_dir):
    pool, _ = make_pool(pool_dir, max_regions=1)
    held = pool.acquire(100)
    order = []

    def waiter(i):
        lease = pool.acquire(100, timeout=30)
        order.append(i)
        lease.release()

    threads = []
    for i in range(4):
        t = threading.Thread(target=waiter, args=(i,))
        t.start()
        threads.append(t)
        # the next waiter starts only once this one is queued in the pool
        wait_waiting(pool, i + 1)
    held.release()
    for t in threads:
        t.join(30)
    assert order == [0, 1, 2, 3]


def test_release_refuses_while_an_exported_buffer_is_alive_and_keeps_the_lease(pool_dir):
    pool, _ = make_pool(pool_dir)
    lease = pool.acquire(4096, tracked=True)
    arr = np.frombuffer(lease.buffer, dtype=np.uint8)
    arr_writable = np.frombuffer(lease.buffer, dtype=np.uint8)
    with pytest.raises(LeaseInUseError, match="still alive"):
        lease.release()
    assert not lease.released and pool.stats()["leases"] == 1
    del arr, arr_writable
    lease.release()
    assert pool.stats()["leases"] == 0


def test_release_refuses_while_a_slice_is_alive(pool_dir):
    pool, _ = make_pool(pool_dir)
    lease = pool.acquire(8192, tracked=True)
    part = lease.buffer[100:200]
    with pytest.raises(LeaseInUseError):
        lease.release()
    lease.buffer[0:1] = b"x"  # the lease is still usable
    part.release()
    lease.release()
    with pytest.raises(InvalidParamsError, match="after release"):
        lease.buffer
    with pytest.raises(InvalidParamsError, match="twice"):
        lease.release()


def test_memory_of_a_released_lease_is_reused(pool_dir):
    pool, _ = make_pool(pool_dir, size=2 * 4096, overflow=False)
    a = pool.acquire(2 * 4096, tracked=True)
    off = a.offset
    a.release()
    b = pool.acquire(2 * 4096, tracked=True)
    assert b.offset == off
    b.release()


def test_overflow_region_is_created_for_one_lease_and_deleted_at_release(pool_dir):
    pool, regions = make_pool(pool_dir, size=4 * 4096)
    first = pool.acquire(3 * 4096)
    assert len(region_files(pool_dir)) == 1
    over = pool.acquire(5 * 4096, tracked=True)
    assert over.overflow and len(regions) == 1
    assert len(region_files(pool_dir)) == 2
    over.buffer[:3] = b"abc"
    assert pool.locate(over.ptr, 5 * 4096) == (regions[0], 0)
    assert pool.stats()["overflow_regions"] == 1
    over.release()
    assert region_files(pool_dir) == [pool.primary.name]
    assert pool.stats()["overflow_regions"] == 0
    first.release()


def test_without_overflow_a_lease_larger_than_the_region_fails_clearly(pool_dir):
    pool, _ = make_pool(pool_dir, size=4096, overflow=False)
    with pytest.raises(BufferExhaustedError, match="overflow is disabled"):
        pool.acquire(8192)
    with pytest.raises(InvalidParamsError):
        pool.acquire(0)


def test_close_fails_waiters(pool_dir):
    pool, _ = make_pool(pool_dir, max_regions=1)
    held = pool.acquire(1)
    errors = []
    t = threading.Thread(target=lambda: errors.append(pytest.raises(BufferExhaustedError, pool.acquire, 1, 30)))
    t.start()
    wait_waiting(pool, 1)
    pool.close()
    t.join(10)
    assert not t.is_alive() and errors
    held.release()


def test_a_lease_dropped_without_release_comes_back_unless_a_view_outlives_it(pool_dir):
    import gc

    pool, _ = make_pool(pool_dir, size=8 * 4096, overflow=False)
    kept = pool.acquire(4 * 4096, tracked=True)
    view = kept.buffer[0:10]
    del kept
    gc.collect()
    # a view can still reach that memory: its range is never handed out again
    dropped = pool.acquire(4 * 4096, tracked=True)
    where = dropped.offset
    del dropped
    gc.collect()
    again = pool.acquire(4 * 4096, timeout=0)  # the dropped lease's range, taken back
    assert again.offset == where
    assert pool.try_acquire(4096) is None
    again.release()
    view.release()
    assert pool.stats()["leases"] == 1  # the lease whose view outlived it


def test_a_mapping_reusing_a_released_leases_address_keeps_its_window(pool_dir):
    # release() unmaps a tracked lease before the pool takes its window back; a lease another
    # thread maps in between may get the same address. Its window must survive the old one's removal.
    pool, _ = make_pool(pool_dir)
    old = pool.acquire(4096, tracked=True)
    newer = pool.acquire(4096, tracked=True)
    at = old.ptr
    real_return = pool._return

    def racing_return(record):
        # as if `newer` had been mapped at the address `old` just gave up
        with pool._cond:
            pool._add_window(at, 4096, pool.primary, newer.offset)
        real_return(record)

    pool._return = racing_return
    old.release()
    pool._return = real_return
    assert pool.locate(at, 4096) == (pool.primary, newer.offset)
    assert pool._starts.count(at) == 1
    with pool._cond:
        pool._remove_window(at, pool.primary, newer.offset)
    newer.release()
    assert pool.locate(at, 1) is None and pool.stats()["leases"] == 0


def test_threads_acquiring_and_releasing_tracked_leases_at_once(pool_dir):
    pool, _ = make_pool(pool_dir, size=MiB)

    def work():
        for i in range(300):
            with pool.acquire((4096, 65536, 200_000)[i % 3], tracked=True) as lease:
                lease.buffer[:1] = b"x"
                assert pool.locate(lease.ptr, lease.size) is not None

    assert in_threads(work, [()] * 8) == [] and pool.stats()["leases"] == 0
    assert sorted(pool._starts) == pool._starts and len(pool._starts) == len(pool._windows) == 1
