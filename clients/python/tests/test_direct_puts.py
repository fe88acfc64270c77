"""A dummy client's puts into same-host memory written by the dummy itself
(kvcache_store/direct_puts.py, docs/client.md "Puts a dummy writes itself"), against real
processes: stored bit-exact with no message to the real client (its /segments counts the calls it
got) in every put form, with each slice's CRC-32C recorded when the real client records them; an
existing key is refused as through the real client; a placement on another host (a store service
at 127.0.0.2), a value above 64 KiB, a real client writing the file tier and the switch turned off
go through the real client. Direct puts are on by default; these clients also say so."""
import os
import tempfile

import google_crc32c
import numpy as np

from cluster import Master, StoreService
from kvcache_store import DummyClient, ObjectExistsError, ReplicateConfig
from kvcache_store import errors as E
from kvcache_store._proto import store_master_pb2 as mpb
from kvcache_store.direct_puts import MAX_BYTES
from kvcache_store.direct_reads import _GRL

import pytest

QUICK_STOP = ["--shutdown_grace_seconds=0"]


def recorded_checksums(c: DummyClient, key: str) -> list:
    """The CRC-32Cs the master recorded for `key` (asked on the dummy's own master channel)."""
    ch = c._direct.master_channel()
    payload = ch.call("GetReplicaList", _GRL, mpb.GetReplicaListRequest(key=key).SerializeToString(), 1e12)
    res = mpb.GetReplicaListResponse.FromString(payload)
    assert res.status_code == 0
    return list(res.slice_checksums)


def test_puts_are_written_here_bit_exact_with_no_message(make_client, service, key):
    c = make_client(raise_errors=True, direct_puts=True)
    reader = make_client(raise_errors=True, local_reads=False)  # reads through the real client
    values = {}
    calls, before = service.dummy_calls(), c.direct_put_stats
    for i, size in enumerate((1, 4096, 65000, MAX_BYTES)):
        v = os.urandom(size)
        values[f"{key}-{i}-bytes"] = v
        assert c.put(f"{key}-{i}-bytes", v) == 0
        arr = np.frombuffer(v, dtype=np.uint8).copy()
        values[f"{key}-{i}-numpy"] = v
        assert c.put(f"{key}-{i}-numpy", arr) == 0
        with c.alloc_buffer(size) as lease:
            lease.buffer[:] = v
            values[f"{key}-{i}-ptr"] = v
            assert c.put_from(f"{key}-{i}-ptr", lease.ptr, size) == 0
    parts = [os.urandom(1000), os.urandom(60_000), os.urandom(5)]
    values[f"{key}-slices"] = b"".join(parts)
    assert c.put(f"{key}-slices", parts) == 0
    batch = {f"{key}-batch-{j}": os.urandom(4096) for j in range(32)}
    values.update(batch)
    assert c.batch_put(list(batch), list(batch.values())) == [0] * 32
    with c.alloc_buffer(32 * 4096) as lease:
        keys = [f"{key}-from-{j}" for j in range(32)]
        lease.buffer[:] = os.urandom(32 * 4096)
        for j, k in enumerate(keys):
            values[k] = bytes(lease.buffer[j * 4096:(j + 1) * 4096])
        assert c.batch_put_from(keys, [lease.ptr + j * 4096 for j in range(32)], [4096] * 32) == [0] * 32
    after = c.direct_put_stats
    assert after["direct_puts"] - before["direct_puts"] == len(values)
    assert after["direct_put_fallbacks"] == before["direct_put_fallbacks"]
    assert service.dummy_calls() == calls
    for k, v in values.items():
        assert reader.get(k) == v, k


def test_checksums_are_recorded_as_the_real_client_records_them(master, shm_dir, key):
    svc = StoreService(master, shm_dir, segment="64MB", extra=QUICK_STOP, env={**os.environ, "MC_STORE_CHECKSUM": "1"})
    c = DummyClient(raise_errors=True)
    try:
        c.setup(address=svc.rpc, shm_dir=shm_dir, buffer_size=16 << 20, direct_puts=True)
        cfg = ReplicateConfig(preferred_segment=svc.segment)
        parts = [os.urandom(4096), os.urandom(50_000)]
        assert c.put(f"{key}-one", parts, cfg) == 0
        assert c.batch_put([f"{key}-b0", f"{key}-b1"], [parts[0], parts[1]], cfg) == [0, 0]
        assert c.direct_put_stats["direct_puts"] == 3
        assert recorded_checksums(c, f"{key}-one") == [google_crc32c.value(p) for p in parts]
        assert recorded_checksums(c, f"{key}-b0") == [google_crc32c.value(parts[0])]
        assert recorded_checksums(c, f"{key}-b1") == [google_crc32c.value(parts[1])]
        assert c.get(f"{key}-one") == b"".join(parts)
    finally:
        c.close()
        svc.stop()


