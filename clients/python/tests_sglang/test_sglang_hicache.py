"""SGLang's HiCache storage layer (its host pools and HiCacheController, loading our backend through
`--hicache-storage-backend dynamic`) against a real store_master and store_service: pages written by
one engine are read back bit-exact by another, with no copy in the engine process, in every host
layout SGLang offers; per tensor-parallel rank for MHA, shared for MLA; any format difference is a
miss; a store that is down or stalled is a miss within the call's deadline, never a hang."""
import hashlib
import signal
import threading

import pytest
import torch

from harness import PAGE, Engine
from kvcache_store.breaker import Breaker
from sglang.srt.runtime_context import get_parallel

MHA_LAYOUTS = ["layer_first", "page_first", "page_first_direct", "page_head"]
MLA_LAYOUTS = ["layer_first", "page_first", "page_first_direct"]


def tokens_for(name: str, pages: int = 4) -> list:
    """Token ids unique to a test (the store outlives each test)."""
    base = int(hashlib.sha256(name.encode()).hexdigest()[:6], 16)
    return [base + i for i in range(pages * PAGE)]


def bounded(fn, seconds: float):
    """Runs fn in a thread and fails the test if it does not return (a hang, not a timing check)."""
    out = {}

    def run():
        try:
            out["v"] = fn()
        except BaseException as e:  # re-raised in the test's thread
            out["e"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"no return within {seconds} s: the call hangs"
    if "e" in out:
        raise out["e"]
    return out["v"]


@pytest.fixture
def engines():
    made = []

    def make(*args, **kw):
        e = Engine(*args, **kw)
        made.append(e)
        return e

    yield make
    for e in made:
        e.close()


@pytest.mark.parametrize("kind,layout", [("mha", lay) for lay in MHA_LAYOUTS] + [("mla", lay) for lay in MLA_LAYOUTS])
def test_second_engine_reads_first_engines_pages_bit_exact_without_copies(engines, store_config, kind, layout, request):
    tokens = tokens_for(request.node.name)
    a = engines(kind, layout, store_config)
    idx = a.host.alloc(len(tokens))
    a.fill(idx, seed=7)
    assert a.write(idx, tokens) == len(tokens)

    b = engines(kind, layout, store_config)
    host_idx, loaded = b.prefetch(tokens)
    assert loaded == len(tokens)
    assert b.pages(host_idx) == a.pages(idx)

    # the pool was adopted in place and every page moved with no staging copy in the engine
    # process: the real client copied it, or (puts of at most 64 KiB, reads of same-host memory)
    # the engine process copied it between the pool and the store's memory itself
    total = sum(len(p) for p in a.pages(idx))
    for e, direction in ((a, "put"), (b, "get")):
        c = e.backend.counters()
        assert c["adopted"] and c["adopted"][0]["size"] > 0
        assert c["client"][f"staged_bytes_{direction}"] == 0
        here = c["client"]["direct_puts"]["direct_put_bytes"] if direction == "put" else c["client"]["local_reads"]["bytes"]
        assert c["client"][f"zero_copy_bytes_{direction}"] + here == total


def test_a_prefix_is_loaded_up_to_the_first_missing_page(engines, store_config, request):
    tokens = tokens_for(request.node.name, pages=4)
    a = engines("mha", "page_first", store_config)
    idx = a.host.alloc(2 * PAGE)
    a.fill(idx, seed=3)
    assert a.write(idx, tokens[: 2 * PAGE]) == 2 * PAGE

    b = engines("mha", "page_first", store_config)
    host_idx, loaded = b.prefetch(tokens)
    assert loaded == 2 * PAGE
    assert b.pages(host_idx[: 2 * PAGE]) == a.pages(idx)
    assert b.prefetch(tokens_for(request.node.name + "-never-written")) == (None, 0)


def test_misses_are_false_never_none(engines, store_config, request):
    b = engines("mha", "page_first", store_config)
    idx = b.host.alloc(2 * PAGE)
    keys = ["never-" + request.node.name + str(i) for i in range(2)]
    assert b.backend.batch_get_v1(keys, idx) == [False, False]
    assert b.backend.batch_exists(keys) == 0
    assert b.backend.exists(keys[0]) is False
    assert b.backend.batch_get_v1([], idx[:0]) == []


@pytest.mark.parametrize("kind,other_rank_hits", [("mha", False), ("mla", True)])
def test_keys_are_per_tensor_parallel_rank_for_mha_and_shared_for_mla(engines, store_config, kind, other_rank_hits, request):
    tokens = tokens_for(request.node.name)
    with get_parallel().override(tp_rank=0, tp_size=2):
        a = engines(kind, "page_first", store_config)
    idx = a.host.alloc(len(tokens))
    a.fill(idx, seed=11)
    assert a.write(idx, tokens) == len(tokens)

    with get_parallel().override(tp_rank=1, tp_size=2):
        other = engines(kind, "page_first", store_config)
    with get_parallel().override(tp_rank=0, tp_size=2):
        same = engines(kind, "page_first", store_config)
    assert same.prefetch(tokens)[1] == len(tokens)
    host_idx, loaded = other.prefetch(tokens)
    assert loaded == (len(tokens) if other_rank_hits else 0)
    if other_rank_hits:
        assert other.pages(host_idx) == a.pages(idx)
    # MLA KV is stored once: the other rank is no writer, SGLang skips its backups
    assert other.backend.storage_config.is_storage_writer is (kind == "mha")


@pytest.mark.parametrize("change", ["model", "dtype", "layout"])
def test_a_different_format_is_a_miss(engines, store_config, change, request):
    tokens = tokens_for(request.node.name)
    a = engines("mha", "page_first", store_config)
    idx = a.host.alloc(len(tokens))
    a.fill(idx, seed=5)
    assert a.write(idx, tokens) == len(tokens)
    kw = {"model": "another-model"} if change == "model" else {"dtype": torch.float16} if change == "dtype" else {}
    b = engines("mha", "page_first_direct" if change == "layout" else "page_first", store_config, **kw)
    assert b.prefetch(tokens) == (None, 0)


def test_plain_get_set_path_without_interface_v1(engines, store_config, request):
    tokens = tokens_for(request.node.name)
    plain = {k: v for k, v in store_config.items() if k != "interface_v1"}
    a = engines("mha", "layer_first", plain)
    assert a.controller.page_set_func.__name__ == "_generic_page_set"
    idx = a.host.alloc(len(tokens))
    a.fill(idx, seed=9)
    assert a.write(idx, tokens) == len(tokens)

    b = engines("mha", "layer_first", plain)
    host_idx, loaded = b.prefetch(tokens)
    assert loaded == len(tokens)
    assert b.pages(host_idx) == a.pages(idx)
    # the plain path's flat pages are objects of their own: the zero-copy path does not see them
    assert engines("mha", "layer_first", store_config).prefetch(tokens) == (None, 0)

    # get without a target, set from a pointer
    page = a.host.get_data_page(int(idx[0]), flat=True)
    assert bytes(a.backend.get(_hash(tokens, 0)).numpy()) == bytes(page.contiguous().view(torch.uint8).numpy())
    assert a.backend.set("ptr-" + request.node.name, target_location=page.data_ptr(), target_sizes=page.numel() * page.element_size())
    assert a.backend.exists("ptr-" + request.node.name)
    with pytest.raises(ValueError):
        a.backend.set("nothing")


def _hash(tokens, page: int) -> str:
    from sglang.srt.mem_cache.utils import get_storage_hash_str

    return get_storage_hash_str(tokens, None, page_size=PAGE)[page]


def test_what_is_not_served_raises(engines, store_config):
    e = engines("mha", "page_first", store_config)
    be = e.backend
    for call in (lambda: be.batch_exists_v2(["k"]), lambda: be.batch_get_v2([]), lambda: be.batch_set_v2([]), lambda: be.register_mem_host_pool_v2(e.host, "mamba")):
        with pytest.raises(NotImplementedError):
            call()
    be.register_mem_host_pool_v2(e.host, "kv")  # the KV pool itself is the one registered already
    with pytest.raises(ValueError):
        be.batch_get_v1(["a", "b"], e.host.alloc(PAGE))  # 2 pages need 2 pages of indices


# ------------------------------------------------------------------ a store that is down or stalled


@pytest.fixture
def own_store(master, shm_dir):
    """A store_service of the test's own, to stop."""
    from cluster import StoreService

    s = StoreService(master, shm_dir)
    yield s
    if s.proc.poll() is None:
        s.proc.send_signal(signal.SIGCONT)
    s.stop()


def test_store_down_every_call_is_a_miss_and_returns(engines, own_store, shm_dir, request):
    cfg = {"address": own_store.rpc, "shm_dir": shm_dir, "interface_v1": 1, "timeout": 1}
    tokens = tokens_for(request.node.name)
    a = engines("mha", "page_first", cfg)
    idx = a.host.alloc(len(tokens))
    a.fill(idx, seed=1)
    assert a.write(idx, tokens) == len(tokens)

    own_store.stop()
    assert bounded(lambda: a.prefetch(tokens), 30) == (None, 0)
    assert bounded(lambda: a.write(idx, tokens_for(request.node.name + "-2")), 30) == 0
    assert bounded(lambda: a.backend.batch_get_v1(["x"], idx[:PAGE]), 30) == [False]
    c = a.backend.counters()
    assert c["calls_failed"] >= 1 and c["calls_skipped"] >= 1  # the breaker spares the next calls the deadline

    # an engine that starts while the store is down starts, and misses
    b = bounded(lambda: engines("mha", "page_first", cfg), 60)
    assert bounded(lambda: b.prefetch(tokens), 30) == (None, 0)


def test_stalled_store_transfer_returns_after_grace_and_drops_the_connection(engines, own_store, shm_dir, request, monkeypatch):
    # reads through the real client: with direct reads the engine would look the pages up at the
    # master and copy them from the stalled service's memory itself, which stays readable
    monkeypatch.setenv("STORE_DUMMY_DIRECT_READS", "0")
    cfg = {"address": own_store.rpc, "shm_dir": shm_dir, "interface_v1": 1, "timeout": 0.5, "late_grace": 1}
    tokens = tokens_for(request.node.name)
    a = engines("mha", "page_first", cfg)
    idx = a.host.alloc(len(tokens))
    a.fill(idx, seed=2)
    assert a.write(idx, tokens) == len(tokens)
    now = [0.0]
    a.backend.breaker = Breaker(clock=lambda: now[0])

    own_store.proc.send_signal(signal.SIGSTOP)
    try:
        keys = [_hash(tokens, i) for i in range(4)]
        assert bounded(lambda: a.backend.batch_get_v1(keys, a.host.alloc(len(tokens))), 30) == [False] * 4
        assert a.backend.counters()["late_dropped"] == 1
    finally:
        own_store.proc.send_signal(signal.SIGCONT)
    now[0] += 60  # past the breaker's backoff
    out = a.host.alloc(len(tokens))
    assert a.backend.batch_get_v1(keys, out) == [True] * 4
    assert a.pages(out) == a.pages(idx)
