"""DummyClient.adopt_memory against a real store service: memory this process allocated (as an
engine allocates its KV pool) moves into a shared region in place; values inside its whole pages
move with no copy, the partial head and tail pages are staged, remap() fences late transfers."""
import ctypes
import mmap
import os

import pytest

from kvcache_store import InvalidParamsError

PAGE = mmap.PAGESIZE


@pytest.fixture
def engine_memory():
    """8 pages of private anonymous memory filled with a pattern, as an engine's own pool."""
    mm = mmap.mmap(-1, 8 * PAGE)
    mm.write(bytes((i * 7) % 251 for i in range(8 * PAGE)))
    addr = ctypes.addressof(ctypes.c_char.from_buffer(mm))
    yield mm, addr
    mm.close()


def test_adopted_memory_keeps_its_address_and_bytes_and_moves_with_no_copy(make_client, service, engine_memory, key):
    rclient = make_client(raise_errors=True, direct_reads=False)  # the real client's own path is counted below
    mm, addr = engine_memory
    before = bytes(mm)
    # the range starts and ends inside a page: 6 whole pages can move, head and tail stay
    mem = rclient.adopt_memory(addr + 100, 8 * PAGE - 200)
    assert (mem.start, mem.end) == (addr + PAGE, addr + 7 * PAGE)
    assert mem.shared_bytes == 6 * PAGE
    assert bytes(mm) == before  # same addresses, same bytes

    s0 = rclient.stats()
    assert rclient.put_from(key, addr + 2 * PAGE, PAGE) == 0
    s1 = rclient.stats()
    assert s1["zero_copy_bytes_put"] - s0["zero_copy_bytes_put"] == PAGE
    assert s1["staged_bytes_put"] == s0["staged_bytes_put"]
    assert mem.region.name in service.maps()

    ctypes.memset(addr + 4 * PAGE, 0, PAGE)
    assert rclient.get_into(key, addr + 4 * PAGE, PAGE) == PAGE
    s2 = rclient.stats()
    assert s2["zero_copy_bytes_get"] - s1["zero_copy_bytes_get"] == PAGE
    assert bytes(mm[4 * PAGE:5 * PAGE]) == before[2 * PAGE:3 * PAGE]

    # the head page is the engine's private memory still: staged, one copy
    assert rclient.put_from(key + "-head", addr + 100, 200) == 0
    assert rclient.stats()["staged_bytes_put"] - s2["staged_bytes_put"] == 200
    assert rclient.get(key + "-head") == before[100:300]


def test_remap_moves_the_memory_to_a_new_file_so_late_transfers_reach_nobody(make_client, service, engine_memory, key):
    rclient = make_client(raise_errors=True, direct_reads=False)  # the real client's own path is counted below
    mm, addr = engine_memory
    mem = rclient.adopt_memory(addr, 8 * PAGE)
    assert rclient.put_from(key, addr, PAGE) == 0  # registers the region with the service
    old_name, old_path = mem.region.name, mem.region.path
    held = os.open(old_path, os.O_RDONLY)  # the old file, as a late transfer of the service sees it
    try:
        before = bytes(mm)
        mem.remap()
        assert mem.remaps == 1 and mem.region.name != old_name
        assert bytes(mm) == before
        assert not os.path.exists(old_path)
        mm[0:5] = b"fresh"  # the engine writes after the fence: the old file does not see it
        assert os.pread(held, 5, 0) == before[0:5]
        with open(mem.region.path, "rb") as f:
            assert f.read(5) == b"fresh"
    finally:
        os.close(held)
    # the new file serves the data path: zero copy again
    s0 = rclient.stats()
    assert rclient.get_into(key, addr + PAGE, PAGE) == PAGE
    assert rclient.stats()["zero_copy_bytes_get"] - s0["zero_copy_bytes_get"] == PAGE
    assert bytes(mm[PAGE:PAGE + 5]) == before[0:5]  # the value put before the remap
    assert mem.region.name in service.maps()


def test_release_keeps_the_memory_usable(make_client, engine_memory, key):
    rclient = make_client(raise_errors=True, direct_puts=False)  # the real client's own path is counted below
    mm, addr = engine_memory
    mem = rclient.adopt_memory(addr, 8 * PAGE)
    path = mem.region.path
    mem.release()
    assert not os.path.exists(path)
    mm[0:4] = b"still"[:4]
    assert bytes(mm[0:4]) == b"stil"
    s0 = rclient.stats()
    assert rclient.put_from(key, addr, PAGE) == 0  # now outside any region: staged
    assert rclient.stats()["staged_bytes_put"] - s0["staged_bytes_put"] == PAGE


def test_a_range_without_a_whole_page_is_refused(rclient, engine_memory):
    _, addr = engine_memory
    with pytest.raises(InvalidParamsError, match="no whole page"):
        rclient.adopt_memory(addr + 10, PAGE)
    with pytest.raises(InvalidParamsError):
        rclient.adopt_memory(b"immutable bytes")
