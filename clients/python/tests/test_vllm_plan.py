"""The vLLM connector's pure logic (vllm_plan.py): keys, fingerprints, matched prefixes, the
steps' load and save plans, and the store's health. No vLLM, torch or store process needed."""
from types import SimpleNamespace

import pytest

from kvcache_store.vllm_plan import (
    Health,
    StepPlanner,
    block_keys,
    fingerprint,
    hashes_per_block,
    leading_hits,
    loadable_blocks,
)

FP = dict(model="m", dtype="torch.float32", block_size=32, layout="LBHNC", page_bytes=16384, layers=2, tp_rank=0, tp_size=1, hash_algo="sha256")


def test_fingerprint_changes_with_everything_that_changes_kv_bytes():
    base = fingerprint(**FP)
    assert base == fingerprint(**FP)  # stable
    for k, v in [("model", "m2"), ("dtype", "torch.bfloat16"), ("block_size", 64), ("layout", "BLHNC"), ("page_bytes", 8192),
                 ("layers", 3), ("tp_rank", 1), ("tp_size", 2), ("hash_algo", "xxhash")]:
        assert fingerprint(**dict(FP, **{k: v})) != base, k


def test_block_keys_one_per_layer_and_distinct_per_fingerprint():
    h = bytes(range(32))
    a = block_keys("fpA", h, 3)
    assert a == [f"vllm/fpA/{h.hex()}/{i}" for i in range(3)]
    assert set(a).isdisjoint(block_keys("fpB", h, 3))


def test_hashes_per_block_takes_the_last_hash_unit_of_each_block():
    hs = [bytes([i]) for i in range(8)]
    assert hashes_per_block(hs, 32, 32) == hs
    assert hashes_per_block(hs, 32, 0) == hs
    assert hashes_per_block(hs, 64, 16) == [bytes([3]), bytes([7])]
    with pytest.raises(ValueError):
        hashes_per_block(hs, 48, 32)


def test_loadable_blocks_leaves_a_token_to_compute():
    assert loadable_blocks(2000, 32, 62) == 62
    assert loadable_blocks(64, 32, 2) == 1  # a prompt of exactly 2 blocks: the last one is computed
    assert loadable_blocks(65, 32, 2) == 2
    assert loadable_blocks(1, 32, 0) == 0
    assert loadable_blocks(2000, 32, 10) == 10


def test_leading_hits_counts_blocks_whose_every_part_exists():
    assert leading_hits([True, True, True, True], 2) == 2
    assert leading_hits([True, True, True, False, True, True], 2) == 1
    assert leading_hits([False, True, True, True], 2) == 0
    assert leading_hits([], 2) == 0


def test_health_leaves_the_store_alone_for_the_retry_interval():
    h = Health(10.0)
    assert h.usable(0.0)
    h.failed(5.0)
    assert not h.usable(5.0) and not h.usable(14.9)
    assert h.usable(15.0)
    h.failed(20.0)
    h.succeeded()
    assert h.usable(20.0)
    assert h.failures == 2


def _req(req_id, tokens, nblocks):
    return SimpleNamespace(request_id=req_id, num_tokens=tokens, block_hashes=[bytes([i]) * 4 for i in range(nblocks)])


def _new(req_id, block_ids, computed):
    return SimpleNamespace(req_id=req_id, block_ids=(block_ids,), num_computed_tokens=computed)


def _cached(entries, resumed=()):
    return SimpleNamespace(req_ids=[e[0] for e in entries], new_block_ids=[e[1] for e in entries],
                           num_computed_tokens=[e[2] for e in entries], resumed_req_ids=set(resumed))


def test_a_hit_is_loaded_into_the_blocks_after_the_local_hit_and_not_saved_again():
    p = StepPlanner(32)
    r = _req("a", 2000, 62)
    start, limit = p.lookup_range(r, 64)  # vLLM's own cache had 2 blocks
    assert (start, limit) == (2, 62)
    p.looked_up("a", start, limit, 60)
    assert p.cached_lookup("a", 2, 62) == 60
    assert p.cached_lookup("a", 0, 62) is None
    ids = list(range(100, 163))
    p.allocated(r, ids, 60 * 32)
    plan = p.step([_new("a", ids, 64 + 60 * 32)], _cached([]), {"a": 2000 - 64 - 60 * 32})
    assert len(plan.loads) == 1
    assert plan.loads[0].block_ids == ids[2:62]
    assert plan.loads[0].hashes == r.block_hashes[2:62]
    assert plan.saves == []  # the 62 full blocks were cached or loaded; the 63rd is not full
    assert p.step([], _cached([]), {}).loads == []  # a load is planned once


def test_saves_follow_the_blocks_each_step_fills():
    p = StepPlanner(32)
    r = _req("a", 100, 3)
    p.looked_up("a", 0, 3, 0)
    p.allocated(r, [7, 8, 9, 10], 0)
    plan = p.step([_new("a", [7, 8, 9, 10], 0)], _cached([]), {"a": 100})
    assert [(s.block_ids, s.hashes) for s in plan.saves] == [([7, 8, 9], r.block_hashes[:3])]
    # decoding: tokens 100..127 complete block 3 at 128 (vLLM appends its hash)
    r.block_hashes.append(b"\x03" * 4)
    r.num_tokens = 128
    plan = p.step([], _cached([("a", None, 100)]), {"a": 27})
    assert plan.saves == []  # 127 tokens computed: block 3 not full yet
    plan = p.step([], _cached([("a", ([11],), 127)]), {"a": 1})
    assert [(s.block_ids, s.hashes) for s in plan.saves] == [([10], [b"\x03" * 4])]
    p.finished("a")
    assert p.tracked == 0


def test_a_resumed_request_takes_its_new_block_list():
    p = StepPlanner(32)
    r = _req("a", 100, 3)
    p.allocated(r, [], 0)
    p.step([_new("a", [1, 2, 3, 4], 0)], _cached([]), {"a": 40})  # saves block 1
    plan = p.step([], _cached([("a", ([5, 6, 7, 8],), 32)], resumed=["a"]), {"a": 68})
    assert [s.block_ids for s in plan.saves] == [[6, 7]]


def test_roles_switch_loads_and_saves_off():
    p = StepPlanner(32, load=False, save=False)
    r = _req("a", 100, 3)
    p.looked_up("a", 0, 3, 3)
    p.allocated(r, [1, 2, 3, 4], 96)
    plan = p.step([_new("a", [1, 2, 3, 4], 0)], _cached([]), {"a": 100})
    assert plan.loads == [] and plan.saves == []


def test_external_tokens_without_a_lookup_is_a_bug_reported():
    p = StepPlanner(32)
    with pytest.raises(ValueError, match="without a lookup"):
        p.allocated(_req("x", 100, 3), [1, 2, 3], 64)
