"""A dummy client's first reads of objects in same-host memory looked up at the master by the
dummy itself (kvcache_store/direct_reads.py, docs/client.md "First reads"), against real
processes: served bit-exact with no message to the real client (its /segments counts the calls
it got) in get_into, get and batch_get_into (a missing key in a batch through the real client); a removed
or overwritten object is never read old; a master refusing the secret is not read from."""
import os
import time

import numpy as np

from kvcache_store import DummyClient, ObjectNotFoundError, ReplicateConfig
from kvcache_store import errors as E
from kvcache_store.direct_reads import DirectReads
from kvcache_store.local_reads import LocalReads
from kvcache_store.values import as_buffer

import pytest


def once_unleased(op) -> None:
    """Runs `op` (a return-code call) until no read lease stands in its way: the master refuses
    while one does and nothing announces the lease's end."""
    while True:
        r = op()
        if r != E.OBJECT_HAS_LEASE:
            assert r == 0, r
            return
        time.sleep(0.1)


def test_first_reads_are_served_here_bit_exact_with_no_message(make_client, service, key):
    c = make_client(raise_errors=True)
    writer = make_client(raise_errors=True, direct_reads=False)
    sizes = (4096, 64 * 1024 + 1, 700_000)
    forms = ("ptr", "plain", "numpy", "get")
    values = {}
    for i, size in enumerate(sizes):
        for f in forms:
            values[f"{key}-{i}-{f}"] = os.urandom(size)
    for k, v in values.items():
        writer.put(k, v)
    calls, before = service.dummy_calls(), c.local_read_stats
    for i, size in enumerate(sizes):

        def v(form: str, i: int = i) -> bytes:
            return values[f"{key}-{i}-{form}"]

        with c.alloc_buffer(size) as lease:
            assert c.get_into(f"{key}-{i}-ptr", lease.ptr, size) == size and bytes(lease.buffer) == v("ptr")
            plain = bytearray(size + 3)
            assert c.get_into(f"{key}-{i}-plain", plain) == size and plain[:size] == v("plain")
            arr = np.zeros(size, dtype=np.uint8)
            assert c.get_into(f"{key}-{i}-numpy", arr) == size and arr.tobytes() == v("numpy")
            assert c.get(f"{key}-{i}-get") == v("get")
    after = c.local_read_stats
    assert after["direct"] - before["direct"] == len(sizes) * len(forms)
    assert after["hits"] - before["hits"] == len(sizes) * len(forms)
    assert (after["direct_fallbacks"], after["fallbacks"]) == (before["direct_fallbacks"], before["fallbacks"])
    assert service.dummy_calls() == calls


def test_a_batch_is_looked_up_here_and_a_missing_key_asked_of_the_real_client(make_client, service, key):
    c = make_client(raise_errors=False)
    values = [os.urandom(4096) for _ in range(32)]
    keys = [f"{key}-{i}" for i in range(32)]
    assert c.batch_put(keys, values) == [0] * 32
    with c.alloc_buffer(17 * 4096) as lease:
        ptrs = [lease.ptr + i * 4096 for i in range(17)]

        def read(i: int) -> bytes:
            return bytes(lease.buffer[i * 4096:(i + 1) * 4096])

        calls, before = service.dummy_calls(), c.local_read_stats
        assert c.batch_get_into(keys[:16], ptrs[:16], [4096] * 16) == [4096] * 16
        assert [read(i) for i in range(16)] == values[:16]
        after = c.local_read_stats
        assert service.dummy_calls() == calls and after["direct"] == before["direct"] + 16
        # in a batch of keys never read, the real client gives the missing key's error
        mixed = keys[16:24] + [f"{key}-missing"] + keys[24:]
        assert c.batch_get_into(mixed, ptrs, [4096] * 17) == [4096] * 8 + [E.OBJECT_NOT_FOUND] + [4096] * 8
        assert [read(i) for i in range(8)] + [read(i) for i in range(9, 17)] == values[16:]
        assert service.dummy_calls() == calls + 1, "only the missing key went to the real client"
        last = c.local_read_stats
        assert (last["direct"], last["direct_fallbacks"]) == (after["direct"] + 16, after["direct_fallbacks"] + 1)
        assert c.batch_get_into(keys[:16], ptrs[:16], [4096] * 16) == [4096] * 16  # repeated: here
        assert [read(i) for i in range(16)] == values[:16]
        assert c.local_read_stats["hits"] == last["hits"] + 16 and service.dummy_calls() == calls + 1


