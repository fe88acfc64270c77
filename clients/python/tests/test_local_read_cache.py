"""The dummy client's cache of same-host locations (kvcache_store/local_read_cache.py), on a fake
clock: reuse until send time + half the lease left, copies bounded by send time + all of it, drops
that overtake a read in flight, a bound on its size."""
from kvcache_store._proto import store_client_pb2 as pb
from kvcache_store.local_read_cache import LocalReadCache


def local(lease_ms, lengths=(4096,)):
    return pb.LocalReplica(
        slices=[pb.LocalSlice(te_endpoint="127.0.0.1:7000", address=(1 << 20) + i, length=n, incarnation=5, crc32c=i) for i, n in enumerate(lengths)],
        lease_left_us=int(lease_ms * 1000),
        checksums=True,
    )


class Clock:
    def __init__(self):
        self.t = 1.0

    def __call__(self):
        return self.t


def make(max_entries=10):
    clock = Clock()
    return clock, LocalReadCache(max_entries, clock)


def test_reuse_until_send_time_plus_half_the_lease_and_copies_until_all_of_it():
    clock, c = make()
    t = c.begin()  # sent at 1.0
    clock.t = 1.3  # the reply comes later: the lease time counts from our send time
    c.end("k", t, local(2000, (100, 28)))
    e = c.lookup("k")
    assert (e.size, e.reuse_until, e.deadline, e.checksums) == (128, 2.0, 3.0, True)
    assert [s.length for s in e.all_slices()] == [100, 28]
    clock.t = 1.999
    assert c.lookup("k") is e
    clock.t = 2.0
    assert c.lookup("k") is None and len(c) == 0


def test_nothing_is_kept_from_no_location_or_a_lease_half_gone_and_a_malformed_one_does_not_decode():
    clock, c = make()
    c.end_many(["none"], c.begin(), [None])
    c.end("zero", c.begin(), local(0))
    late = c.begin()
    clock.t += 0.6  # half of its 1 s lease passed before the reply came
    c.end("late", late, local(1000))
    assert len(c) == 0
    c.end("empty", c.begin(), local(1000, ()))
    c.end("bad", c.begin(), local(1000, (4096, 0)))
    assert c.lookup("empty").size == -1 and c.lookup("bad").size == -1  # decoded at their first use


def test_a_drop_while_a_read_is_in_flight_voids_that_read():
    _, c = make()
    before = c.begin()
    c.forget("k")  # our own write or removal of k
    after = c.begin()
    c.end("k", before, local(1000))
    assert c.lookup("k") is None
    c.end("k", after, local(1000))  # sent after the drop: kept
    assert c.lookup("k") is not None


def test_clear_drops_everything_and_voids_reads_in_flight():
    _, c = make()
    c.end("a", c.begin(), local(1000))
    in_flight = c.begin()
    c.clear()
    c.end("b", in_flight, local(1000))
    assert c.lookup("a") is None and c.lookup("b") is None
    c.end("b", c.begin(), local(1000))
    assert c.lookup("b") is not None


def test_bounded_oldest_first_and_zero_keeps_nothing():
    _, c = make(2)
    for k in "abc":
        c.end(k, c.begin(), local(1000))
    assert [c.lookup(k) is not None for k in "abc"] == [False, True, True]
    _, none = make(0)
    none.end("a", none.begin(), local(1000))
    assert len(none) == 0


def test_expired_entries_go_from_the_old_end_as_new_ones_come():
    clock, c = make(1000)
    for i in range(64):
        c.end(f"old-{i}", c.begin(), local(1000))
    clock.t += 0.6  # past their reuse (half of 1 s)
    for i in range(64):
        c.end(f"new-{i}", c.begin(), local(1000))
    assert len(c) == 64  # each 32 kept, up to 32 expired ones went
    assert c.lookup("new-0") is not None


def test_a_key_kept_again_counts_as_young_and_the_bound_drops_older_keys_first():
    _, c = make(3)
    for k in "abacd":
        c.end(k, c.begin(), local(1000))
    assert [c.lookup(k) is not None for k in "abcd"] == [True, False, True, True]
    assert len(c) == 3


def test_decoded_entries_still_leave_by_age_and_dropped_ones_free_their_place():
    clock, c = make(3)
    for k in "abc":
        c.end(k, c.begin(), local(1000))
    assert c.lookup("a") is not None  # decoded at its first use: still the oldest
    c.end("d", c.begin(), local(1000))
    assert [c.lookup(k) is not None for k in "abcd"] == [False, True, True, True]
    c.forget("c")
    c.end("e", c.begin(), local(1000))
    assert [c.lookup(k) is not None for k in "bde"] == [True, True, True] and len(c) == 3
    clock.t += 0.6
    for i in range(32):
        c.end(f"n{i}", c.begin(), local(1000))
    assert len(c) == 3 and c.lookup("n31") is not None


def test_many_entries_keep_their_fields():
    _, c = make(5000)
    for i in range(3000):
        c.end(f"k{i}", c.begin(), pb.LocalReplica(slices=[pb.LocalSlice(te_endpoint="127.0.0.1:7000", address=i * 8192, length=4096, incarnation=i, crc32c=i)], lease_left_us=10**6))
    assert len(c) == 3000
    for i in (0, 1, 2047, 2999):
        e = c.lookup(f"k{i}")
        assert (e.address, e.length, e.incarnation, e.crc, e.size) == (i * 8192, 4096, i, i, 4096)


def test_forget_many_drops_each_key_and_voids_its_reads_in_flight():
    _, c = make()
    for k in "ab":
        c.end(k, c.begin(), local(1000))
    in_flight = c.begin()
    c.forget_many(["a", "c"])  # a batch write of a and c
    c.end_many(["c", "d"], in_flight, [local(1000), local(1000)])
    assert [c.lookup(k) is not None for k in "abcd"] == [False, True, False, True]
