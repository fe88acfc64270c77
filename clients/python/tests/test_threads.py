"""One DummyClient shared by many threads: calls multiplexed on one connection, replies matched
to their callers, bit-exact."""
import hashlib

from in_threads import in_threads

from kvcache_store import DummyClient


def value(t, i, n):
    seed = hashlib.sha256(f"{t}-{i}".encode()).digest()
    return (seed * (n // 32 + 1))[:n]


def test_many_threads_share_one_connection(make_client, key):
    c: DummyClient = make_client(raise_errors=True)
    peak = [0]

    def worker(t):
        for i in range(60):
            n = (1, 4096, 70000, 300000)[i % 4]
            k = f"{key}-{t}-{i}"
            c.put(k, value(t, i, n))
            peak[0] = max(peak[0], c._conn.channel.in_flight())
            assert c.get(k) == value(t, i, n)
            if i % 10 == 0:
                assert c.batch_is_exist([k, k + "-no"]) == [1, 0]
                out = bytearray(n)
                assert c.get_into(k, out) == n and bytes(out) == value(t, i, n)

    assert in_threads(worker, [(t,) for t in range(16)]) == []
    assert c.stats()["pool"]["leases"] == 0
    assert c._conn.channel.in_flight() == 0
