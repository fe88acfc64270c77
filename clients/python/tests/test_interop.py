"""A TypeScript and a Python dummy client sharing one real client read each other's objects
bit-exact; values put from and read into Python leases are zero copy (no staging here)."""
import hashlib
import json
import os
import subprocess

import numpy as np

from cluster import NODE
from kvcache_store.dummy_client import LOCAL_READ_MAX

PEER = os.path.join(os.path.dirname(__file__), "ts_peer.mjs")


def pattern(size, seed):
    i = np.arange(size, dtype=np.int64)
    return ((i * 131 + seed * 7 + (i >> 8)) & 255).astype(np.uint8).tobytes()


def ts(service, shm_dir, *ops):
    out = subprocess.run([NODE, PEER, service.rpc, shm_dir, *ops], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def test_ts_and_python_dummies_read_each_others_objects(make_client, service, shm_dir, key):
    client = make_client(direct_puts=False)  # the real client's own path is counted below
    sizes = [1, 4096, 300000, 5 << 20]
    # TS writes, Python reads (get, and get_into a lease: zero copy)
    ts(service, shm_dir, *[f"put:{key}-ts-{n}:{n}:3" for n in sizes])
    for n in sizes:
        assert client.get(f"{key}-ts-{n}") == pattern(n, 3)
        with client.alloc_buffer(n) as lease:
            before = client.stats()
            assert client.get_into(f"{key}-ts-{n}", lease.ptr, n) == n
            after = client.stats()
            assert bytes(lease.buffer) == pattern(n, 3)
            # the get before told where the bytes lie: a small value is copied here from the
            # holder's memory (local_reads), a large one written into the lease by the real client
            local = after["local_reads"]["hits"] - before["local_reads"]["hits"]
            assert local == (1 if n <= LOCAL_READ_MAX else 0)
            assert after["zero_copy_bytes_get"] - before["zero_copy_bytes_get"] == (0 if local else n)
            assert after["staged_bytes_get"] == before["staged_bytes_get"]
    # Python writes from a lease (zero copy), TS reads
    for n in sizes:
        with client.alloc_buffer(n) as lease:
            lease.buffer[:] = pattern(n, 5)
            before = client.stats()
            assert client.put_from(f"{key}-py-{n}", lease.ptr, n) == 0
            after = client.stats()
            assert after["zero_copy_bytes_put"] - before["zero_copy_bytes_put"] == n
            assert after["staged_bytes_put"] == before["staged_bytes_put"]
    got = ts(service, shm_dir, *[f"get:{key}-py-{n}" for n in sizes])
    assert [(g["size"], g["sha256"]) for g in got] == [(n, hashlib.sha256(pattern(n, 5)).hexdigest()) for n in sizes]


def test_a_slice_of_a_lease_and_a_numpy_view_of_one_are_zero_copy(make_client, key):
    client = make_client(direct_reads=False)  # the real client's own path is counted below
    with client.alloc_buffer(1 << 20) as lease:
        arr = np.frombuffer(lease.buffer, dtype=np.uint8)
        arr[:] = np.frombuffer(pattern(1 << 20, 9), dtype=np.uint8)
        before = client.stats()
        assert client.put(key, arr[4096:8192]) == 0
        assert client.batch_put_from([key + "-b"], [lease.buffer[100:200]], [100]) == [0]
        out = arr[8192:12288]
        assert client.get_into(key, out) == 4096
        after = client.stats()
        assert after["staged_bytes_put"] == before["staged_bytes_put"]
        assert after["zero_copy_bytes_put"] - before["zero_copy_bytes_put"] == 4196
        assert after["zero_copy_bytes_get"] - before["zero_copy_bytes_get"] == 4096
        assert bytes(out) == pattern(1 << 20, 9)[4096:8192]
        del arr, out
    assert client.get(key + "-b") == pattern(1 << 20, 9)[100:200]


def test_plain_bytes_are_staged_once(make_client, key):
    client = make_client(direct_reads=False)  # the real client's own path is counted below
    before = client.stats()
    v = pattern(200000, 1)
    assert client.put(key, v) == 0
    assert client.get(key) == v
    after = client.stats()
    assert after["staged_bytes_put"] - before["staged_bytes_put"] == len(v)
    assert after["staged_bytes_get"] - before["staged_bytes_get"] == len(v)
    assert after["pool"]["leases"] == 0


def test_overflow_region_is_registered_then_unmapped_and_deleted(make_client, service, shm_dir, key):
    c = make_client(buffer_size=1 << 20)
    primary = c._pool.primary.name
    with c.alloc_buffer(3 << 20) as lease:
        assert lease.overflow
        name = lease.region.name
        assert os.path.exists(os.path.join(shm_dir, name))
        lease.buffer[:] = pattern(3 << 20, 2)
        assert c.put_from(key, lease.ptr, lease.size) == 0
        assert name in service.maps()  # the real client mapped it
    assert not os.path.exists(os.path.join(shm_dir, name))
    assert name not in service.maps()  # unregistered: the real client unmapped it
    assert primary in service.maps()
    assert c.get(key) == pattern(3 << 20, 2)
