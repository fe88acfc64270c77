"""DummyClient against a real store_service and store_master: every method, values of several
sizes and types bit-exact, batch forms with per-key failures, return codes and typed errors."""
import ctypes
import os

import numpy as np
import pytest

from kvcache_store import (
    DummyClient,
    InvalidParamsError,
    ObjectExistsError,
    ObjectNotFoundError,
    ReplicateConfig,
    StoreError,
    UnauthenticatedError,
    UnavailableError,
)
from kvcache_store import errors as E

SIZES = [1, 100, 4096, 65536, 65537, 1 << 20, 8 << 20]


def data(n, seed=0):
    return np.random.default_rng(seed + n).integers(0, 256, n, dtype=np.uint8).tobytes()


@pytest.mark.parametrize("n", SIZES)
def test_put_get_bytes_bit_exact(client, key, n):
    v = data(n)
    assert client.put(key, v) == 0
    assert client.get(key) == v
    assert client.get_size(key) == n
    assert client.is_exist(key) == 1


@pytest.mark.parametrize("n", [1, 4096, 1 << 20, 8 << 20])
def test_numpy_values_and_targets(client, key, n):
    src = np.frombuffer(data(n, 1), dtype=np.uint8).copy()
    assert client.put(key, src) == 0
    out = np.zeros(n, dtype=np.uint8)
    assert client.get_into(key, out) == n
    assert np.array_equal(out, src)
    # a float32 array goes as its bytes
    f = np.arange(1024, dtype=np.float32)
    assert client.put(key + "-f", f) == 0
    back = np.frombuffer(client.get(key + "-f"), dtype=np.float32)
    assert np.array_equal(back, f)


@pytest.mark.parametrize("n", [8, 4096, 100000, 3 << 20])
def test_raw_pointers_with_sizes(client, key, n):
    src = (ctypes.c_ubyte * n).from_buffer_copy(data(n, 2))
    dst = (ctypes.c_ubyte * n)()
    assert client.register_buffer(ctypes.addressof(src), n) == 0
    assert client.put_from(key, ctypes.addressof(src), n) == 0
    assert client.get_into(key, ctypes.addressof(dst), n) == n
    assert bytes(dst) == bytes(src)
    assert client.unregister_buffer(ctypes.addressof(src)) == 0


def test_bytearray_memoryview_and_parts(client, key):
    v = bytearray(data(5000, 3))
    assert client.put(key, memoryview(v)[100:4100]) == 0
    assert client.get(key) == bytes(v[100:4100])
    assert client.put(key + "-parts", [b"abc", bytearray(b"def"), memoryview(b"ghi")]) == 0
    assert client.get(key + "-parts") == b"abcdefghi"


def test_torch_tensors(make_client, key):
    torch = pytest.importorskip("torch", reason="torch is not installed: the tensor path is tested where it is")
    client = make_client(direct_puts=False)  # the real client's zero-copy path is counted below
    t = torch.arange(100000, dtype=torch.float16)
    assert client.put(key, t) == 0
    out = torch.zeros_like(t)
    assert client.get_into(key, out) == t.numel() * 2
    assert torch.equal(out, t)
    assert client.put_from(key + "-ptr", t.data_ptr(), t.numel() * t.element_size()) == 0
    assert client.get(key + "-ptr") == t.numpy().tobytes()
    # a tensor over lease memory is passed in place
    with client.alloc_buffer(4096) as lease:
        lt = torch.frombuffer(lease.buffer, dtype=torch.int32)
        lt[:] = torch.arange(1024, dtype=torch.int32)
        before = client.stats()["zero_copy_bytes_put"]
        assert client.put(key + "-lease", lt) == 0
        assert client.stats()["zero_copy_bytes_put"] - before == 4096
        del lt
    assert client.get(key + "-lease") == torch.arange(1024, dtype=torch.int32).numpy().tobytes()
    r = make_client(raise_errors=True)
    with pytest.raises(InvalidParamsError, match="not contiguous"):
        r.put(key + "-t", torch.zeros(4, 4).t())


def test_non_contiguous_and_read_only_targets_are_refused(rclient, key):
    a = np.zeros((8, 8), dtype=np.uint8)
    with pytest.raises(InvalidParamsError, match="not contiguous"):
        rclient.put(key, a[:, ::2])
    rclient.put(key, b"x" * 10)
    with pytest.raises(InvalidParamsError, match="read-only"):
        rclient.get_into(key, b"\0" * 10)


def test_mooncake_return_conventions(client, key):
    assert client.get(key) == b""  # miss
    assert client.get_size(key) == E.OBJECT_NOT_FOUND
    assert client.is_exist(key) == 0
    assert client.remove(key) == E.OBJECT_NOT_FOUND
    assert client.put(key, b"") == E.INVALID_PARAMS
    assert client.put(key, b"one") == 0
    assert client.put(key, b"two") == 0  # an existing key counts as stored, as in Mooncake
    assert client.get(key) == b"one"
    buf = bytearray(2)
    assert client.get_into(key, buf) == E.INVALID_PARAMS  # too small
    assert client.upsert(key, b"three") == E.OBJECT_HAS_LEASE  # read just now: leased
    assert client.put(key + "-u", b"one") == 0
    assert client.upsert(key + "-u", b"three") == 0
    assert client.get(key + "-u") == b"three"
    assert client.put_from(key, 0, 10) == E.INVALID_PARAMS
    assert client.get_into(key + "-none", bytearray(16)) == E.OBJECT_NOT_FOUND


