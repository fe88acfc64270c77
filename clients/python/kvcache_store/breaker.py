"""A circuit breaker for a cache whose store may be down: after a failure that says the store is
unreachable, calls are skipped (answered as a miss at once) for a backoff that doubles from `base`
up to `cap` seconds; the first call after it is let through as a probe, and one success closes the
breaker. An engine thus pays at most one deadline per backoff while the store is down, instead of
one per request.

Time is a parameter (`clock`), so the logic is tested without waiting.
"""
import threading
import time
from typing import Callable


class Breaker:
    def __init__(self, base: float = 0.5, cap: float = 10.0, clock: Callable[[], float] = time.monotonic):
        if not (0 < base <= cap):
            raise ValueError(f"Breaker: need 0 < base <= cap, got base={base!r} cap={cap!r}")
        self.base = base
        self.cap = cap
        self._clock = clock
        self._lock = threading.Lock()
        self._open_until = 0.0
        self._backoff = 0.0
        self.skipped = 0
        self.trips = 0

    @property
    def open(self) -> bool:
        """True while calls are being skipped."""
        return self._clock() < self._open_until

    def allow(self) -> bool:
        """Whether a call may go to the store now (False: answer it as a miss)."""
        with self._lock:
            if self._clock() < self._open_until:
                self.skipped += 1
                return False
            return True

    def failed(self) -> None:
        """The store was unreachable (or missed a deadline): skip calls for the next backoff."""
        with self._lock:
            self._backoff = self.base if self._backoff == 0 else min(self.cap, self._backoff * 2)
            self._open_until = self._clock() + self._backoff
            self.trips += 1

    def succeeded(self) -> None:
        with self._lock:
            self._backoff = 0.0
            self._open_until = 0.0
