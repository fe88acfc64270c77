"""Copy and move tasks through the Python DummyClient (docs/tiers.md "Copy and move tasks"): the
store service forwards them to the master, which has a store service make the copy. A second
store service (its own segment) is the target; the master's log line says when a task ended."""
import re

import pytest

from cluster import StoreService
from kvcache_store import errors as E
from kvcache_store import ReplicateConfig


@pytest.fixture(scope="module")
def second(master, shm_dir):
    s = StoreService(master, shm_dir, segment="64MB")
    yield s
    s.stop()


def _segment(s: StoreService) -> str:
    """The service's (first) segment name: its ready line lists `name(<size>B)`."""
    return s.segments.split(",")[0].split("(")[0]


def _finished(master, task_id: int) -> str:
    m = master.wait_for(re.compile(rf'task {task_id} \((?:copy|move) of "[^"]*"\) (succeeded|failed: \w+)'))
    return m.group(1)


def test_copy_then_move_through_the_dummy_client(client, rclient, service, second, master, key):
    here, there = _segment(service), _segment(second)
    value = bytes(range(256)) * 4099
    assert client.put(key, value, ReplicateConfig(replica_num=1, preferred_segment=here)) == 0

    task_id = client.create_copy_task(key, [there])
    assert task_id > 0
    assert _finished(master, task_id) == "succeeded"
    t = rclient.query_task(task_id)
    assert (t["id"], t["kind"], t["key"], t["state"], t["error_code"], t["targets"], t["source"]) == (task_id, "copy", key, "success", 0, [there], "")
    assert t["attempts"] >= 1 and t["created_at"] <= t["updated_at"]
    segs = sorted(r["handles"][0]["segment_name"] for r in rclient.query_by_regex(f"^{re.escape(key)}$")[key])
    assert segs == sorted([here, there])
    assert client.get(key) == value

    # `there` holds a replica now: a move to it is refused
    assert client.create_move_task(key, here, there) == E.REPLICA_ALREADY_ON_SEGMENT


def test_move_and_bad_requests(client, rclient, service, second, master, key):
    here, there = _segment(service), _segment(second)
    value = b"m" * 70_001
    assert client.put(key, value, ReplicateConfig(replica_num=1, preferred_segment=here)) == 0
    task_id = client.create_move_task(key, here, there)
    assert task_id > 0
    assert _finished(master, task_id) == "succeeded"
    assert rclient.query_task(task_id)["state"] == "success"
    replicas = rclient.query_by_regex(f"^{re.escape(key)}$")[key]
    assert [r["handles"][0]["segment_name"] for r in replicas] == [there]
    assert client.get(key) == value

    assert client.create_copy_task(f"{key}-absent", [there]) == E.OBJECT_NOT_FOUND
    assert client.create_copy_task(key, ["no-such-segment"]) == E.SEGMENT_NOT_FOUND
    assert client.create_copy_task(key, []) == E.INVALID_PARAMS
    assert client.create_copy_task(key, there) == E.INVALID_PARAMS  # one string, not a list of names
    assert client.create_move_task(key, here, there) == E.NO_REPLICA_ON_SEGMENT
    with pytest.raises(E.StoreError) as err:
        rclient.query_task(987654321)
    assert err.value.code == E.TASK_NOT_FOUND
    with pytest.raises(E.ObjectNotFoundError):
        rclient.create_copy_task(f"{key}-absent", [there])


def test_batch_puts_place_every_item_by_the_config_and_a_failing_item_fails_alone(rclient, service, second, key):
    there = _segment(second)
    keys = [f"{key}-{i}" for i in range(5)]
    assert rclient.put(keys[2], b"first", ReplicateConfig(preferred_segment=_segment(service))) == 0
    values = [bytes([i]) * (1000 + i) for i in range(5)]
    with rclient.alloc_buffer(sum(len(v) for v in values)) as lease:
        ptrs, at = [], 0
        for v in values:
            lease.buffer[at:at + len(v)] = v
            ptrs.append(lease.ptr + at)
            at += len(v)
        codes = rclient.batch_put_from(keys, ptrs, [len(v) for v in values], ReplicateConfig(preferred_segment=there))
    assert codes == [0, 0, E.OBJECT_ALREADY_EXISTS, 0, 0]
    placed = rclient.query_by_regex(f"^{re.escape(key)}-")
    for i, k in enumerate(keys):
        assert [r["handles"][0]["segment_name"] for r in placed[k]] == ([_segment(service)] if i == 2 else [there])
    assert rclient.batch_get(keys) == values[:2] + [b"first"] + values[3:]
    assert rclient.batch_put([f"{key}-b0", f"{key}-b1"], [b"x", b"y"], ReplicateConfig(preferred_segment=there)) == [0, 0]
    assert {r["handles"][0]["segment_name"] for k in (f"{key}-b0", f"{key}-b1") for r in rclient.query_by_regex(f"^{re.escape(k)}$")[k]} == {there}