def test_typed_errors_with_raise_errors(rclient, key):
    with pytest.raises(ObjectNotFoundError) as ei:
        rclient.get(key)
    assert ei.value.code == E.OBJECT_NOT_FOUND and ei.value.code_name == "OBJECT_NOT_FOUND"
    with pytest.raises(ObjectNotFoundError):
        rclient.get_size(key)
    rclient.put(key, b"v")
    with pytest.raises(ObjectExistsError):
        rclient.put(key, b"w")
    with pytest.raises(InvalidParamsError):
        rclient.put(key + "-e", b"")
    with pytest.raises(InvalidParamsError):
        rclient.put_from(key, "not a buffer", 3)
    with pytest.raises(StoreError) as ei:
        rclient.remove_by_regex("^x", force=True)
    assert ei.value.code == E.NOT_IMPLEMENTED
    assert isinstance(ei.value, StoreError)


def test_batches_with_per_key_failures(client, key):
    keys = [f"{key}-{i}" for i in range(6)]
    vals = [data(n, i) for i, n in enumerate([10, 4096, 70000, 1, 5, 1 << 20])]
    assert client.batch_put(keys[:4], vals[:4]) == [0, 0, 0, 0]
    # key 3 exists: success by Mooncake's convention; an empty value fails alone
    arrs = [np.frombuffer(v, dtype=np.uint8) for v in vals]
    res = client.batch_put_from(keys[3:], arrs[3:], [len(v) for v in vals[3:]])
    assert res == [0, 0, 0]
    assert client.batch_get(keys + [key + "-missing"]) == vals + [b""]
    assert client.get_batch(keys[:2]) == vals[:2]
    outs = [bytearray(len(v)) for v in vals] + [bytearray(10)]
    got = client.batch_get_into(keys + [key + "-missing"], outs, [len(o) for o in outs])
    assert got[:6] == [len(v) for v in vals] and got[6] == E.OBJECT_NOT_FOUND
    assert [bytes(o) for o in outs[:6]] == vals
    assert client.batch_is_exist(keys[:2] + [key + "-missing"]) == [1, 1, 0]
    assert client.put_batch([key + "-pb"], [b"z"]) == 0
    fresh = [f"{key}-u{i}" for i in range(2)]
    assert client.batch_upsert_from(fresh[:1], [b"new"], [3]) == [0]
    assert client.batch_upsert(fresh[1:], [b"newer"]) == [0]
    assert client.batch_get(fresh) == [b"new", b"newer"]


def test_batch_with_raise_errors_returns_per_key_codes(rclient, key):
    rclient.put(key, b"a")
    assert rclient.batch_put([key, key + "-2"], [b"b", b"c"]) == [E.OBJECT_ALREADY_EXISTS, 0]
    with pytest.raises(InvalidParamsError, match="must match"):
        rclient.batch_get_into([key], [bytearray(1), bytearray(1)], [1, 1])


def test_metadata_methods(client, rclient, key):
    for i in range(3):
        assert client.put(f"{key}-rx-{i}", b"v" * (i + 1), ReplicateConfig(replica_num=1, with_soft_pin=True)) == 0
    found = rclient.query_by_regex(f"^{key}-rx-")
    assert sorted(found) == [f"{key}-rx-{i}" for i in range(3)]
    handle = found[f"{key}-rx-2"][0]["handles"][0]
    assert found[f"{key}-rx-2"][0]["status"] == "COMPLETE" and handle["size"] == 3
    ips = rclient.batch_query_ip([])
    assert isinstance(ips, dict)
    assert rclient.batch_replica_clear([f"{key}-nothing"]) == []
    n = client.remove_by_regex(f"^{key}-rx-[01]$")
    # removal skips objects under a read lease (2 s here): retry until they are gone
    assert n in (0, 1, 2)
    assert client.health_check() == 0


def test_remove_and_remove_all_counts(make_client, key):
    c = make_client()
    c.put(key, b"1")
    assert c.remove(key) == 0
    assert c.is_exist(key) == 0
    c.put(key + "-a", b"1")
    assert c.batch_remove([key + "-a", key + "-none"]) == [0, E.OBJECT_NOT_FOUND]
    assert c.remove_all() >= 0


def test_calls_before_setup_and_after_close(make_client, key):
    c = DummyClient()
    assert c.get(key) == b""
    assert c.put(key, b"x") == E.UNAVAILABLE_IN_CURRENT_STATUS
    assert c.health_check() == 1
    c2 = make_client(raise_errors=True)
    assert c2.close() == 0
    with pytest.raises(UnavailableError, match="closed"):
        c2.get(key)


