"""DummyClient.adopt_memory: memory the process allocated itself (as an engine allocates its KV
pool) is moved into a region file in place, keeping its address and bytes, so the real client
reads and writes it directly; partial pages at unaligned edges are staged; release_adopted ends it."""
import mmap
import os

import numpy as np
import pytest

from kvcache_store import InvalidParamsError
from kvcache_store.shm_region import PAGE


def anon(pages: int) -> mmap.mmap:
    """Memory like SGLang's host pool allocator gives (anonymous, shared, page-aligned)."""
    return mmap.mmap(-1, pages * PAGE, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)


def test_adopted_memory_keeps_address_and_bytes_and_moves_with_no_copy(client, service, shm_dir, key):
    mm = anon(8)
    arr = np.frombuffer(mm, dtype=np.uint8)
    arr[:] = np.random.default_rng(1).integers(0, 256, arr.size, dtype=np.uint8)
    before = arr.tobytes()
    addr = arr.ctypes.data

    out = client.adopt_memory(addr, arr.size)
    assert out == {"address": addr, "size": 8 * PAGE, "head": 0, "tail": 0}
    assert arr.ctypes.data == addr and arr.tobytes() == before
    region = [n for n in os.listdir(shm_dir) if n.startswith("kvstore-region-") and n in open(f"/proc/{os.getpid()}/maps").read()]
    assert region, "the memory now lives in a region file"

    s0 = client.stats()
    assert client.put_from(key, addr + PAGE, 3 * PAGE) == 0
    assert client.get_into(key, addr + 5 * PAGE, 3 * PAGE) == 3 * PAGE
    s1 = client.stats()
    assert s1["zero_copy_bytes_put"] - s0["zero_copy_bytes_put"] == 3 * PAGE
    assert s1["zero_copy_bytes_get"] - s0["zero_copy_bytes_get"] == 3 * PAGE
    assert s1["staged_bytes_put"] == s0["staged_bytes_put"] and s1["staged_bytes_get"] == s0["staged_bytes_get"]
    assert arr[5 * PAGE:8 * PAGE].tobytes() == before[PAGE:4 * PAGE]
    # the store service maps the same file: that is where it wrote
    assert any(n in service.maps() for n in region)
    del arr


def test_unaligned_edges_are_staged_and_reported(client, key):
    mm = anon(6)
    base = np.frombuffer(mm, dtype=np.uint8)
    start = base.ctypes.data + 100
    size = 5 * PAGE - 300  # from 100 B into page 0 to 200 B before the end of page 4
    out = client.adopt_memory(start, size)
    assert out == {"address": base.ctypes.data + PAGE, "size": 3 * PAGE, "head": PAGE - 100, "tail": PAGE - 200}

    s0 = client.stats()
    assert client.put_from(key, start, 200) == 0  # in the head page: staged
    assert client.put_from(key + "-in", base.ctypes.data + 2 * PAGE, 100) == 0  # inside: zero copy
    s1 = client.stats()
    assert s1["staged_bytes_put"] - s0["staged_bytes_put"] == 200
    assert s1["zero_copy_bytes_put"] - s0["zero_copy_bytes_put"] == 100

    tiny = anon(1)
    t = np.frombuffer(tiny, dtype=np.uint8)
    assert client.adopt_memory(t.ctypes.data + 1, 100) == {"address": t.ctypes.data + PAGE, "size": 0, "head": 100, "tail": 0}
    del base, t


def test_bad_adoptions_raise(client):
    mm = anon(2)
    arr = np.frombuffer(mm, dtype=np.uint8)
    client.adopt_memory(arr.ctypes.data, arr.size)
    with pytest.raises(InvalidParamsError):
        client.adopt_memory(arr.ctypes.data + PAGE, PAGE)  # overlaps
    with pytest.raises(InvalidParamsError):
        client.adopt_memory(b"x" * (3 * PAGE))  # no fixed address
    assert client.release_adopted(12345) < 0
    del arr


def test_release_keeps_the_bytes_and_deletes_the_file(client, shm_dir, key):
    mm = anon(4)
    arr = np.frombuffer(mm, dtype=np.uint8)
    arr[:] = 7
    client.adopt_memory(arr.ctypes.data, arr.size)
    files = set(os.listdir(shm_dir))
    assert client.release_adopted(arr.ctypes.data + 10) == 0
    assert len(set(os.listdir(shm_dir))) == len(files) - 1
    assert (arr == 7).all()
    arr[0] = 8  # still writable memory of this process
    s0 = client.stats()
    assert client.put_from(key, arr.ctypes.data, PAGE) == 0
    assert client.stats()["staged_bytes_put"] - s0["staged_bytes_put"] == PAGE
    del arr
