"""Breaker: while the store is unreachable, calls are skipped for a doubling backoff; a success
closes it. Time is a fake clock."""
import pytest

from kvcache_store.breaker import Breaker


def test_backoff_doubles_to_the_cap_and_a_success_closes():
    now = [100.0]
    b = Breaker(base=1.0, cap=4.0, clock=lambda: now[0])
    assert b.allow()
    b.failed()
    assert not b.allow() and b.open
    now[0] += 1.0
    assert b.allow()  # the probe after the backoff
    b.failed()  # 2 s
    now[0] += 1.9
    assert not b.allow()
    now[0] += 0.1
    assert b.allow()
    b.failed()  # 4 s
    b.failed()  # capped at 4 s
    now[0] += 3.9
    assert not b.allow()
    now[0] += 0.1
    assert b.allow()
    b.succeeded()
    b.failed()  # back to the base
    now[0] += 1.0
    assert b.allow()
    assert b.skipped == 3 and b.trips == 5


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError):
        Breaker(base=0)
    with pytest.raises(ValueError):
        Breaker(base=2, cap=1)
