"""The proof with the real engine: vLLM (CPU build) servers with the tiny local model and the
kvcache-store connector, one store service.

- A serves a long prompt and saves its blocks; B then serves the same prompt: its prefix comes
  from the store (the connector's counters on B's /metrics, vLLM's external-prefix-cache hits and
  the store service's /metrics show it; B computes only the tail) and B's greedy tokens are A's.
- C's loads miss their deadline: C reports the blocks, vLLM recomputes them, same tokens.
- The store service is stopped: B still answers a new prompt with A's tokens (a miss costs the
  connector's deadline; then the store is left alone).
Needs vLLM (make test-vllm installs it in clients/python/.venv-vllm)."""
import concurrent.futures
import os
import tempfile
import time

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed in this venv: the engine tests run with `make test-vllm`")

import tiny_model  # noqa: E402
from cluster import StoreService  # noqa: E402
from vllm_server import VllmServer, parse_counters, store_metric  # noqa: E402

PROMPT_TOKENS = 2000
BLOCK = 32
LAYERS = 2
PAGE = 2 * 2 * BLOCK * 32 * 4  # kv heads x (K and V) x tokens x head size x float32


@pytest.fixture(scope="module")
def model_dir():
    with tempfile.TemporaryDirectory(prefix="tiny-llama-") as d:
        yield tiny_model.build(d, hidden_size=128, heads=4, kv_heads=2, intermediate_size=256)


@pytest.fixture(scope="module")
def store(master):
    with tempfile.TemporaryDirectory(prefix="kvstore-shm-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as d:
        s = StoreService(master, d)
        yield s
        s.stop()


@pytest.fixture(scope="module")
def engines(model_dir, store):
    """A and B: the connector with its defaults; C: loads that always miss their deadline."""
    specs = {"A": {}, "B": {}, "C": {"load_timeout": 1e-6}}
    made = {}
    with concurrent.futures.ThreadPoolExecutor(len(specs)) as ex:
        futs = {n: ex.submit(VllmServer, f"vllm-{n}", model_dir, store=store, connector_extra=extra) for n, extra in specs.items()}
        errors = []
        for n, f in futs.items():
            try:
                made[n] = f.result()
            except Exception as e:  # noqa: BLE001 - every engine is stopped below, then the first error is raised
                errors.append(e)
    try:
        if errors:
            raise errors[0]
        yield made
    finally:
        for e in made.values():
            e.stop()


@pytest.fixture(scope="module")
def reference(engines):
    """A's greedy tokens for three prompts (A saves their blocks)."""
    a = engines["A"]
    prompts = [tiny_model.prompt(PROMPT_TOKENS, seed) for seed in (1, 2, 3)]
    return prompts, [a.complete(p) for p in prompts]


def test_b_takes_the_prefix_from_the_store_and_answers_as_a(engines, store, reference):
    a, b = engines["A"], engines["B"]
    prompts, want = reference
    full_blocks = PROMPT_TOKENS // BLOCK
    saved = parse_counters(a.metrics())
    assert saved["save_blocks"] >= 3 * full_blocks
    assert saved.get("save_failed_blocks", 0) == 0
    loads_before = store_metric(store.http, "store_client_op_items_total", ('op="get_into_batch"',))

    assert b.complete(prompts[0]) == want[0]

    b.wait_metric("vllm:kvcache_store_load_blocks_total", full_blocks)
    got = parse_counters(b.metrics())
    assert got["lookup_hit_blocks"] == full_blocks
    assert got["load_blocks"] == full_blocks
    assert got["load_bytes"] == full_blocks * LAYERS * PAGE
    assert got.get("load_failed_blocks", 0) == 0
    assert got.get("staged_bytes", 0) <= 4 * PAGE  # only pages in the first and last memory page of the KV cache are copied
    vm = b.metrics()
    # B computed only the tail: every full block came from the connector
    assert vm["vllm:external_prefix_cache_hits_total"] == full_blocks * BLOCK
    assert vm["vllm:prompt_tokens_total"] - vm["vllm:prompt_tokens_cached_total"] == PROMPT_TOKENS - full_blocks * BLOCK
    # every page came from the store: through the store service (one item per block and layer) or
    # copied by B itself out of the store's same-host memory (direct reads)
    loads = store_metric(store.http, "store_client_op_items_total", ('op="get_into_batch"',)) - loads_before
    assert loads * PAGE + got.get("read_here_bytes", 0) == full_blocks * LAYERS * PAGE


def test_a_load_that_misses_its_deadline_is_recomputed(engines, reference):
    c = engines["C"]
    prompts, want = reference
    full_blocks = PROMPT_TOKENS // BLOCK
    assert c.complete(prompts[0]) == want[0]
    c.wait_metric("vllm:kvcache_store_load_failed_blocks_total", full_blocks)
    got = parse_counters(c.metrics())
    assert got["lookup_hit_blocks"] == full_blocks
    assert got.get("load_blocks", 0) == 0
    assert got["load_failed_blocks"] == full_blocks


def test_b_answers_with_the_store_stopped(engines, store, reference):
    b = engines["B"]
    prompts, want = reference
    store.stop()
    t0 = time.monotonic()
    assert b.complete(prompts[1]) == want[1]  # B never saw it: the lookup fails, B recomputes
    first = time.monotonic() - t0
    t0 = time.monotonic()
    assert b.complete(prompts[2]) == want[2]  # the store is left alone now
    second = time.monotonic() - t0
    b.wait_metric("vllm:kvcache_store_lookups_skipped_total", 1)
    got = parse_counters(b.metrics())
    assert got.get("lookup_errors", 0) + got.get("lookups_skipped", 0) >= 2
    assert got.get("load_blocks", 0) == PROMPT_TOKENS // BLOCK  # only the first prompt's
    print(f"B with the store stopped: {first:.2f} s (the failed lookup and save included), then {second:.2f} s")
