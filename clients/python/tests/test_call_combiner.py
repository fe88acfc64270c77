"""Single calls of many threads at once made in batch calls (kvcache_store/call_combiner.py):
the combiner on its own, with a single call held until others have queued (so the batch they
form is known), and a DummyClient used by many threads against real processes: every value put
and read bit-exact, a missing key its own error, an existing key its own answer, the same key
read by several threads at once."""
import os
import threading

import pytest
from in_threads import in_threads

from kvcache_store import ObjectExistsError, ObjectNotFoundError
from kvcache_store import errors as E
from kvcache_store.call_combiner import CallCombiner


class Held:
    """A combiner whose single call of key "first" waits until `n` more calls have queued."""

    def __init__(self, n: int, many=None):
        self.batches = []
        self.groups = []
        self.queued = threading.Semaphore(0)
        self.n = n
        self.c = CallCombiner(lambda k, a, g: self.one(k, a), lambda ks, a, g: self.groups.append(g) or (many or self.many)(ks, a))

    def one(self, key, target):
        if key == "first":
            for _ in range(self.n):
                self.queued.acquire()
            while len(self.c._queue) < self.n:  # they announce themselves just before queueing
                threading.Event().wait(0.001)
        if key.startswith("bad"):
            raise ObjectNotFoundError(f"{key} not found")
        return len(key)

    def many(self, keys, targets):
        self.batches.append(list(keys))
        return [len(k) if not k.startswith("missing") else E.OBJECT_NOT_FOUND for k in keys]

    def read(self, key, out, group=None):
        if key != "first":
            self.queued.release()
        try:
            out.append((key, self.c.call(key, None, group)))
        except RuntimeError as e:  # the leader of a call that raised: raised in its thread
            out.append((key, e))


def run(h: Held, keys, groups=None) -> list:
    """Results as (key, result), the held call "first" leading while `keys` queue behind it."""
    out = []
    first = threading.Thread(target=h.read, args=("first", out))
    first.start()
    while not h.c._leading:
        threading.Event().wait(0.001)
    others = [threading.Thread(target=h.read, args=(k, out, (groups or {}).get(k))) for k in keys]
    for t in others:
        t.start()
    for t in [first, *others]:
        t.join(10)
        assert not t.is_alive()
    return out


def test_reads_queued_behind_a_call_go_in_one_batch_each_with_its_own_result():
    h = Held(4)
    out = dict(run(h, ["a", "bb", "missing-1", "dddd"]))
    assert out == {"first": 5, "a": 1, "bb": 2, "missing-1": E.OBJECT_NOT_FOUND, "dddd": 4}
    assert [sorted(b) for b in h.batches] == [sorted(["a", "bb", "missing-1", "dddd"])]
    assert (h.c.calls, h.c.batched) == (2, 4)
    assert not h.c._leading and h.c._queue == []
    # alone again: the single way
    assert h.c.call("alone", None) == 5 and len(h.batches) == 1


def test_a_key_read_by_several_threads_at_once_is_never_twice_in_one_call():
    h = Held(4)
    out = run(h, ["k", "k", "k", "other"])
    assert sorted(out) == sorted([("first", 5), ("k", 1), ("k", 1), ("k", 1), ("other", 5)])
    assert h.batches and all(len(b) == len(set(b)) for b in h.batches)


def test_calls_of_different_groups_never_share_a_batch():
    one, other = object(), object()  # two ReplicateConfigs
    h = Held(5)
    out = dict(run(h, ["a1", "a2", "b1", "b2", "a3"], {"a1": one, "a2": one, "a3": one, "b1": other, "b2": other}))
    assert out == {"first": 5, "a1": 2, "a2": 2, "a3": 2, "b1": 2, "b2": 2}
    assert sorted(len(b) for b in h.batches) == [2, 3]
    for b, g in zip(h.batches, h.groups):
        assert all((k[0] == "a") == (g is one) for k in b)


