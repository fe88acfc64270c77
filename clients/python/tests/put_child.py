"""A dummy client process for test_kill.py: puts large values from a lease in a loop, printing
each key before its put, until it is killed. Arguments: ADDRESS SHM_DIR KEY SIZE."""
import sys

import numpy as np

from kvcache_store import DummyClient

address, shm_dir, key, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = DummyClient(raise_errors=True)
c.setup(address=address, shm_dir=shm_dir, buffer_size=size + (1 << 20))
lease = c.alloc_buffer(size)
np.frombuffer(lease.buffer, dtype=np.uint8)[:] = np.arange(size, dtype=np.uint64).astype(np.uint8) ^ 0x5A
print(f"region {lease.region.name}", flush=True)
i = 0
while True:
    print(f"putting {key}-{i}", flush=True)
    c.put_from(f"{key}-{i}", lease.ptr, size)
    i += 1