def test_a_batch_reads_large_targets_and_late_calls_through_the_real_client(make_client, service, key):
    c = make_client(raise_errors=False)
    small, large = os.urandom(4096), os.urandom(64 * 1024 + 1)
    keys = [f"{key}-small", f"{key}-large"]
    assert c.batch_put(keys, [small, large]) == [0, 0]
    sizes = [len(small), len(large)]
    with c.alloc_buffer(sum(sizes)) as lease:
        ptrs = [lease.ptr, lease.ptr + sizes[0]]
        # the small object is read here, the large one by the real client (its copy does not
        # hold our GIL), both bit-exact, in one call to it
        calls, before = service.dummy_calls(), c.local_read_stats
        assert c.batch_get_into(keys, ptrs, sizes) == sizes
        assert bytes(lease.buffer[:sizes[0]]) == small and bytes(lease.buffer[sizes[0]:]) == large
        assert service.dummy_calls() == calls + 1
        assert c.local_read_stats["direct"] == before["direct"] + 1
    # a deadline passed before the lookup: nothing is looked up here, the usual way reports it
    fresh = make_client(raise_errors=False)
    with fresh.alloc_buffer(sum(sizes)) as lease:
        ptrs = [lease.ptr, lease.ptr + sizes[0]]
        assert all(n < 0 for n in fresh.batch_get_into(keys, ptrs, sizes, timeout=1e-9))
        assert fresh.local_read_stats["direct"] == 0 and fresh.local_read_stats["direct_fallbacks"] == 0
        assert fresh.batch_get_into(keys, ptrs, sizes) == sizes  # then in time: read
        assert fresh.local_read_stats["direct"] == 1


def test_is_exist_is_asked_of_the_master_here_and_a_bad_key_of_the_real_client(make_client, service, key):
    c = make_client()
    strict = make_client(raise_errors=True)
    c.put(f"{key}-there", b"x" * 100)
    calls = service.dummy_calls()
    assert c.is_exist(f"{key}-there") == 1 and c.is_exist(f"{key}-not") == 0
    assert c.batch_is_exist([f"{key}-there", f"{key}-not", f"{key}-there"]) == [1, 0, 1]
    assert service.dummy_calls() == calls
    # keys the master is not asked here: the real client names what is wrong
    assert c.is_exist("bad\nkey") == E.INVALID_KEY
    with pytest.raises(E.InvalidParamsError):
        strict.batch_is_exist([f"{key}-there", ""])
    assert service.dummy_calls() == calls + 2


def test_a_removed_or_overwritten_object_is_never_read_old(make_client, key):
    c = make_client(raise_errors=True)
    other = make_client(raise_errors=False, direct_reads=False)
    old = os.urandom(8192)
    c.put(key, old)
    direct = c.local_read_stats["direct"]
    assert c.get(key) == old
    assert c.local_read_stats["direct"] == direct + 1
    once_unleased(lambda: other.remove(key))
    with pytest.raises(ObjectNotFoundError):
        c.get_into(key, bytearray(8192))
    with pytest.raises(ObjectNotFoundError):
        c.get(key)
    fresh = os.urandom(8192)
    assert other.put(key, fresh) == 0
    assert c.get(key) == fresh
    newer = os.urandom(8192)
    once_unleased(lambda: other.upsert(key, newer))
    assert c.get(key) == newer


def test_a_master_that_refuses_the_secret_is_not_read_from(master, service, key, make_client):
    # a dummy's secret is its real client's, which is the master's: the lookup half is driven here
    writer = make_client(raise_errors=True)
    writer.put(key, os.urandom(4096))
    local = LocalReads(None, 16, lambda a, n: None, 1 << 20)
    direct = DirectReads(local, os.urandom(32), lambda: None)
    try:
        direct.configure(master.rpc, service.endpoint)
        assert direct.usable()
        assert direct.read_into(key, as_buffer(bytearray(4096), None, True, "t")) is None
        assert direct.stats() == {"direct": 0, "direct_fallbacks": 1}
        assert local.hits == 0
        assert not direct.usable()  # not asked again for a while
    finally:
        direct.close()
        local.close()