def test_an_existing_key_is_refused_as_through_the_real_client(make_client, key):
    c = make_client(direct_puts=True)
    rc = make_client(raise_errors=True, direct_puts=True)
    v = os.urandom(4096)
    assert c.put(key, v) == 0
    assert c.put(key, os.urandom(4096)) == 0  # Mooncake's put: an existing key counts as success
    with pytest.raises(ObjectExistsError):
        rc.put(key, os.urandom(10))
    assert c.batch_put([key, f"{key}-new"], [os.urandom(10), v]) == [0, 0]
    assert rc.batch_put([key, f"{key}-new2"], [os.urandom(10), v]) == [E.OBJECT_ALREADY_EXISTS, 0]
    assert c.get(key) == v  # the first value stays


def test_what_cannot_be_written_here_goes_through_the_real_client(make_client, master, service, shm_dir, key):
    far = StoreService(master, shm_dir, segment="64MB", extra=["--host=127.0.0.2", "--local_hostname=127.0.0.2"] + QUICK_STOP)
    try:
        c = make_client(raise_errors=True, direct_puts=True)
        reader = make_client(raise_errors=True, local_reads=False)
        v = os.urandom(MAX_BYTES)
        cfg = ReplicateConfig(preferred_segment=far.segment)
        calls, before = service.dummy_calls(), c.direct_put_stats
        assert c.put(f"{key}-far-1", v, cfg) == 0  # tried here: placed on "another host", revoked
        assert c.put(f"{key}-far-2", v, cfg) == 0  # not tried here for a while
        assert c.batch_put([f"{key}-far-3"], [v], cfg) == [0]
        big = os.urandom(MAX_BYTES + 1)
        assert c.put(f"{key}-big", big) == 0  # above the bound: through the real client
        after = c.direct_put_stats
        assert after["direct_put_fallbacks"] - before["direct_put_fallbacks"] == 1
        assert after["direct_puts"] == before["direct_puts"]
        assert service.dummy_calls() == calls + 4
        for k in (f"{key}-far-1", f"{key}-far-2", f"{key}-far-3"):
            assert reader.get(k) == v
        assert reader.get(f"{key}-big") == big
        assert c.put(f"{key}-near", v, ReplicateConfig(preferred_segment=service.segment)) == 0  # another preference: still written here
        assert c.direct_put_stats["direct_puts"] == after["direct_puts"] + 1
    finally:
        far.stop()


def test_on_by_default_and_off_with_the_environment(make_client, service, key):
    c = make_client(raise_errors=True, env={k: v for k, v in os.environ.items() if k != "STORE_DUMMY_DIRECT_PUTS"})
    calls = service.dummy_calls()  # after its setup's calls
    assert c.put(key, os.urandom(4096)) == 0
    assert service.dummy_calls() == calls
    assert c.direct_put_stats["direct_puts"] == 1 and c.direct_put_stats["direct_put_bytes"] == 4096
    off = make_client(raise_errors=True, env={**os.environ, "STORE_DUMMY_DIRECT_PUTS": "0"})
    calls = service.dummy_calls()
    assert off.put(f"{key}-off", os.urandom(4096)) == 0
    assert service.dummy_calls() == calls + 1
    assert off.direct_put_stats == {"direct_puts": 0, "direct_put_bytes": 0, "direct_put_fallbacks": 0}


def test_a_real_client_writing_the_file_tier_gets_every_put():
    with tempfile.TemporaryDirectory(prefix="kvstore-dp-files-") as root, tempfile.TemporaryDirectory(prefix="kvstore-dp-shm-", dir="/dev/shm") as shm:
        master = Master(extra=[f"--root_fs_dir={root}"])
        svc = StoreService(master, shm, segment="64MB", extra=QUICK_STOP)
        c = DummyClient(raise_errors=True)
        try:
            c.setup(address=svc.rpc, shm_dir=shm, buffer_size=8 << 20, direct_puts=True)
            calls = svc.dummy_calls()
            v = os.urandom(4096)
            assert c.put("dp-file", v) == 0
            assert svc.dummy_calls() == calls + 1
            assert c.direct_put_stats == {"direct_puts": 0, "direct_put_bytes": 0, "direct_put_fallbacks": 0}
            assert c.get("dp-file") == v
        finally:
            c.close()
            svc.stop()
            master.stop()
