"""A dummy client reading same-host memory itself while the real client's read lease holds
(kvcache_store/local_reads.py, docs/client.md "Dummy clients"), against real processes: a
repeated read is served here bit-exact with no message to the real client (its /segments counts
the calls it got); once the lease ended and another client removed the object the old bytes are
never returned; a restarted real client's dummies use nothing learned from the old one; a
corrupted byte under a cached location is caught by its CRC-32C (checksums on) and the read goes
the usual way; a dummy whose uid the serving engine refuses fds reads through the real client.
Where a test follows what the real client said, its dummy reads first reads through the real
client (direct_reads=False); first reads looked up at the master by the dummy itself are
test_direct_reads.py's."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

from cluster import STRANGER_UID, Master, StoreService, cannot_switch_uid, free_port
from kvcache_store import DummyClient, ObjectNotFoundError, ReplicateConfig, StoreError
from kvcache_store import errors as E

PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: the store services these tests start unmount at once when stopped
QUICK_STOP = ["--shutdown_grace_seconds=0"]


def remove_once_unleased(client: DummyClient, key: str) -> None:
    """Removes `key` once no read lease holds it. The master refuses while one does and nothing
    announces the lease's end: the attempt is repeated."""
    while True:
        r = client.remove(key)
        if r != E.OBJECT_HAS_LEASE:
            assert r == 0, r
            return
        time.sleep(0.1)


def test_a_repeated_read_is_served_here_bit_exact_with_no_message(make_client, service, key):
    c = make_client(raise_errors=True)
    for i, size in enumerate((4096, 64 * 1024 + 1, 700_000)):
        k = f"{key}-{i}"
        value = os.urandom(size)
        c.put(k, value)
        with c.alloc_buffer(size) as lease:
            assert c.get_into(k, lease.ptr, size) == size  # through the real client, which says where the bytes are
            calls, hits = service.dummy_calls(), c.local_read_stats["hits"]
            lease.buffer[:] = b"\0" * size
            assert c.get_into(k, lease.ptr, size) == size and bytes(lease.buffer) == value  # a pointer into shared memory
            plain = bytearray(size + 3)
            assert c.get_into(k, plain) == size and plain[:size] == value  # memory outside the shared regions
            arr = np.zeros(size, dtype=np.uint8)
            assert c.get_into(k, arr) == size and arr.tobytes() == value
            assert c.get(k) == value
            assert c.batch_get_into([k], [lease.ptr], [size]) == [size]
            assert c.local_read_stats["hits"] == hits + 5
            assert service.dummy_calls() == calls
    assert c.local_read_stats["fallbacks"] == 0
    assert c.stats()["local_reads"] == c.local_read_stats


def test_the_old_bytes_never_come_back_once_the_lease_ended_and_the_object_was_removed(make_client, key):
    c = make_client(raise_errors=True)
    other = make_client(raise_errors=False)
    old = os.urandom(8192)
    c.put(key, old)
    assert c.get(key) == old
    hits = c.local_read_stats["hits"]
    assert c.get(key) == old
    assert c.local_read_stats["hits"] == hits + 1  # the location was known and used
    remove_once_unleased(other, key)
    with pytest.raises(ObjectNotFoundError):
        c.get_into(key, bytearray(8192))
    with pytest.raises(ObjectNotFoundError):
        c.get(key)
    fresh = os.urandom(8192)
    other.put(key, fresh)
    assert c.get(key) == fresh and c.get(key) == fresh


