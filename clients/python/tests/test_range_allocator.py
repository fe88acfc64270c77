"""The first-fit range allocator (pure)."""
import random

import pytest

from kvcache_store.range_allocator import RangeAllocator


def test_allocations_are_aligned_disjoint_and_merge_back():
    a = RangeAllocator(64 * 4096)
    offs = [a.allocate(n) for n in (1, 4096, 4097, 10000)]
    assert offs == [0, 4096, 8192, 16384]
    assert a.free_bytes == (64 - 1 - 1 - 2 - 3) * 4096
    for o in offs:
        a.free(o)
    assert a.free_bytes == 64 * 4096
    assert a.allocate(64 * 4096) == 0  # everything merged into one range again


def test_full_region_returns_none_and_double_free_raises():
    a = RangeAllocator(4 * 4096)
    assert a.allocate(4 * 4096) == 0
    assert a.allocate(1) is None
    a.free(0)
    with pytest.raises(KeyError):
        a.free(0)


def test_random_workload_keeps_ranges_disjoint():
    rng = random.Random(7)
    a = RangeAllocator(256 * 4096)
    live = {}
    for _ in range(5000):
        if live and rng.random() < 0.5:
            o = rng.choice(list(live))
            a.free(o)
            del live[o]
        else:
            n = rng.randint(1, 20000)
            o = a.allocate(n)
            if o is not None:
                live[o] = a.rounded(n)
        spans = sorted(live.items())
        for (o1, n1), (o2, _) in zip(spans, spans[1:]):
            assert o1 + n1 <= o2
        assert a.free_bytes == 256 * 4096 - sum(live.values())
