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
old description back: drops are numbered, and a reply is kept only if no drop of its key (or of
everything) was numbered after its read was sent. Bounded: the oldest entries go. Every first
read learns (a batch of 128 keys learns all of them), so learning is kept cheap: a one-slice
location is kept as a tuple of plain values (no message object is kept, and the garbage collector
stops tracking it) and made an entry only when first used, and a batch takes the lock once. A
location the dummy looked up at the master itself (direct_reads.py) is read right away, so it is
made an entry at once (end_slices, end_many_slices).
Lookups take the lock only to replace or drop an entry. The age order is a deque of (key, entry
as kept) beside the dict, oldest first: the bound and expiry pop its head. The dict is never
walked from its start: CPython keeps a deleted entry's place until the table is rebuilt, so taking
the first key of a dict used as a queue walks over every entry deleted before it (11 us per entry
kept at 65,536 entries, measured).
"""
import threading
from collections import deque
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

#: drops remembered by key; past this many, every read then in flight is voided instead
MAX_DROPS_REMEMBERED = 4096
#: every this many entries kept, up to this many expired ones are dropped from the old end
PRUNE_EVERY = 32


class LocalSlice(NamedTuple):
    endpoint: str
    address: int
    length: int
    incarnation: int
    crc: int


class LocalEntry:
    """An object's location: the first slice's fields, and all slices when there are several.
    `size` is -1 when the message was malformed (no slice, an empty one)."""

    __slots__ = ("reuse_until", "deadline", "endpoint", "address", "length", "incarnation", "crc", "slices", "checksums", "size", "resolved", "origin")

    def __init__(self, endpoint, address, length, incarnation, crc, checksums, reuse_until, deadline, slices=None):
        self.endpoint, self.address, self.length, self.incarnation, self.crc = endpoint, address, length, incarnation, crc
        self.checksums = checksums
        self.reuse_until = reuse_until
        self.deadline = deadline
        #: every slice when there are several (None: the entry is the one slice)
        self.slices = slices
        if slices is None:
            self.size = length if length > 0 and endpoint else -1
        else:
            self.size = sum(x.length for x in slices) if all(x.length > 0 and x.endpoint for x in slices) else -1
        #: the reader's own cache of where each slice's grant is (local_reads.py), or None
        self.resolved = None
        #: the tuple it was decoded from (the cache's age order names that), or None
        self.origin = None

    @staticmethod
    def of(local, reuse_until: float, deadline: float) -> "LocalEntry":
        """The entry of a LocalReplica message (any number of slices)."""
        slices = local.slices
        if not slices:
            return LocalEntry("", 0, 0, 0, 0, local.checksums, reuse_until, deadline)
        all_ = tuple(LocalSlice(x.te_endpoint, x.address, x.length, x.incarnation, x.crc32c) for x in slices) if len(slices) > 1 else None
        s = slices[0]
        return LocalEntry(s.te_endpoint, s.address, s.length, s.incarnation, s.crc32c, local.checksums, reuse_until, deadline, all_)

    @staticmethod
    def of_slices(slices: Tuple[LocalSlice, ...], checksums: bool, reuse_until: float, deadline: float) -> "LocalEntry":
        """The entry of one or more LocalSlice values (a location looked up here)."""
        s = slices[0]
        return LocalEntry(s.endpoint, s.address, s.length, s.incarnation, s.crc, checksums, reuse_until, deadline, slices if len(slices) > 1 else None)

    def all_slices(self) -> Tuple[LocalSlice, ...]:
        return self.slices or (LocalSlice(self.endpoint, self.address, self.length, self.incarnation, self.crc),)


#: when reads were sent (one stamp serves a batch): (send time, drop number then)
Stamp = Tuple[float, int]


class LocalReadCache:
    def __init__(self, max_entries: int, now: Callable[[], float]):
        self.max_entries = max_entries
        self._now = now
        self._entries: Dict[str, Union[tuple, LocalEntry]] = {}
        #: key, entry as kept, key, entry...: oldest first (stale pairs are skipped)
        self._order: deque = deque()
        self._drops: Dict[str, int] = {}
        self._seq = 0
        self._floor = 0  # reads sent before this drop number keep nothing
        self._kept = 0  # entries kept so far (paces _prune)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, key: str) -> Optional[LocalEntry]:
        """The entry for `key` if it may still be used now (an expired one is dropped). A one-slice
        location is kept as a tuple of plain values (LocalEntry's arguments, which the garbage
        collector stops tracking) and made an entry here at its first use."""
        e = self._entries.get(key)
        if e is None:
            return None
        if e.__class__ is tuple:
            if self._now() >= e[6]:
                self._drop(key, e)
                return None
            decoded = LocalEntry(*e)
            decoded.origin = e
            with self._lock:
                if self._entries.get(key) is e:
                    self._entries[key] = decoded
            return decoded
        if self._now() < e.reuse_until:
            return e
        self._drop(key, e)
        return None

    def _drop(self, key: str, e) -> None:
        with self._lock:
            if self._entries.get(key) is e:
                del self._entries[key]

    def begin(self) -> Stamp:
        """Called right before reads are sent."""
        return (self._now(), self._seq)

    def end(self, key: str, stamp: Stamp, local) -> None:
        """The read of `key` sent at `stamp` was answered with `local` (a LocalReplica message).
        Kept unless a drop overtook the read, it is malformed or its lease is too short to be of use."""
        with self._lock:
            self._keep(key, stamp, local)

    def end_many(self, keys: Sequence[str], stamp: Stamp, locals_) -> None:
        """end() for a batch: `locals_[i]` (None: nothing) answers `keys[i]`."""
        now = self._now()  # one clock read for the batch: the reply came once
        keep = self._keep
        with self._lock:
            for key, local in zip(keys, locals_):
                if local is not None:
                    keep(key, stamp, local, now)

    def end_slices(self, key: str, stamp: Stamp, slices: Tuple[LocalSlice, ...], checksums: bool, lease_left_us: int) -> Optional[LocalEntry]:
        """end() for a location looked up here (direct_reads.py), at least one slice: the entry
        kept, made at once since it is read at once, or None (not kept: do not read through it)."""
        return self.end_many_slices((key,), stamp, ((slices, checksums, lease_left_us),))[0]

    def end_many_slices(self, keys: Sequence[str], stamp: Stamp, found) -> List[Optional[LocalEntry]]:
        """end_slices for a batch: `found[i]` is (slices, checksums, lease_left_us) for `keys[i]`,
        or None (nothing to keep); the lock is taken once."""
        out: List[Optional[LocalEntry]] = []
        now = self._now()  # one clock read for the batch: the reply came once
        admitted, insert = self._admitted, self._insert
        with self._lock:
            for key, f in zip(keys, found):
                e = None
                if f is not None:
                    slices, checksums, lease_left_us = f
                    sent_at, left = admitted(key, stamp, lease_left_us, now)
                    if left > 0:
                        e = LocalEntry.of_slices(slices, checksums, sent_at + left / 2, sent_at + left)
                        insert(key, e)
                out.append(e)
        return out

    def _admitted(self, key: str, stamp: Stamp, lease_left_us: int, now: Optional[float]) -> Tuple[float, float]:
        """(send time, lease seconds left) of a read's reply; seconds <= 0: keep nothing (a drop
        overtook the read, or the lease is too short to be of use)."""
        sent_at, seq = stamp
        if self.max_entries <= 0 or seq < self._floor or (self._drops and self._drops.get(key, -1) > seq):
            return sent_at, 0.0
        left = lease_left_us / 1e6
        if left <= 0 or (self._now() if now is None else now) >= sent_at + left / 2:
            return sent_at, 0.0
        return sent_at, left

    def _keep(self, key: str, stamp: Stamp, local, now: Optional[float] = None) -> None:
        sent_at, left = self._admitted(key, stamp, local.lease_left_us, now)
        if left <= 0:
            return
        reuse_until = sent_at + left / 2
        slices = local.slices
        if len(slices) == 1:
            s = slices[0]
            e = (s.te_endpoint, s.address, s.length, s.incarnation, s.crc32c, local.checksums, reuse_until, sent_at + left)
        else:
            e = LocalEntry.of(local, reuse_until, sent_at + left)
        self._insert(key, e)

    def _insert(self, key: str, e) -> None:
        entries = self._entries
        entries[key] = e  # a key kept again is young: its older pair in the order goes stale
        order = self._order
        order.append(key)
        order.append(e)
        while order and (len(entries) > self.max_entries or len(order) > 8 * self.max_entries):
            self._pop()
        self._kept += 1
        if self._kept % PRUNE_EVERY == 0:
            self._prune()

    def _pop(self) -> None:
        """Takes the oldest pair of the order, dropping its entry if it is still the key's."""
        order = self._order
        key = order.popleft()
        kept = order.popleft()
        if self._current(key, kept):
            del self._entries[key]

    def _current(self, key: str, kept) -> bool:
        """Whether `kept` (a pair of the order) is still `key`'s entry, decoded or not."""
        e = self._entries.get(key)
        return e is kept or (e is not None and e.__class__ is LocalEntry and e.origin is kept)

    def _prune(self) -> None:
        """Drops expired entries from the old end of the order (roughly the send order), a few at
        a time: what is never read again does not stay until the bound pushes it out."""
        now = self._now()
        order = self._order
        for _ in range(2 * PRUNE_EVERY):
            if not order:
                return
            kept = order[1]
            if now < (kept[6] if kept.__class__ is tuple else kept.reuse_until) and self._current(order[0], kept):
                return
            self._pop()

    def forget(self, key: str) -> None:
        """Drops `key`'s entry and voids the reads of it in flight."""
        with self._lock:
            self._forget(key)

    def forget_many(self, keys) -> None:
        """forget() for each of `keys` (a batch write), taking the lock once."""
        with self._lock:
            for key in keys:
                self._forget(key)

    def _forget(self, key: str) -> None:
        self._entries.pop(key, None)
        self._seq += 1
        if len(self._drops) >= MAX_DROPS_REMEMBERED:
            self._floor = self._seq
            self._drops.clear()
        else:
            self._drops[key] = self._seq

    def clear(self) -> None:
        """Drops every entry and voids every read in flight."""
        with self._lock:
            self._entries.clear()
            self._order.clear()
            self._seq += 1
            self._floor = self._seq
            self._drops.clear()