def test_a_single_read_that_raises_returns_its_error_and_hands_on():
    h = Held(0)
    r = h.c.call("bad-key", None)
    assert isinstance(r, ObjectNotFoundError)
    assert h.c.call("good", None) == 4 and not h.c._leading


def test_a_batch_call_that_raises_gives_every_read_in_it_the_error_and_the_next_reads_still_run():
    def many(keys, targets):
        raise RuntimeError("the real client went away")

    h = Held(3, many)
    out = dict(run(h, ["x", "y", "z"]))
    assert out["first"] == 5
    # the thread that made the call raises what it raised; the others get an error of their own
    raised = [k for k in "xyz" if isinstance(out[k], RuntimeError)]
    assert len(raised) == 1
    for k in set("xyz") - set(raised):
        assert isinstance(out[k], E.StoreError) and out[k].code == E.INTERNAL_ERROR and out[k] is not out[raised[0]]
    assert not h.c._leading and h.c._queue == []
    assert h.c.call("after", None) == 5


def test_many_threads_first_reads_bit_exact_missing_keys_their_own_error(make_client, key):
    writer = make_client(raise_errors=True)
    c = make_client()
    strict = make_client(raise_errors=True)
    values = {f"{key}-{i}": os.urandom((4096, 65536, 300_000)[i % 3]) for i in range(96)}
    for k, v in values.items():
        writer.put(k, v)

    def worker(t, client):
        for i in range(t, 96, 16):
            k = f"{key}-{i}"
            size = len(values[k])
            with client.alloc_buffer(size) as lease:
                assert client.get_into(k, lease.ptr, size) == size
                assert bytes(lease.buffer) == values[k]
                # the same key again, and one nobody wrote
                assert client.get_into(k, lease.ptr, size) == size
                if client is c:
                    assert client.get_into(f"{k}-missing", lease.ptr, size) == E.OBJECT_NOT_FOUND
                else:
                    with pytest.raises(ObjectNotFoundError):
                        client.get_into(f"{k}-missing", lease.ptr, size)

    assert in_threads(worker, [(t, c if t % 2 else strict) for t in range(16)]) == []
    for client in (c, strict):
        s = client.stats()
        assert s["pool"]["leases"] == 0
        assert s["combined_reads"]["calls"] > 0


def test_many_threads_puts_stored_bit_exact_an_existing_key_its_own_answer(make_client, key):
    c = make_client()
    strict = make_client(raise_errors=True)
    reader = make_client(raise_errors=True, combine_calls=False)
    values = {f"{key}-{i}": os.urandom((4096, 65536, 300_000)[i % 3]) for i in range(96)}
    reader.put(f"{key}-taken", b"first value")

    def worker(t, client):
        for i in range(t, 96, 16):
            k = f"{key}-{i}"
            v = values[k]
            with client.alloc_buffer(len(v)) as lease:
                lease.buffer[:] = v
                assert client.put_from(k, lease.ptr, len(v)) == 0
                if client is c:
                    assert client.put_from(f"{key}-taken", lease.ptr, 11) == 0  # as in Mooncake: it exists
                else:
                    with pytest.raises(ObjectExistsError):
                        client.put_from(f"{key}-taken", lease.ptr, 11)
            # memory outside the shared regions: the single way
            assert client.put(f"{k}-bytes", v) == 0

    assert in_threads(worker, [(t, c if t % 2 else strict) for t in range(16)]) == []
    for k, v in values.items():
        assert reader.get(k) == v and reader.get(f"{k}-bytes") == v
    assert reader.get(f"{key}-taken") == b"first value"
    for client in (c, strict):
        s = client.stats()
        assert s["pool"]["leases"] == 0
        assert s["combined_puts"]["calls"] > 0


def test_combining_turned_off(make_client):
    s = make_client(combine_calls=False).stats()
    assert s["combined_reads"] == {} and s["combined_puts"] == {}
