"""A dummy client's own reads of same-host memory: a repeated read of an object whose location the
real client described (local_read_cache.py, while the real client's read lease holds) copies the
bytes straight out of the serving engine's memory, mapped read-only through that engine's
same-host control socket (shm_grant.py), with no message to the real client.

Each copy is checked: the engine's region generation and the grant's incarnation before it, every
slice's CRC-32C after it (when the writer recorded them: checksums on), the engine alive and the
lease still held when it ended. Any failure drops the entry and the caller reads through the real
client: never wrong bytes, never an error the usual way would not give. An engine that will not
share its memory with us (another network namespace, a uid it refuses fds, another cluster
secret) is left alone for a while.

Python's share of a 4 KiB read is what matters here: a dict lookup, memoryview slices (no bytes
objects), one memmove and one CRC pass, both in C. CRC-32C is google-crc32c's C extension; it
takes only buffers without a release hook (bytes, ctypes arrays), so the copy's bytes are handed
to it as a ctypes array over their address rather than copied into a bytes object (0.36 us
against 0.31 us with the copy at 4 KiB, 2.3 us against 4.0 at 64 KiB: docs/client.md). Without
the C extension (its pure-Python fallback is far too slow) objects whose CRCs were recorded are
read through the real client.
"""
import ctypes
import threading
import time
from typing import Dict, List, Optional

import google_crc32c

from .errors import StoreError
from .local_read_cache import LocalEntry, LocalReadCache, Stamp
from .shm_grant import ShmPeer, watch_hangup
from .values import Buf

_now = time.monotonic
_crc_value = google_crc32c.value
#: CRCs checkable here at memory speed (else entries with recorded CRCs are not used)
CRC_IN_C = google_crc32c.implementation == "c"
_c_char = ctypes.c_char
_addressof = ctypes.addressof


def crc32c_at(address: int, n: int) -> int:
    """CRC-32C of the n bytes at `address` (memory this process holds), with no copy."""
    return _crc_value((_c_char * n).from_address(address))


def address_of(view: memoryview) -> int:
    """Address of a writable byte view's first byte."""
    return _addressof(_c_char.from_buffer(view))
#: Entries kept by default (a few hundred bytes each).
DEFAULT_LOCAL_READ_ENTRIES = 65536
#: An engine whose memory could not be reached is not tried again for this long (seconds).
UNREACHABLE_FOR = 30.0


