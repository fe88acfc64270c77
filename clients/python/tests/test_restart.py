"""The real client stopped, killed and restarted under a dummy client: calls in flight fail with
UnavailableError (none hang), later calls reconnect and register the regions again; calls past
their deadline fail with DeadlineExceededError and their staging memory is kept until the late
reply comes."""
import os
import signal
import tempfile
import time
import threading

import pytest

from cluster import Master, StoreService, free_port
from kvcache_store import DeadlineExceededError, DummyClient, ReplicateConfig, UnavailableError


@pytest.fixture
def own_master():
    # a killed store service stays listed at its master until the client TTL: keep that from
    # the other tests' placements
    m = Master()
    yield m
    m.stop()


@pytest.fixture
def own_service(own_master):
    """A store service of this test only, on a port picked here (a restart reuses it)."""
    master = own_master
    d = tempfile.mkdtemp(prefix="kvstore-shm-restart-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    port = free_port()
    holder = {"svc": StoreService(master, d, rpc_port=port), "dir": d, "port": port}
    yield holder
    svc = holder["svc"]
    if svc.proc.poll() is None:
        os.kill(svc.pid, signal.SIGCONT)
    svc.stop()
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    os.rmdir(d)


def count_sends(client):
    """A semaphore released after each request the client's connection sends."""
    ch = client._conn.channel
    sent = threading.Semaphore(0)
    original = ch._send

    def send(*args):
        original(*args)
        sent.release()

    ch._send = send
    return sent


def test_in_flight_calls_fail_and_later_calls_reconnect_after_a_restart(own_service, key):
    svc = own_service["svc"]
    c = DummyClient(raise_errors=True)
    # puts through the real client: a put written here would map the service's memory, and the
    # reads below (of a stopped service's memory, which stays readable) would not need it
    c.setup(address=svc.rpc, shm_dir=own_service["dir"], buffer_size=8 << 20, timeout=60, direct_puts=False)
    try:
        assert c.put(key, b"before") == 0
        first_instance = c.instance_id
        os.kill(svc.pid, signal.SIGSTOP)  # requests now wait in the socket: in flight
        sent = count_sends(c)
        errors = []

        def call():
            try:
                c.get(key, timeout=60)
                errors.append(None)
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=call) for _ in range(4)]
        for t in threads:
            t.start()
        for _ in threads:
            assert sent.acquire(timeout=30)
        assert c._conn.channel.in_flight() == 4
        svc.kill(signal.SIGKILL)
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads), "a call hung after the real client died"
        assert len(errors) == 4
        assert all(isinstance(e, UnavailableError) and not isinstance(e, DeadlineExceededError) for e in errors), errors

        fresh = own_service["svc"] = StoreService(svc._master, own_service["dir"], rpc_port=own_service["port"])
        # the master still lists the dead segment until its client TTL ends: place on the new one
        here = ReplicateConfig(preferred_segment=fresh.segments.split("(")[0])
        # the next call reconnects (same port, same socket path) and registers the region again
        with c.alloc_buffer(1 << 20) as lease:
            lease.buffer[:4] = b"after"[:4]
            assert c.put_from(key + "-after", lease.ptr, lease.size, here) == 0
        assert c.get(key + "-after")[:4] == b"afte"
        assert c.instance_id != first_instance
        assert c.stats()["reconnects"] == 1
    finally:
        c.close()


def test_a_call_past_its_deadline_raises_and_keeps_its_staging_lease_until_the_reply(own_service, key):
    svc = own_service["svc"]
    c = DummyClient(raise_errors=True)
    c.setup(address=svc.rpc, shm_dir=own_service["dir"], buffer_size=8 << 20)
    try:
        here = ReplicateConfig(preferred_segment=svc.segments.split("(")[0])
        os.kill(svc.pid, signal.SIGSTOP)
        with pytest.raises(DeadlineExceededError, match="deadline"):
            c.put(key, os.urandom(1 << 20), here, timeout=0.2)
        # the real client may still read the staged value: the lease stays out of the pool
        assert c.stats()["pool"]["leases"] == 1
        os.kill(svc.pid, signal.SIGCONT)
        until = time.monotonic() + 30
        while c.stats()["pool"]["leases"] != 0 and time.monotonic() < until:
            c.health_check()  # each call reads the replies that came before its own (the real client answers it)
        assert c.stats()["pool"]["leases"] == 0
        assert len(c.get(key)) == 1 << 20
    finally:
        c.close()
