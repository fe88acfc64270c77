"""Keys of SGLang HiCache pages: the fingerprint separates every format difference, MLA is shared
across tensor-parallel ranks, parts follow the host pool's buffer order."""
import dataclasses

import pytest

from kvcache_store.sglang_keys import MHA, MLA, PageFormat, flat_key, leading, model_label, page_keys, pages_ok, part_names

BASE = PageFormat(model="org/tiny-llama", kind=MHA, dtype="torch.bfloat16", page_size=16, layout="page_first", layer_num=3, geometry=(2, 16, 16), tp_rank=0, tp_size=2)


@pytest.mark.parametrize(
    "change",
    [
        {"model": "org/other"},
        {"dtype": "torch.float16"},
        {"page_size": 32},
        {"layout": "page_first_direct"},
        {"layer_num": 4},
        {"geometry": (4, 16, 16)},
        {"tp_rank": 1},
        {"tp_size": 4},
        {"pp_rank": 1, "pp_size": 2},
        {"cp_rank": 1, "cp_size": 2},
        {"namespace": "staging"},
        {"kind": MLA, "geometry": (48,)},
    ],
)
def test_every_format_difference_changes_the_prefix(change):
    assert dataclasses.replace(BASE, **change).prefix() != BASE.prefix()


def test_mla_pages_are_shared_by_tensor_parallel_ranks():
    mla = dataclasses.replace(BASE, kind=MLA, geometry=(48,))
    assert dataclasses.replace(mla, tp_rank=1).prefix() == mla.prefix()
    assert dataclasses.replace(mla, tp_size=4, tp_rank=3).prefix() == mla.prefix()


def test_prefix_is_readable_and_stable():
    p = BASE.prefix()
    assert p.startswith("sglang/org-tiny-llama/") and len(p.split("/")[2]) == 16
    assert p == dataclasses.replace(BASE).prefix()
    assert model_label("") == "model" and model_label("/a b/c") == "a-b-c"


def test_part_names_follow_the_pool_buffer_order():
    assert part_names(MHA, "page_first", 2, 3) == ["k", "v"]
    assert part_names(MHA, "layer_first", 6, 3) == ["k0", "v0", "k1", "v1", "k2", "v2"]
    assert part_names(MLA, "page_first_direct", 1, 3) == ["kv"]
    assert part_names(MLA, "layer_first", 3, 3) == ["kv0", "kv1", "kv2"]
    with pytest.raises(ValueError):
        part_names(MHA, "page_first_kv_split", 4, 3)
    with pytest.raises(ValueError):
        PageFormat(model="m", kind="gqa", dtype="d", page_size=1, layout="l", layer_num=1, geometry=())
    with pytest.raises(ValueError):
        dataclasses.replace(BASE, tp_rank=2)


def test_keys_and_page_results():
    assert page_keys("p", ["h1", "h2"], ["k", "v"]) == ["p/h1/k", "p/h1/v", "p/h2/k", "p/h2/v"]
    assert flat_key("p", "h1") == "p/h1/flat"
    assert pages_ok([True, True, True, False, True, True], 2) == [True, False, True]
    assert leading([True, False, True]) == 1 and leading([]) == 0 and leading([True, True]) == 2
