"""The vLLM connector's data path (vllm_transfer.py) against real store services, with a KV cache
laid out as vLLM lays it out on the CPU (one int8 allocation, layer-outer [blocks, heads, tokens,
2 x head_size] pages per layer): blocks saved and loaded back bit-exact with no copy, a
different fingerprint misses, and a store that is down or stopped costs one deadline, reports
the blocks for recompute and fences late transfers. Needs torch (the vLLM venv: make test-vllm)."""
import os
import signal
import tempfile

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed in this venv: the vLLM tests run with `make test-vllm`")

from cluster import StoreService  # noqa: E402

from kvcache_store.vllm_plan import Health  # noqa: E402
from kvcache_store.vllm_transfer import Counters, KVPages, StoreLookup, StoreTransfer, TransferConfig  # noqa: E402

LAYERS, BLOCKS, HEADS, TOKENS, HEAD = 2, 64, 2, 32, 32


class FakeClock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def kv_cache():
    """vLLM's CPU KV cache: one int8 buffer, layer L block B at L*layer_stride + B*page."""
    page = HEADS * TOKENS * 2 * HEAD * 4
    raw = torch.zeros(LAYERS * BLOCKS * page, dtype=torch.int8)
    views = [raw[i * BLOCKS * page:(i + 1) * BLOCKS * page].view(torch.float32).view(BLOCKS, HEADS, TOKENS, 2 * HEAD) for i in range(LAYERS)]
    for v in views:
        v.copy_(torch.randn(v.shape))
    return raw, views


def transfer(service, fp="fp-test", clock=None, **cfg):
    raw, views = kv_cache()
    pages = KVPages(views, BLOCKS)
    c = TransferConfig(address=service.rpc, shm_dir=service.shm_dir, **cfg)
    t = StoreTransfer(c, pages, fp, Counters(), clock=clock or FakeClock())
    return t, raw, views


def hashes(tag, n):
    return [f"{tag}-{os.getpid()}-{i}".encode().ljust(32, b"\0") for i in range(n)]


def test_pages_saved_and_loaded_bit_exact_with_no_copy(service, request):
    t, raw, views = transfer(service)
    try:
        assert t.client() is not None and t.adopted is not None
        hs = hashes(request.node.name, 4)
        blocks = [10, 11, 12, 13]  # inside the shared pages (the first and last memory pages are staged)
        want = [v[blocks].clone() for v in views]
        t.save(blocks, hs)
        got = t.counters.take()
        assert got["save_blocks"] == 4 and got["save_bytes"] == 4 * t.pages.block_bytes
        assert got.get("staged_bytes", 0) == 0
        for v in views:
            v[blocks] = 0
        assert t.load([20, 21, 22, 23], hs) == set()  # into other blocks: the keys name content, not places
        got = t.counters.take()
        assert got["load_blocks"] == 4 and got.get("staged_bytes", 0) == 0
        for v, w in zip(views, want):
            assert torch.equal(v[[20, 21, 22, 23]], w)
        t.save(blocks[:2], hs[:2])  # saved before: counted, not an error
        assert t.counters.take()["save_existing_blocks"] == 2
    finally:
        t.close()


def test_another_fingerprint_or_a_missing_block_is_a_load_error(service, request):
    t, raw, views = transfer(service, fp="fp-a")
    other, _, _ = transfer(service, fp="fp-b")
    try:
        hs = hashes(request.node.name, 3)
        t.save([1, 2], hs[:2])
        assert other.load([5, 6], hs[:2]) == {5, 6}  # another model/layout/rank: never its bytes
        assert t.load([5, 6, 7], hs) == {7}  # the third was never saved
        assert t.counters.take()["load_failed_blocks"] == 1
    finally:
        t.close()
        other.close()