class LocalReads:
    def __init__(self, secret: Optional[bytes], max_entries: int, locate, max_bytes: int):
        self.cache = LocalReadCache(max_entries, _now)
        #: reads served here, and reads that had an entry but went through the real client (the
        #: entry failed a check). Counted without a lock: under threads an increment may rarely be lost.
        self.hits = 0
        #: the bytes those reads copied
        self.hit_bytes = 0
        self.fallbacks = 0
        #: objects above this size are read through the real client (its copy is one fused pass
        #: on the engine's threads; here it is a copy and a CRC pass under the GIL)
        self.max_bytes = max_bytes
        self._secret = secret
        self._locate = locate
        self._peers: Dict[str, ShmPeer] = {}
        self._unreachable: Dict[str, float] = {}
        self._lock = threading.Lock()
        self._closed = False

    def stats(self) -> dict:
        return {"hits": self.hits, "bytes": self.hit_bytes, "fallbacks": self.fallbacks, "entries": len(self.cache)}

    # ------------------------------------------------------------------ learning

    def begin(self) -> Stamp:
        """Reads are about to be sent to the real client."""
        return self.cache.begin()

    def end(self, key: str, stamp: Stamp, reply) -> None:
        """The reply to the read of `key` sent at `stamp` came (a message with an optional `local`)."""
        if reply.HasField("local") and not self._closed:
            self.cache.end(key, stamp, reply.local)

    def end_many(self, keys, stamp: Stamp, results) -> None:
        """end() for a batch's per-key results (ItemResult messages, in key order)."""
        if not self._closed:
            self.cache.end_many(keys, stamp, [r.local if r.HasField("local") else None for r in results])

    def _usable(self, e: LocalEntry) -> bool:
        """Whether this client may read an entry here (checked until it is first resolved)."""
        if e.size < 0 or e.size > self.max_bytes or (e.checksums and not CRC_IN_C):
            return False
        if self._unreachable:
            now = _now()
            for s in e.all_slices():
                until = self._unreachable.get(s.endpoint)
                if until is not None:
                    if now < until:
                        return False
                    self._unreachable.pop(s.endpoint, None)
        return True

    # ------------------------------------------------------------------ reading

    def _entry(self, key: str) -> Optional[LocalEntry]:
        """The cached entry of `key` this client may read here, or None."""
        e = self.cache.lookup(key)
        return e if e is not None and self._fresh_usable(key, e) else None

    def _fresh_usable(self, key: str, e: LocalEntry) -> bool:
        """_usable for an entry not yet resolved (one that is not is dropped)."""
        if e.resolved is None and not self._usable(e):
            self.cache.forget(key)
            return False
        return True

    def read_into(self, key: str, target: Buf) -> Optional[int]:
        """Reads `key` into `target` here when a cached entry allows: the size, or None (no usable
        entry, or the read failed a check and its entry is dropped): read it the usual way."""
        e = self._entry(key)
        return None if e is None else self._read_into(key, e, target)

    def read_entry_into(self, key: str, e: LocalEntry, target: Buf) -> Optional[int]:
        """read_into through an entry just kept (a lookup made here: direct_reads.py)."""
        return self._read_into(key, e, target) if self._fresh_usable(key, e) else None

    def _read_into(self, key: str, e: LocalEntry, target: Buf) -> Optional[int]:
        if target.size < e.size:
            return None
        dst = self._dest(target, e.size)
        if dst is None:
            return None
        return self._copy(key, e, dst, target.address)

    def read_bytes(self, key: str) -> Optional[bytes]:
        """The value of `key` read here, or None (as read_into)."""
        e = self._entry(key)
        return None if e is None else self._read_bytes(key, e)

    def read_entry_bytes(self, key: str, e: LocalEntry) -> Optional[bytes]:
        """read_bytes through an entry just kept (as read_entry_into)."""
        return self._read_bytes(key, e) if self._fresh_usable(key, e) else None

    def _read_bytes(self, key: str, e: LocalEntry) -> Optional[bytes]:
        srcs = self._sources(key, e)
        if srcs is None:
            return None
        out = bytes(srcs[0][2]) if len(srcs) == 1 else b"".join(src for _, _, src, _ in srcs)
        if not self._check(e, srcs, out, None):
            return self._failed(key)
        self.hits += 1
        self.hit_bytes += len(out)
        return out

    def _copy(self, key: str, e: LocalEntry, dst: memoryview, address: Optional[int]) -> Optional[int]:
        srcs = self._sources(key, e)
        if srcs is None:
            return None
        if len(srcs) == 1:
            dst[:] = srcs[0][2]
        else:
            at = 0
            for _, _, src, s in srcs:
                dst[at:at + s.length] = src
                at += s.length
        if not self._check(e, srcs, dst, address):
            return self._failed(key)
        self.hits += 1
        self.hit_bytes += e.size
        return e.size

    def _check(self, e: LocalEntry, srcs, out, address: Optional[int]) -> bool:
        """After the copy into `out` (a writable view at `address`, or a bytes object: address
        None): CRCs, grants still current, engines alive, lease held."""
        if e.checksums:
            if isinstance(out, bytes):
                if len(srcs) == 1:
                    if _crc_value(out) != srcs[0][3].crc:
                        return False
                else:
                    at = 0
                    for _, _, _, s in srcs:
                        if _crc_value(out[at:at + s.length]) != s.crc:
                            return False
                        at += s.length
            else:
                at = address if address is not None else address_of(out)
                for _, _, _, s in srcs:
                    if crc32c_at(at, s.length) != s.crc:
                        return False
                    at += s.length
        for peer, g, _, _ in srcs:
            if not peer.alive or peer.generation() != g.generation:
                return False
        return _now() < e.deadline

    def _sources(self, key: str, e: LocalEntry):
        """Per slice (engine, grant, source view, slice), resolved once per entry and checked
        current before each copy; None (entry dropped) when a slice cannot be read here."""
        srcs = e.resolved
        if srcs is not None:
            for peer, g, _, _ in srcs:
                if not peer.alive or peer.generation() != g.generation:
                    return self._failed(key)
            return srcs
        out: List[tuple] = []
        try:
            for s in e.all_slices():
                peer = self._peer(s.endpoint)
                g = peer.grant(s.address, s.length)
                if s.incarnation and g.incarnation != s.incarnation:
                    return self._failed(key)
                at = s.address - g.start
                out.append((peer, g, g.view[at:at + s.length], s))
        except StoreError:
            self._unreachable[s.endpoint] = _now() + UNREACHABLE_FOR
            return self._failed(key)
        e.resolved = out
        return out

    def peer(self, endpoint: str) -> ShmPeer:
        """The engine's control connection (opened if need be); a dummy's own puts write through it too."""
        return self._peer(endpoint)

    def _peer(self, endpoint: str) -> ShmPeer:
        p = self._peers.get(endpoint)
        if p is not None and p.alive:
            return p
        with self._lock:
            p = self._peers.get(endpoint)
            if p is None or not p.alive:
                if p is not None:
                    p.close()
                if self._closed:
                    raise StoreError(0, "closed")
                p = self._peers[endpoint] = ShmPeer(endpoint, self._secret)
            return p

    def _dest(self, target: Buf, size: int) -> Optional[memoryview]:
        """A writable byte view of the target's first `size` bytes."""
        v = target.view
        if v is not None:
            return v if v.nbytes == size else v[:size]
        loc = self._locate(target.address, size)
        if loc is not None:
            region, offset = loc
            rv = getattr(region, "view", None)
            if rv is not None:
                return rv[offset:offset + size]
        return memoryview((ctypes.c_char * size).from_address(target.address)).cast("B")

    def _failed(self, key: str) -> None:
        self.cache.forget(key)
        self.fallbacks += 1
        return None

    # ------------------------------------------------------------------ end

    def clear(self) -> None:
        """Drops every entry (a restarted real client: its leases are gone)."""
        self.cache.clear()

    def watch(self, connection_fd: int) -> None:
        """Drops every entry as soon as this connection to the real client ends (the next one may
        be to a restarted real client): no call needs to notice it first."""
        watch_hangup(connection_fd, self.clear, "kvstore-dummy-connection")

    def close(self) -> None:
        self._closed = True
        self.cache.clear()
        with self._lock:
            peers = list(self._peers.values())
            self._peers.clear()
        for p in peers:
            p.close()