def test_a_restarted_real_client_is_not_trusted_with_what_the_old_one_said(service, key):
    master = Master()  # a killed store service stays listed at its master for a while: not the session's
    d = tempfile.mkdtemp(prefix="kvstore-shm-lr-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    port = free_port()
    holder = StoreService(master, d, extra=QUICK_STOP)  # keeps its memory across the restart
    first = StoreService(master, d, rpc_port=port, extra=QUICK_STOP)
    c = DummyClient(raise_errors=True)
    second = None
    try:
        c.setup(address=first.rpc, shm_dir=d, buffer_size=8 << 20, timeout=60, direct_reads=False)
        in_holder, in_first = os.urandom(4096), os.urandom(4096)
        c.put(f"{key}-h", in_holder, ReplicateConfig(preferred_segment=holder.segment))
        c.put(f"{key}-f", in_first, ReplicateConfig(preferred_segment=first.segment))
        for k in (f"{key}-h", f"{key}-f"):
            c.get(k)
            c.get(k)
        hits = c.local_read_stats["hits"]
        assert hits == 2
        first.kill()
        second = StoreService(master, d, rpc_port=port, extra=QUICK_STOP)
        if c.health_check() != 0:  # the call that finds the old connection dead fails; the next one reconnects
            assert c.health_check() == 0
        # the holder kept the object and the lease the first instance took still runs: the location
        # is still right, but it came from another instance: asked again
        calls = second.dummy_calls()
        assert c.get(f"{key}-h") == in_holder
        assert c.local_read_stats["hits"] == hits
        assert second.dummy_calls() > calls
        with pytest.raises(StoreError):  # the first instance's memory (still mapped here) is never read
            c.get(f"{key}-f")
        assert c.local_read_stats["hits"] == hits
    finally:
        c.close()
        for s in (second, first, holder):
            if s is not None:
                s.stop()
        master.stop()
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.skipif(os.getuid() != 0, reason="needs root: writes into the store service's memory through /proc/<pid>/mem")
def test_a_corrupted_byte_under_a_cached_location_is_caught_by_its_crc(master, shm_dir, key):
    svc = StoreService(master, shm_dir, segment="64MB", extra=QUICK_STOP, env={**os.environ, "MC_STORE_CHECKSUM": "1"})
    c = DummyClient(raise_errors=False)
    usual = DummyClient(raise_errors=False)
    try:
        assert c.setup(address=svc.rpc, shm_dir=shm_dir, buffer_size=8 << 20, direct_reads=False) == 0
        assert usual.setup(address=svc.rpc, shm_dir=shm_dir, buffer_size=8 << 20, local_reads=False) == 0
        value = os.urandom(16384)
        assert c.put(key, value, ReplicateConfig(preferred_segment=svc.segment)) == 0
        assert c.get_into(key, bytearray(16384)) == 16384  # the real client says where the bytes are
        handle = c.query_by_regex(f"^{key}$")[key][0]["handles"][0]
        with open(f"/proc/{svc.pid}/mem", "r+b", buffering=0) as mem:  # one byte flipped, as a stray write would
            mem.seek(handle["buffer"] + 100)
            mem.write(bytes([value[100] ^ 0xFF]))
        before = c.local_read_stats
        expected = usual.get_into(key, bytearray(16384))  # the usual way: every replica fails its CRC check
        assert expected < 0
        assert c.get_into(key, bytearray(16384)) == expected
        assert c.get(key) == b""
        after = c.local_read_stats
        assert (after["hits"], after["fallbacks"]) == (before["hits"], before["fallbacks"] + 1)
    finally:
        c.close()
        usual.close()
        svc.stop()


@pytest.mark.skipif(bool(cannot_switch_uid()), reason=f"needs {cannot_switch_uid()}")
def test_a_dummy_whose_uid_an_engine_refuses_fds_reads_through_the_real_client(master, service, key):
    d = tempfile.mkdtemp(prefix="kvstore-shm-lr-uid-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    os.chmod(d, 0o1777)
    # its real client admits the uid (and gives it fds); the session's service, which holds the object, does not
    real = StoreService(master, d, extra=[f"--peer_uids={STRANGER_UID}"] + QUICK_STOP)
    try:
        os.chmod(real.socket, 0o777)  # as a permissive umask or shared volume leaves it
        secret = os.path.join(d, "secret")
        shutil.copyfile(os.environ["STORE_CLUSTER_SECRET_FILE"], secret)
        os.chmod(secret, 0o644)
        out = subprocess.run(
            ["setpriv", f"--reuid={STRANGER_UID}", f"--regid={STRANGER_UID}", "--clear-groups", sys.executable, os.path.join(PKG, "tests", "local_reader_child.py"), real.socket, d, key, service.segment],
            env={**os.environ, "PYTHONPATH": PKG, "STORE_CLUSTER_SECRET_FILE": secret, "HOME": d},
            capture_output=True,
            text=True,
            timeout=60,
        )
        r = json.loads(out.stdout.strip().splitlines()[-1]) if out.stdout.strip() else {"stderr": out.stderr}
        assert r.get("exact") is True and r["hits"] == 0, r
        assert r["fallbacks"] >= 1  # it tried the holder's memory and was refused
        service.wait_for(re.compile(rf"same-host peer pid \d+ uid {STRANGER_UID} refused memory fds"))
    finally:
        real.stop()
        shutil.rmtree(d, ignore_errors=True)