def test_setup_from_environment_and_mooncake_forms(service, shm_dir, key):
    env = {"STORE_SIDECAR_ADDRESS": service.rpc, "STORE_SHM_DIR": shm_dir, "STORE_DUMMY_BUFFER_SIZE": str(8 << 20)}
    c = DummyClient()
    # Mooncake's positional setup: the cluster arguments are ignored, local_buffer_size sizes the pool
    assert c.setup("localhost", "http://unused/metadata", 0, 16 << 20, "tcp", "", "unused:1", env=env) == 0
    assert c.put(key, b"env") == 0
    assert c.stats()["pool"]["free_bytes"] == 16 << 20
    c.close()
    d = DummyClient()
    assert d.setup_dummy(4 << 20, 4 << 20, service.rpc, shm_dir=shm_dir) == 0
    assert d.get(key) == b"env"
    assert d.stats()["pool"]["free_bytes"] == 8 << 20
    d.close()
    e = DummyClient()
    assert e.setup({"address": service.rpc, "shm_dir": shm_dir, "buffer_size": 1 << 20}) == 0
    e.close()


def test_setup_failures_are_codes_or_typed_errors(shm_dir, tmp_path):
    c = DummyClient()
    assert c.setup(address="not-an-address", shm_dir=shm_dir) == E.INVALID_PARAMS
    r = DummyClient(raise_errors=True)
    with pytest.raises(InvalidParamsError, match="STORE_SIDECAR_ADDRESS"):
        r.setup(env={}, shm_dir=shm_dir)
    # nobody listens: unavailable within the deadline, and the region file is gone again
    u = DummyClient(raise_errors=True)
    with pytest.raises(UnavailableError, match="unreachable"):
        u.setup(address="127.0.0.1:1", shm_dir=str(tmp_path), timeout=0.3)
    assert [f for f in os.listdir(tmp_path) if f.startswith("kvstore-region-")] == []


def test_get_over_tcp_when_the_socket_file_is_absent(service, shm_dir, tmp_path, key):
    # another shared directory holds no socket: TCP, and the real client cannot see our files
    c = DummyClient(raise_errors=True)
    c.setup(address=service.rpc, shm_dir=str(tmp_path), buffer_size=1 << 20)
    try:
        assert c.stats()["shared_memory"] is False
        v = data(200000, 9)
        c.put(key, v)
        assert c.get(key) == v
        out = bytearray(len(v))
        assert c.get_into(key, out) == len(v)
        assert bytes(out) == v
        assert c.batch_put([key + "-b"], [b"xy"]) == [0]
        assert c.batch_get_into([key + "-b"], [bytearray(2)], [2]) == [2]
        assert c.stats()["inline_bytes_put"] > 0
    finally:
        c.close()


def test_wrong_argument_types_are_invalid_params_not_crashes(client, rclient, key):
    assert client.get(123) == b""
    assert client.put(None, b"x") == E.INVALID_PARAMS
    assert client.is_exist(["a"]) == E.INVALID_PARAMS
    assert client.batch_put([key], [object()]) == [E.INVALID_PARAMS]
    assert client.get_into(key, "text", 4) == E.INVALID_PARAMS
    with pytest.raises(InvalidParamsError):
        rclient.get_size(42)
    with pytest.raises(InvalidParamsError):
        rclient.put(key, 3.5)


def test_a_wrong_or_missing_cluster_secret_is_a_typed_error_at_once(service, shm_dir, tmp_path):
    """The store service runs with the session's cluster secret: a DummyClient with another secret,
    or with none, is refused with UnauthenticatedError (code UNAUTHENTICATED), never retried until
    its deadline; a secret file too short is refused before connecting."""
    wrong = tmp_path / "wrong-secret"
    wrong.write_text("f" * 64 + "\n")
    r = DummyClient(raise_errors=True)
    with pytest.raises(UnauthenticatedError, match="wrong cluster secret") as ei:
        r.setup(address=service.rpc, shm_dir=shm_dir, cluster_secret_file=str(wrong), timeout=20)
    assert ei.value.code == E.UNAUTHENTICATED
    # the return-code form: the code, not an exception
    assert DummyClient().setup(address=service.rpc, shm_dir=shm_dir, cluster_secret_file=str(wrong)) == E.UNAUTHENTICATED
    # no secret at all (TCP, then the Unix socket): the service answers the first request UNAUTHENTICATED
    for kw in ({"socket_path": ""}, {}):
        n = DummyClient(raise_errors=True)
        with pytest.raises(UnauthenticatedError, match="requires the cluster secret"):
            n.setup(address=service.rpc, shm_dir=shm_dir, env={"STORE_CLUSTER_SECRET_FILE": ""}, timeout=20, **kw)
    short = tmp_path / "short-secret"
    short.write_text("x" * 31)
    with pytest.raises(InvalidParamsError, match="31 bytes; at least 32"):
        DummyClient(raise_errors=True).setup(address=service.rpc, shm_dir=shm_dir, cluster_secret_file=str(short))
