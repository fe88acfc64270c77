"""DummyClient.adopt_memory on memory like SGLang's host pool allocator gives (anonymous, shared,
page-aligned): the real client maps the region file it now lives in, unaligned edges are
reported, overlaps are refused, release_adopted ends an adoption by any address inside it.
(tests/test_adopted_memory.py covers zero copy, staging and remap on private memory.)"""
import mmap
import os

import numpy as np
import pytest

from kvcache_store import InvalidParamsError
from kvcache_store.shm_region import PAGE


def anon(pages: int) -> mmap.mmap:
    """Memory like SGLang's host pool allocator gives (anonymous, shared, page-aligned)."""
    return mmap.mmap(-1, pages * PAGE, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)


def test_shared_anonymous_memory_is_adopted_in_place_and_the_service_maps_its_file(make_client, service, shm_dir, key):
    client = make_client(direct_reads=False)  # the real client's own path is counted below
    mm = anon(8)
    arr = np.frombuffer(mm, dtype=np.uint8)
    arr[:] = np.random.default_rng(1).integers(0, 256, arr.size, dtype=np.uint8)
    before = arr.tobytes()
    addr = arr.ctypes.data

    mem = client.adopt_memory(addr, arr.size)
    assert mem.summary() == {"address": addr, "size": 8 * PAGE, "head": 0, "tail": 0}
    assert arr.ctypes.data == addr and arr.tobytes() == before
    assert mem.region.name in open(f"/proc/{os.getpid()}/maps").read(), "the memory now lives in the region file"

    s0 = client.stats()
    assert client.put_from(key, addr + PAGE, 3 * PAGE) == 0
    assert client.get_into(key, addr + 5 * PAGE, 3 * PAGE) == 3 * PAGE
    s1 = client.stats()
    assert s1["zero_copy_bytes_put"] - s0["zero_copy_bytes_put"] == 3 * PAGE
    assert s1["zero_copy_bytes_get"] - s0["zero_copy_bytes_get"] == 3 * PAGE
    assert s1["staged_bytes_put"] == s0["staged_bytes_put"] and s1["staged_bytes_get"] == s0["staged_bytes_get"]
    assert arr[5 * PAGE:8 * PAGE].tobytes() == before[PAGE:4 * PAGE]
    assert mem.region.name in service.maps()  # the store service wrote into the same file
    del arr


def test_unaligned_edges_are_reported_and_staged(make_client, key):
    client = make_client(direct_puts=False)  # the real client's own path is counted below
    mm = anon(6)
    base = np.frombuffer(mm, dtype=np.uint8)
    start = base.ctypes.data + 100
    mem = client.adopt_memory(start, 5 * PAGE - 300)  # from 100 B into page 0 to 200 B before the end of page 4
    assert mem.summary() == {"address": base.ctypes.data + PAGE, "size": 3 * PAGE, "head": PAGE - 100, "tail": PAGE - 200}
    s0 = client.stats()
    assert client.put_from(key, start, 200) == 0  # in the head page: staged
    assert client.put_from(key + "-in", base.ctypes.data + 2 * PAGE, 100) == 0  # inside: zero copy
    s1 = client.stats()
    assert s1["staged_bytes_put"] - s0["staged_bytes_put"] == 200
    assert s1["zero_copy_bytes_put"] - s0["zero_copy_bytes_put"] == 100
    del base


def test_overlaps_and_unknown_addresses_are_refused(client):
    mm = anon(2)
    arr = np.frombuffer(mm, dtype=np.uint8)
    client.adopt_memory(arr.ctypes.data, arr.size)
    with pytest.raises(InvalidParamsError, match="overlaps"):
        client.adopt_memory(arr.ctypes.data + PAGE, PAGE)
    assert client.release_adopted(12345) < 0
    del arr


def test_release_adopted_keeps_the_bytes_and_deletes_the_file(make_client, shm_dir, key):
    client = make_client(direct_puts=False)  # the real client's own path is counted below
    mm = anon(4)
    arr = np.frombuffer(mm, dtype=np.uint8)
    arr[:] = 7
    mem = client.adopt_memory(arr.ctypes.data, arr.size)
    path = mem.region.path
    assert client.release_adopted(arr.ctypes.data + 10) == 0
    assert not os.path.exists(path)
    assert (arr == 7).all()
    arr[0] = 8  # still writable memory of this process
    s0 = client.stats()
    assert client.put_from(key, arr.ctypes.data, PAGE) == 0
    assert client.stats()["staged_bytes_put"] - s0["staged_bytes_put"] == PAGE
    assert client.release_adopted(arr.ctypes.data) < 0  # released already
    del arr
