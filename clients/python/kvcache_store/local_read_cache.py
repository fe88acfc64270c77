"""Where the objects this dummy client read lie in same-host memory, while it may use that.

The real client adds a LocalReplica to read replies (proto/store_client.proto): per slice the
serving engine, the range in its memory, the region's incarnation, the writer's CRC-32C, and the
read lease time it has left. An entry is reused until the dummy's own request's send time + half
of that time (the rule of the TypeScript client's replica cache: the master refuses to remove,
evict or overwrite a leased object, so the bytes stay the object's), and a copy through it must
end before send time + all of it. The send time is earlier than the real client's reply, so both
bounds are conservative without comparing clocks. Same rules as client/local-read-cache.ts.

The dummy's own writes and removals drop their keys' entries (remove_by_regex, remove_all and a
reconnection drop all). A read sent before such a drop and answered after it must not bring the
old description back: reads take a ticket when sent, and a drop of their key (or of everything)
meanwhile voids it. Bounded: the oldest entries go. Thread-safe: lookups take no lock.
"""
import threading
from typing import Callable, Dict, NamedTuple, Optional, Tuple


class LocalSlice(NamedTuple):
    endpoint: str
    address: int
    length: int
    incarnation: int
    crc: int


class LocalEntry:
    __slots__ = ("slices", "checksums", "size", "reuse_until", "deadline", "resolved")

    def __init__(self, slices: Tuple[LocalSlice, ...], checksums: bool, size: int, reuse_until: float, deadline: float):
        self.slices = slices
        self.checksums = checksums
        self.size = size
        self.reuse_until = reuse_until
        self.deadline = deadline
        #: the reader's own cache of where each slice's grant is (local_reads.py), or None
        self.resolved = None


class _Pending:
    __slots__ = ("n", "void")

    def __init__(self):
        self.n = 0
        self.void = False


class Ticket(NamedTuple):
    key: str
    sent_at: float
    epoch: int
    pending: _Pending


class LocalReadCache:
    def __init__(self, max_entries: int, now: Callable[[], float]):
        self.max_entries = max_entries
        self._now = now
        self._entries: Dict[str, LocalEntry] = {}
        self._pending: Dict[str, _Pending] = {}
        self._epoch = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, key: str) -> Optional[LocalEntry]:
        """The entry for `key` if it may still be used now (an expired one is dropped)."""
        e = self._entries.get(key)
        if e is None:
            return None
        if self._now() < e.reuse_until:
            return e
        with self._lock:
            if self._entries.get(key) is e:
                del self._entries[key]
        return None

    def begin(self, key: str) -> Ticket:
        """Called right before a read of `key` is sent."""
        with self._lock:
            p = self._pending.get(key)
            if p is None:
                p = self._pending[key] = _Pending()
            p.n += 1
            return Ticket(key, self._now(), self._epoch, p)

    def end(self, t: Ticket, local) -> None:
        """The read of `t` was answered with `local` (a LocalReplica message, or None: absent or
        failed). Keeps it unless a drop overtook the read, it is malformed or its lease is too
        short to be of use."""
        with self._lock:
            p = t.pending
            p.n -= 1
            if p.n == 0 and self._pending.get(t.key) is p:
                del self._pending[t.key]
            if local is None or p.void or t.epoch != self._epoch or self.max_entries <= 0:
                return
            left = local.lease_left_us / 1e6
            if left <= 0 or not local.slices:
                return
            slices = tuple(LocalSlice(s.te_endpoint, s.address, s.length, s.incarnation, s.crc32c) for s in local.slices)
            if any(s.length <= 0 or not s.endpoint for s in slices):
                return
            reuse_until = t.sent_at + left / 2
            if self._now() >= reuse_until:
                return
            entries = self._entries
            entries.pop(t.key, None)  # re-inserted: the dict's order is the age order
            entries[t.key] = LocalEntry(slices, bool(local.checksums), sum(s.length for s in slices), reuse_until, t.sent_at + left)
            if len(entries) > self.max_entries:
                del entries[next(iter(entries))]

    def forget(self, key: str) -> None:
        """Drops `key`'s entry and voids the reads of it in flight."""
        with self._lock:
            self._entries.pop(key, None)
            p = self._pending.pop(key, None)
            if p is not None:
                p.void = True

    def clear(self) -> None:
        """Drops every entry and voids every read in flight."""
        with self._lock:
            self._epoch += 1
            self._entries.clear()
            for p in self._pending.values():
                p.void = True
            self._pending.clear()
