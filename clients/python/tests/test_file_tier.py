"""The file tier through a dummy client (docs/tiers.md "File tier"): a master with --root_fs_dir and a
store service whose segment is far smaller than what is put, so most objects leave memory; the
dummy client reads every one back bit-exact (get, get_into into its shared region, batch_get):
the store service's real client reads their files into the destination."""
import ctypes
import os
import re
import tempfile
import time
import urllib.request

import pytest

from cluster import Master, StoreService
from kvcache_store import DummyClient


def metric(master: Master, name: str) -> float:
    text = urllib.request.urlopen(f"http://{master.metrics}/metrics", timeout=10).read().decode()
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    assert m, f"no metric {name}"
    return float(m.group(1))


@pytest.fixture
def file_tier(tmp_path):
    root = tmp_path / "fs"
    root.mkdir()
    master = Master(extra=[f"--root_fs_dir={root}", "--cluster_id=py_tier"])
    shm = tempfile.mkdtemp(prefix="kvstore-shm-file-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    svc = StoreService(master, shm, segment="4MB")
    yield master, svc, shm
    svc.stop()
    master.stop()
    for f in os.listdir(shm):
        os.unlink(os.path.join(shm, f))
    os.rmdir(shm)


def test_dummy_reads_objects_from_the_file_tier(file_tier):
    master, svc, shm = file_tier
    c = DummyClient(raise_errors=True)
    assert c.setup(address=svc.rpc, shm_dir=shm, buffer_size=16 << 20) == 0
    try:
        values = {f"py/file/{i}": os.urandom((256 << 10) + i) for i in range(40)}
        for k, v in values.items():
            c.put(k, v)
        # Files are written after each put returned: wait until the master has indexed all of them
        # (no event reaches this process for it).
        deadline = time.monotonic() + 30
        while metric(master, "store_master_file_tier_objects") < len(values):
            assert time.monotonic() < deadline, "the files were not all reported"
            time.sleep(0.05)
        assert metric(master, "store_master_objects") < len(values)  # most left memory
        for k, v in values.items():
            assert c.get(k) == v
        keys = list(values)
        assert c.batch_get(keys) == [values[k] for k in keys]
        lease = c.alloc_buffer(len(values[keys[0]]))
        try:
            n = c.get_into(keys[0], lease.ptr, len(values[keys[0]]))
            assert n == len(values[keys[0]])
            assert ctypes.string_at(lease.ptr, n) == values[keys[0]]
        finally:
            lease.release()
    finally:
        c.close()
