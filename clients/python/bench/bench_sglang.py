"""Benchmark of the SGLang HiCache backend (not a test): SGLang's own host pool and backend, on the
CPU, against a master and a store service started from the repository's dist/ (`npm run build`
first; run with the venv of `make test-sglang`):

    clients/python/.venv-sglang/bin/python clients/python/bench/bench_sglang.py

Prints one JSON line per case: adopting the host pool (the one-time remap at registration),
batch_set_v1 / batch_get_v1 of 128-page batches (SGLang's STORAGE_BATCH_SIZE) with the pool
adopted (zero copy) and not adopted (each page staged through the client's buffer pool), the plain
get/set path, and batch_exists; pages/s, GB/s and the client's bytes by path."""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "tests"), os.path.join(HERE, "..", "tests_sglang")]

from cluster import Master, StoreService  # noqa: E402
from harness import PAGE, Engine  # noqa: E402


def emit(case, **kw):
    print(json.dumps({"case": case, **kw}), flush=True)


def run_path(label, engine, batches, rounds, set_only=False):
    pool = engine.host
    be = engine.backend
    idx = pool.alloc(batches * 128 * PAGE)
    engine.fill(idx, seed=1)
    page_bytes = sum(pool.get_page_buffer_meta(idx[:PAGE])[1])
    stamp = f"{label}-{time.time_ns()}"
    keys = [[f"{stamp}-{b}-{i}" for i in range(128)] for b in range(batches)]
    sl = [idx[b * 128 * PAGE:(b + 1) * 128 * PAGE] for b in range(batches)]
    zero_copy = be.zero_copy
    c0 = be.counters()["client"]
    t = time.perf_counter()
    for b in range(batches):
        ok = be.batch_set_v1(keys[b], sl[b]) if zero_copy else [be.batch_set(keys[b], [pool.get_data_page(int(sl[b][i * PAGE])) for i in range(128)])]
        assert all(ok), "a write failed"
    dt = time.perf_counter() - t
    n = batches * 128
    emit(f"{label}: write", pages=n, page_bytes=page_bytes, pages_per_s=round(n / dt, 1), gb_per_s=round(n * page_bytes / dt / 1e9, 3))
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        for b in range(batches):
            if zero_copy:
                ok = be.batch_get_v1(keys[b], sl[b])
            else:
                dst = [pool.get_dummy_flat_data_page() for _ in range(128)]
                got = be.batch_get(keys[b], dst)
                ok = [g is not None for g in got]
                for i, g in enumerate(got):
                    pool.set_from_flat_data_page(int(sl[b][i * PAGE]), g)
            assert all(ok), "a read failed"
        times.append(time.perf_counter() - t)
    dt = statistics.median(times)
    emit(f"{label}: read", pages=n, page_bytes=page_bytes, pages_per_s=round(n / dt, 1), gb_per_s=round(n * page_bytes / dt / 1e9, 3))
    t = time.perf_counter()
    for b in range(batches):
        assert be.batch_exists(keys[b]) == 128
    dt = time.perf_counter() - t
    emit(f"{label}: batch_exists", pages=n, pages_per_s=round(n / dt, 1))
    c1 = be.counters()["client"]
    emit(f"{label}: client bytes", **{k: c1[k] - c0[k] for k in ("zero_copy_bytes_put", "zero_copy_bytes_get", "staged_bytes_put", "staged_bytes_get", "inline_bytes_get")})
    pool.free(idx)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", type=int, default=4, help="128-page batches per case")
    ap.add_argument("--rounds", type=int, default=3, help="reads of every batch (the median is printed)")
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=64)
    args = ap.parse_args()
    shm = tempfile.mkdtemp(prefix="kvstore-bench-", dir="/dev/shm")
    master = Master()
    service = StoreService(master, shm, segment="4GB")
    try:
        base = {"address": service.rpc, "shm_dir": shm, "timeout": 30, "buffer_size": 256 << 20}
        geo = dict(layers=args.layers, heads=args.heads, head_dim=args.head_dim, device_tokens=args.batches * 128 * PAGE, host_ratio=1.2)
        cases = [
            ("v1 zero copy (pool adopted)", {"interface_v1": 1}),
            ("v1 staged (pool not adopted)", {"interface_v1": 1, "adopt_host_pool": False}),
            ("plain get/set", {}),
        ]
        # every case twice, in opposite orders: the store service faults in segment memory on
        # first use and the machine is shared, so one order alone favours the later cases
        for label, extra in cases + cases[::-1]:
            t = time.perf_counter()
            e = Engine("mha", "page_first", {**base, **extra}, **geo)
            ad = e.backend.adopted
            if ad:
                emit(f"{label}: engine start incl. adopting the host pool", seconds=round(time.perf_counter() - t, 3), adopted_bytes=ad[0].shared_bytes)
            run_path(label, e, args.batches, args.rounds)
            e.close()
    finally:
        service.stop()
        master.stop()


if __name__ == "__main__":
    main()
