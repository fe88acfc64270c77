"""A dummy client process for test_local_reads.py, run as another uid: puts 64 KiB under KEY on
SEGMENT through the real client at SOCKET, reads it back three times and prints one JSON line:
whether every read was bit-exact, and its local-read counters. Arguments: SOCKET SHM_DIR KEY SEGMENT."""
import json
import os
import sys

from kvcache_store import DummyClient, ReplicateConfig

socket_path, shm_dir, key, segment = sys.argv[1:5]
value = os.urandom(64 * 1024)
c = DummyClient(raise_errors=True)
c.setup(socket_path=socket_path, shm_dir=shm_dir, buffer_size=8 << 20)
try:
    c.put(key, value, ReplicateConfig(preferred_segment=segment))
    target = bytearray(len(value))
    exact = all(c.get_into(key, target) == len(value) and target == value for _ in range(3))
    print(json.dumps({"exact": exact, **c.local_read_stats}), flush=True)
finally:
    c.close()