def test_lookup_counts_leading_blocks_held_for_every_rank(service, request):
    r0, _, _ = transfer(service, fp="fp-r0")
    r1, _, _ = transfer(service, fp="fp-r1")
    look = StoreLookup(TransferConfig(address=service.rpc, shm_dir=service.shm_dir), ["fp-r0", "fp-r1"], LAYERS, Counters())
    try:
        hs = hashes(request.node.name, 4)
        r0.save([1, 2, 3, 4], hs)
        r1.save([1, 2, 3], hs[:3])
        assert look.hits(hs) == 3  # block 4 is missing on rank 1
        assert look.hits(hs[1:]) == 2
    finally:
        for x in (r0, r1, look):
            x.close()


@pytest.fixture
def own_service(master):
    """A store service of this test alone (it is killed or stopped)."""
    with tempfile.TemporaryDirectory(prefix="kvstore-shm-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as d:
        s = StoreService(master, d)
        yield s
        if s.proc.poll() is None:
            os.kill(s.pid, signal.SIGCONT)
        s.stop()


def test_a_store_that_died_fails_loads_fast_then_is_left_alone(own_service, request):
    clock = FakeClock()
    t, raw, views = transfer(own_service, clock=clock, load_timeout=2.0, retry_interval=10.0)
    try:
        hs = hashes(request.node.name, 2)
        t.save([3, 4], hs)
        own_service.kill()
        assert t.load([5, 6], hs) == {5, 6}
        assert t.counters.take()["load_failed_blocks"] == 2
        assert not t.health.usable(clock())
        assert t.load([5, 6], hs) == {5, 6}  # left alone: no call
        got = t.counters.take()
        assert got["loads_skipped"] == 1
        t.save([7], hs[:1])
        assert t.counters.take()["saves_skipped"] == 1
    finally:
        t.close()


def test_a_stopped_store_misses_the_deadline_and_the_pages_are_fenced(own_service, request, monkeypatch):
    # loads through the store service: with direct reads the connector would look the pages up at
    # the master and copy them from the stopped service's memory itself, which stays readable
    monkeypatch.setenv("STORE_DUMMY_DIRECT_READS", "0")
    clock = FakeClock()
    t, raw, views = transfer(own_service, clock=clock, load_timeout=0.5, retry_interval=10.0)
    try:
        hs = hashes(request.node.name, 2)
        want = [v[[3, 4]].clone() for v in views]
        t.save([3, 4], hs)
        region = t.adopted.region.name
        os.kill(own_service.pid, signal.SIGSTOP)
        try:
            assert t.load([30, 31], hs) == {30, 31}
            got = t.counters.take()
            assert got["remaps"] == 1 and got["load_failed_blocks"] == 2
            assert t.adopted.region.name != region  # the late write goes to the old file
        finally:
            os.kill(own_service.pid, signal.SIGCONT)
        for v in views:
            v[[40, 41]] = 0
        clock.t += 10.0  # the retry interval passed
        assert t.load([40, 41], hs) == set()  # the new region serves loads, no copy
        assert t.counters.take().get("staged_bytes", 0) == 0
        for v, w in zip(views, want):
            assert torch.equal(v[[40, 41]], w)
    finally:
        t.close()


def test_an_unreachable_store_at_start_is_tried_again_after_the_interval(master, request):
    clock = FakeClock()
    with tempfile.TemporaryDirectory(prefix="kvstore-shm-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as d:
        raw, views = kv_cache()
        cfg = TransferConfig(address="127.0.0.1:1", shm_dir=d, connect_timeout=0.2, retry_interval=5.0)
        t = StoreTransfer(cfg, KVPages(views, BLOCKS), "fp", Counters(), clock=clock)
        assert t.client() is None
        assert t.load([1], hashes(request.node.name, 1)) == {1}
        assert t.counters.take()["loads_skipped"] == 1
        assert t.health.failures == 1
        clock.t += 5.0
        assert t.client() is None and t.health.failures == 2
        assert isinstance(t.health, Health)


def test_pages_must_be_block_contiguous():
    raw = torch.zeros(4 * 2 * 8, dtype=torch.float32)
    # [heads, blocks, tokens]: a block's page is split across heads
    v = raw.view(2, 4, 8).transpose(0, 1)
    with pytest.raises(ValueError, match="not contiguous"):
        KVPages([v], 4)
