"""Benchmark of the Python DummyClient against a real client (store_service) on this host.

Cases: put/get of 4 KiB (1 in flight, and 64 in flight from 64 threads), 64 KiB, 1 MiB, 4 MiB,
and batches of 128 x 4 KiB; each with the value in the shared region (put_from / get_into on an
alloc_buffer lease: no copy here) and from plain bytes (put / get: staged through the pool).
Prints one JSON object per line:
  {"case": ..., "size": ..., "ops_per_s": ..., "gb_per_s": ..., "p50_us": ..., "p99_us": ...}
ops are calls (a batch counts 128 objects in ops_per_s and gb_per_s; p50/p99 are per call).

The real client: --address host:port (its Unix socket in --shm-dir is used when present), else
STORE_SIDECAR_ADDRESS / STORE_SHM_DIR, or --start-cluster to start a master and a store service
from the repository's dist/ (node bench/local_cluster.mjs; run `npm run build` first).
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from kvcache_store import DummyClient  # noqa: E402

KiB = 1024
MiB = 1024 * KiB


def pct(samples, q):
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))] if s else 0.0


def emit(case, size, objects, elapsed, lat):
    print(
        json.dumps(
            {
                "case": case,
                "size": size,
                "ops_per_s": round(objects / elapsed, 1),
                "gb_per_s": round(objects * size / elapsed / 1e9, 3),
                "p50_us": round(pct(lat, 0.50) * 1e6, 1),
                "p99_us": round(pct(lat, 0.99) * 1e6, 1),
            }
        ),
        flush=True,
    )


def timed(fn, n):
    lat = []
    t0 = time.perf_counter()
    for i in range(n):
        a = time.perf_counter()
        fn(i)
        lat.append(time.perf_counter() - a)
    return time.perf_counter() - t0, lat


def check(r, what):
    if (isinstance(r, int) and r < 0) or r == b"":
        raise SystemExit(f"bench: {what} failed: {r}")
    return r


def memcpy(size=4 * MiB, span=256 * MiB, n=200):
    """Cold memcpy of `size` bytes (source and target cycling over `span`), for the ratio."""
    src = bytearray(os.urandom(1 << 20)) * (span // (1 << 20))
    dst = bytearray(span)
    s, d = memoryview(src), memoryview(dst)
    slots = span // size
    el, lat = timed(lambda i: d.__setitem__(slice((i % slots) * size, (i % slots + 1) * size), s[((i + 7) % slots) * size:((i + 7) % slots + 1) * size]), n)
    emit("memcpy (cold, this process)", size, n, el, lat)


def run(c: DummyClient, prefix: str, counts: dict) -> None:
    for size in (4 * KiB, 64 * KiB, MiB, 4 * MiB):
        n = counts[size]
        value = os.urandom(size)
        with c.alloc_buffer(size) as lease:
            lease.buffer[:] = value
            el, lat = timed(lambda i: check(c.put_from(f"{prefix}-zc-{size}-{i}", lease.ptr, size), "put_from"), n)
            emit("put_from lease", size, n, el, lat)
            el, lat = timed(lambda i: check(c.get_into(f"{prefix}-zc-{size}-{i % n}", lease.ptr, size), "get_into"), n)
            emit("get_into lease", size, n, el, lat)
        el, lat = timed(lambda i: check(c.put(f"{prefix}-b-{size}-{i}", value), "put"), n)
        emit("put bytes", size, n, el, lat)
        el, lat = timed(lambda i: check(c.get(f"{prefix}-b-{size}-{i % n}"), "get"), n)
        emit("get bytes", size, n, el, lat)
        if size == 4 * KiB:
            el, lat = timed(lambda i: check(c.get(f"{prefix}-b-{size}-0"), "get"), n)
            emit("get bytes (same key)", size, n, el, lat)
            threaded(c, prefix, value, 64, n)
    batch(c, prefix, 128, counts["batch"])


def threaded(c, prefix, value, threads, n):
    per = max(1, n // threads)
    size = len(value)
    for verb in ("put", "get"):
        lats = [[] for _ in range(threads)]
        start = threading.Barrier(threads + 1)

        def work(t):
            start.wait()
            for i in range(per):
                k = f"{prefix}-t-{t}-{i}"
                a = time.perf_counter()
                check(c.put(k, value) if verb == "put" else c.get(k), verb)
                lats[t].append(time.perf_counter() - a)

        ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for th in ts:
            th.start()
        start.wait()
        t0 = time.perf_counter()
        for th in ts:
            th.join()
        emit(f"{verb} bytes, {threads} threads", size, per * threads, time.perf_counter() - t0, [x for l in lats for x in l])


def batch(c, prefix, k, rounds):
    size = 4 * KiB
    value = os.urandom(size)
    with c.alloc_buffer(size * k) as lease:
        for j in range(k):
            lease.buffer[j * size:(j + 1) * size] = value
        ptrs = [lease.ptr + j * size for j in range(k)]
        sizes = [size] * k
        el, lat = timed(lambda i: [check(r, "batch_put_from") for r in c.batch_put_from([f"{prefix}-bz-{i}-{j}" for j in range(k)], ptrs, sizes)], rounds)
        emit(f"batch_put_from {k} lease", size, rounds * k, el, lat)
        el, lat = timed(lambda i: [check(r, "batch_get_into") for r in c.batch_get_into([f"{prefix}-bz-{i}-{j}" for j in range(k)], ptrs, sizes)], rounds)
        emit(f"batch_get_into {k} lease", size, rounds * k, el, lat)
    vals = [value] * k
    el, lat = timed(lambda i: [check(r, "batch_put") for r in c.batch_put([f"{prefix}-bb-{i}-{j}" for j in range(k)], vals)], rounds)
    emit(f"batch_put {k} bytes", size, rounds * k, el, lat)
    el, lat = timed(lambda i: [check(r, "batch_get") for r in c.batch_get([f"{prefix}-bb-{i}-{j}" for j in range(k)])], rounds)
    emit(f"batch_get {k} bytes", size, rounds * k, el, lat)


SIDECAR_CASES = [
    ("4 KiB x1", 4 * KiB, 1, 1),
    ("4 KiB x64", 4 * KiB, 64, 1),
    ("64 KiB x1", 64 * KiB, 1, 1),
    ("1 MiB x1", MiB, 1, 1),
    ("4 MiB x1", 4 * MiB, 1, 1),
    ("batch 128 x 4 KiB", 4 * KiB, 1, 128),
]


def lanes_run(n, per, lanes, op):
    """Runs op(first, lane) for first = 0, per, 2*per... < n on `lanes` threads; returns (elapsed, latencies)."""
    lock = threading.Lock()
    nxt = [0]
    lat = [[] for _ in range(lanes)]

    def work(t):
        while True:
            with lock:
                first = nxt[0]
                if first >= n:
                    return
                nxt[0] += per
            a = time.perf_counter()
            op(first, t)
            lat[t].append(time.perf_counter() - a)

    t0 = time.perf_counter()
    if lanes == 1:
        work(0)
    else:
        ts = [threading.Thread(target=work, args=(t,)) for t in range(lanes)]
        for th in ts:
            th.start()
        for th in ts:
            th.join()
    return time.perf_counter() - t0, [x for l in lat for x in l]


def sidecar_cases(c: DummyClient, prefix: str, preferred: str, bytes_per_row: int) -> None:
    """The cases of `npm run bench:sidecar` (bench/sidecar-bench.ts), under its row names: values
    in alloc_buffer leases, objects placed on `preferred`, gets read twice (first read of each key,
    then again while the read lease holds)."""
    from kvcache_store import ReplicateConfig

    cfg = ReplicateConfig(preferred_segment=preferred)
    # this placement's shm grants (ours, and the real client's for what it copies for us) are
    # made and their page tables filled in by threads before any row is measured
    warm = c.alloc_buffer(MiB)
    for size in (4 * KiB, MiB):
        check(c.put_from(f"{prefix}-warm-{size}", warm.ptr, size, cfg), "put_from")
        check(c.get_into(f"{prefix}-warm-{size}", warm.ptr, size), "get_into")
    warm.release()
    for t in threading.enumerate():
        if t.name.startswith("kvstore-populate"):
            t.join()
    for name, size, inflight, k in SIDECAR_CASES:
        n = max(k * 4, min(8192 if k > 1 else 3000, bytes_per_row // size))
        leases = [c.alloc_buffer(size * k) for _ in range(inflight)]
        key = lambda i: f"{prefix}-{name.replace(' ', '')}-{i}"  # noqa: E731

        def put(first, t):
            lz = leases[t]
            if k == 1:
                check(c.put_from(key(first), lz.ptr, size, cfg), "put_from")
            else:
                m = min(k, n - first)
                for r in c.batch_put_from([key(first + j) for j in range(m)], [lz.ptr + j * size for j in range(m)], [size] * m, cfg):
                    check(r, "batch_put_from")

        def get(first, t):
            lz = leases[t]
            if k == 1:
                check(c.get_into(key(first), lz.ptr, size), "get_into")
            else:
                m = min(k, n - first)
                for r in c.batch_get_into([key(first + j) for j in range(m)], [lz.ptr + j * size for j in range(m)], [size] * m):
                    check(r, "batch_get_into")

        el, lat = lanes_run(n, k, inflight, put)
        emit(f"put {name}", size, n, el, lat)
        el, lat = lanes_run(n, k, inflight, get)
        emit(f"get {name} (first read)", size, n, el, lat)
        el, lat = lanes_run(n, k, inflight, get)
        emit(f"get {name} (repeated)", size, n, el, lat)
        for lz in leases:
            lz.release()


HOP_CASES = [
    ("isExist x1", 1, 1, 3000),
    ("put 4 KiB x1", 1, 1, 3000),
    ("get 4 KiB x1 (first read)", 1, 1, 3000),
    ("put 4 KiB x64", 64, 1, 6400),
    ("get 4 KiB x64 (first read)", 64, 1, 6400),
    ("put batch 128 x 4 KiB", 1, 128, 8192),
    ("get batch 128 x 4 KiB (first read)", 1, 128, 8192),
]


def hop_cases(c: DummyClient, prefix: str, preferred: str, scale: float, pool: str = "", pool_size: int = 0) -> None:
    """The rows of `npm run bench:dummy-hop` (bench/dummy-hop-bench.ts): calls that need the real
    client. First the bench's pool of `pool_size` objects (named `pool`-i, put by the bench) is
    read once (not reported: the local-read cache is then full, as in a long-running client); the
    last row reads it again. Prints {"start": row} before each row (the bench samples every
    process's CPU then) and the row's figures after it, with "objects" and this process's CPU us
    per object (its threads end with the row: /proc would lose their time)."""
    from kvcache_store import ReplicateConfig

    cfg = ReplicateConfig(preferred_segment=preferred)
    size = 4 * KiB
    leases = [c.alloc_buffer(size * 128) for _ in range(64)]
    ptrs = [leases[0].ptr + j * size for j in range(128)]
    for first in range(0, pool_size, 128):
        keys = [f"{pool}-{first + j}" for j in range(min(128, pool_size - first))]
        c.batch_get_into(keys, ptrs[: len(keys)], [size] * len(keys))
    cases = [(name, inflight, k, max(k * 4, round(n * scale))) for name, inflight, k, n in HOP_CASES]
    if pool_size:
        cases.append(("get batch 128 x 4 KiB (first read, pool)", 1, 128, pool_size))
    for name, inflight, k, n in cases:
        verb = name.split(" ")[0]
        shape = name.split(" ", 1)[1].replace(" (first read)", "").replace(" ", "")
        key = (lambda i: f"{pool}-{i}") if name.endswith("pool)") else (lambda i, shape=shape: f"{prefix}-{shape}-{i}")

        def op(first, t):
            lz = leases[t]
            if verb == "isExist":
                check(c.is_exist(f"{prefix}-exists-{first % 64}"), "is_exist")
            elif k == 1 and verb == "put":
                check(c.put_from(key(first), lz.ptr, size, cfg), "put_from")
            elif k == 1:
                check(c.get_into(key(first), lz.ptr, size), "get_into")
            else:
                m = min(k, n - first)
                ptrs = [lz.ptr + j * size for j in range(m)]
                if verb == "put":
                    rs = c.batch_put_from([key(first + j) for j in range(m)], ptrs, [size] * m, cfg)
                else:
                    rs = c.batch_get_into([key(first + j) for j in range(m)], ptrs, [size] * m)
                for r in rs:
                    check(r, name)

        print(json.dumps({"start": name}), flush=True)
        cpu = time.process_time()  # all threads, ended ones included
        el, lat = lanes_run(n, k, inflight, op)
        cpu_us = (time.process_time() - cpu) * 1e6 / n
        print(json.dumps({"case": name, "objects": n, "ops_per_s": round(n / el, 1), "cpu_us": round(cpu_us, 2)}), flush=True)
    for lz in leases:
        lz.release()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--address", default=os.environ.get("STORE_SIDECAR_ADDRESS", ""))
    ap.add_argument("--socket", default=None, help="the real client's Unix socket (default <shm-dir>/kvstore-<port>.sock)")
    ap.add_argument("--shm-dir", default=os.environ.get("STORE_SHM_DIR", "/dev/shm"))
    ap.add_argument("--start-cluster", action="store_true", help="start a master and a store service from dist/")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the operation counts")
    ap.add_argument("--spin-us", type=float, default=100.0)
    ap.add_argument("--preferred-segment", default=None, help="run bench:sidecar's cases, placing objects on this segment")
    ap.add_argument("--hop-cases", action="store_true", help="with --preferred-segment: run bench:dummy-hop's rows instead")
    ap.add_argument("--prefix", default=None, help="key prefix (default from the pid and time)")
    ap.add_argument("--pool", default="", help="with --hop-cases: key prefix of the bench's pool of objects")
    ap.add_argument("--pool-size", type=int, default=0, help="with --hop-cases: objects in the pool (read once first, then as the last row)")
    ap.add_argument("--bytes-per-row", type=int, default=96 * MiB, help="with --preferred-segment: bytes per case (at most 3000 calls)")
    args = ap.parse_args()
    cluster = None
    secret_file = None  # STORE_CLUSTER_SECRET_FILE unless the cluster started here made its own
    if args.start_cluster:
        cluster = subprocess.Popen(["node", os.path.join(HERE, "local_cluster.mjs")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        info = json.loads(cluster.stdout.readline())
        args.address, args.shm_dir = info["rpc"], info["shm_dir"]
        secret_file = info.get("secret") or None
    if not args.address and not args.socket:
        raise SystemExit("bench_dummy: give --address (or STORE_SIDECAR_ADDRESS) or --start-cluster")
    s = args.scale
    counts = {4 * KiB: int(3000 * s), 64 * KiB: int(1000 * s), MiB: int(200 * s), 4 * MiB: int(60 * s), "batch": int(40 * s)}
    c = DummyClient(raise_errors=True)
    try:
        c.setup(address=args.address, socket_path=args.socket, shm_dir=args.shm_dir, buffer_size=768 * MiB, spin_us=args.spin_us, cluster_secret_file=secret_file)
        print(json.dumps({"info": "bench_dummy", "transport": "unix" if c.endpoint.describe().endswith(".sock") else "tcp", "load": os.getloadavg()[0]}), flush=True)
        # warm-up: connection, region registration, first faults
        for i in range(200):
            c.put(f"warm-{os.getpid()}-{i}", b"w" * 4096)
            c.get(f"warm-{os.getpid()}-{i}")
        if args.preferred_segment is not None and args.hop_cases:
            hop_cases(c, args.prefix or f"py-{os.getpid()}-{int(time.time())}", args.preferred_segment, args.scale, args.pool, args.pool_size)
        elif args.preferred_segment is not None:
            sidecar_cases(c, f"py-{os.getpid()}-{int(time.time())}", args.preferred_segment, args.bytes_per_row)
            print(json.dumps({"local_reads": c.local_read_stats}), flush=True)
        else:
            memcpy()
            run(c, f"bench-{os.getpid()}-{int(time.time())}", counts)
    finally:
        c.close()
        if cluster is not None:
            cluster.stdin.close()
            cluster.wait(60)


if __name__ == "__main__":
    main()
