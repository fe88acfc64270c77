"""A dummy client process killed (SIGKILL) during a large put_from: every key it wrote is either
absent or complete and bit-exact, and the store service no longer maps its region."""
import os
import re
import signal
import sys
import tempfile

import numpy as np
import pytest

from cluster import Proc, StoreService
from kvcache_store import ObjectNotFoundError

SIZE = 48 << 20


@pytest.fixture
def kill_service(master):
    d = tempfile.mkdtemp(prefix="kvstore-shm-kill-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    svc = StoreService(master, d, segment="1GB")
    yield svc
    svc.stop()
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    os.rmdir(d)


def test_dummy_killed_mid_put(kill_service, make_client, key):
    svc = kill_service
    child = Proc("put_child", [sys.executable, os.path.join(os.path.dirname(__file__), "put_child.py"), svc.rpc, svc.shm_dir, key, str(SIZE)])
    region = child.wait_for(re.compile(r"region (\S+)")).group(1)
    child.wait_for(re.compile(rf"putting {re.escape(key)}-2\n"))
    assert region in svc.maps()
    child.kill(signal.SIGKILL)
    # the service logs this once the connection's calls have finished and its regions are unmapped
    svc.wait_for(re.compile(r"dummy client disconnected: \"python pid %d\".*its regions are released" % child.pid))
    assert region not in svc.maps()

    written = int(re.findall(rf"putting {re.escape(key)}-(\d+)", child.output())[-1])
    want = (np.arange(SIZE, dtype=np.uint64).astype(np.uint8) ^ 0x5A).tobytes()
    c = make_client(raise_errors=True, address=svc.rpc, shm_dir=svc.shm_dir)
    complete = 0
    for i in range(written + 1):
        try:
            got = c.get(f"{key}-{i}")
        except ObjectNotFoundError:
            continue
        assert got == want, f"{key}-{i} is readable but not the value put"
        complete += 1
    assert complete >= 2  # keys 0 and 1 were done before the kill
    # The killed process could not delete its region file; nobody holds its lock any more, so the
    # real client deletes it after releasing the region (at once, or a moment later when the
    # killed process was still closing its descriptors).
    path = os.path.join(svc.shm_dir, region)
    if os.path.exists(path):
        svc.wait_for(re.compile(r"deleted %s: its dummy client died" % re.escape(path)))
    assert not os.path.exists(path)
