"""A dummy client's first read of an object in same-host memory, without the real client (as the
TypeScript client's client/dummy-direct-reads.ts): the dummy asks the master itself
(GetReplicaList on a master channel of its own: the KVD1 framing with the
master's magic "KVC1" and MasterService's method numbers, opened at the first such read and
authenticated with the cluster secret it already has) and, for a complete MEMORY replica whose
every slice lies with an engine of this host, keeps the location in the local-read cache under
the lease the master just granted and copies the bytes as a repeated read does (local_reads.py).
A batch's keys are looked up in one BatchGetReplicaList (read_many: objects of at most 64 KiB
copied here, larger ones by the real client; the caller's deadline bounds the lookup).

The real client says where its master is (Hello master_address, only to same-host dummies that
asked for local reads). Anything else goes through the real client as before: a DISK/file
replica, slices on another host, a copy that fails a check, an error status (not found included:
the real client gives the error), and a master that cannot be reached, refuses our secret or does
not serve (UNAVAILABLE_IN_CURRENT_STATUS: not the leader, or not yet). After such a failure no
lookup is made here for a while, and the real client is asked again where the master is (with HA
the leader moves). A master connection that ends drops every cached location: the leases it
granted may be gone.
"""
import logging
import socket
import threading
import time
from typing import List, Optional, Sequence

from ._proto import store_master_pb2 as mpb
from .channel import Channel
from .connection import split_host_port
from .errors import OBJECT_NOT_FOUND, OK, UNAVAILABLE_IN_CURRENT_STATUS, DeadlineExceededError, StoreError, UnauthenticatedError
from .protocol import plain_key
from .local_read_cache import LocalEntry, LocalSlice
from .local_reads import LocalReads
from .shm_grant import watch_hangup
from .values import Buf

log = logging.getLogger("kvcache_store")
_now = time.monotonic

MASTER_MAGIC = b"KVC1"
#: After the master failed us, first reads go through the real client for this long (seconds).
RETRY_AFTER = 1.0
#: After the master refused our secret: this long.
AUTH_RETRY_AFTER = 60.0
#: A lookup not answered by then is given up (the read goes through the real client).
CALL_TIMEOUT = 5.0

_SERVICE = mpb.DESCRIPTOR.services_by_name["MasterService"]
_INDEX = {m.name: i for i, m in enumerate(_SERVICE.methods)}
_GRL = _INDEX["GetReplicaList"]
_BATCH_GRL = _INDEX["BatchGetReplicaList"]
_EXIST = _INDEX["ExistKey"]
_BATCH_EXIST = _INDEX["BatchExistKey"]
#: Most keys in one BatchExistKey or BatchGetReplicaList asked here (more go through the real client).
MAX_BATCH_KEYS = 16384
#: A batch's larger objects are read through the real client: its copy runs on its own threads,
#: one here would hold the GIL for the whole batch (an engine loading 1 GB of pages at once).
#: Small objects are where the hop costs more than the bytes (as for direct puts, direct_puts.py).
MAX_BATCH_TARGET = 64 * 1024


_COMPLETE = mpb.COMPLETE
_MEMORY = mpb.MEMORY


def _host(endpoint: str) -> Optional[str]:
    try:
        return split_host_port(endpoint)[0]
    except StoreError:
        return None


class DirectReads:
    def __init__(self, local: LocalReads, secret: Optional[bytes], refresh, spin_us: float = 100.0):
        #: first reads served here after our own lookup (counted in the local reads' hits too), and
        #: first reads tried here that went through the real client after all
        self.served = 0
        self.fallbacks = 0
        self._local = local
        self._secret = secret
        self._refresh = refresh  # asks the real client where the master is: it calls configure()
        self._spin_us = spin_us
        self._address = ""
        self._host: Optional[str] = None
        self._hosts = {}  # endpoint -> same host as the real client's engine
        self._channel: Optional[Channel] = None
        self._lock = threading.Lock()
        self._off_until = 0.0
        self._stale = False
        self._failing = False
        self._closed = False

    def stats(self) -> dict:
        return {"direct": self.served, "direct_fallbacks": self.fallbacks}

    def configure(self, master_address: str, real_endpoint: str) -> None:
        """What the real client's Hello said: the master's address ('' : none) and its own engine."""
        with self._lock:
            self._host = _host(real_endpoint)
            self._hosts = {}
            self._stale = False
            if master_address == self._address:
                return
            self._address = master_address
            self._off_until = 0.0
            ch, self._channel = self._channel, None
        if ch is not None:
            ch.close("dropped: the master moved")

    def usable(self) -> bool:
        """Whether a first read may be looked up here now (else it goes through the real client)."""
        if not self._address or self._closed or _now() < self._off_until:
            return False
        if not self._stale:
            return True
        self._stale = False
        try:
            self._refresh()
        except StoreError as e:
            self._off_until = _now() + RETRY_AFTER
            log.info("kvcache_store: asking the real client where the master is failed: %s", e.message)
        return False

    # ------------------------------------------------------------------ reads

    def read_into(self, key: str, target: Buf) -> Optional[int]:
        """Reads `key` into `target` here: its size, or None (read it through the real client)."""
        e = self._locate(key)
        return self._count(self._local.read_entry_into(key, e, target) if e is not None else None)

    def read_bytes(self, key: str) -> Optional[bytes]:
        """The value of `key` read here, or None (read it through the real client)."""
        e = self._locate(key)
        v = self._local.read_entry_bytes(key, e) if e is not None else None
        self._count(None if v is None else len(v))
        return v

    def read_many(self, keys: Sequence[str], targets: Sequence[Buf], deadline: float) -> Optional[List[Optional[int]]]:
        """read_into for many keys with one BatchGetReplicaList asked before the caller's
        `deadline`: per key its size, or None (read it through the real client; so is every
        target above MAX_BATCH_TARGET, which is not looked up here); None: all of them (also when
        the deadline came first)."""
        small = [i for i, t in enumerate(targets) if t.size <= MAX_BATCH_TARGET]
        if not small or len(small) > MAX_BATCH_KEYS or _now() >= deadline:
            return None
        asked = [keys[i] for i in small]
        stamp = self._local.begin()
        res = self._ask("BatchGetReplicaList", _BATCH_GRL, mpb.BatchGetReplicaListRequest(keys=asked), mpb.BatchGetReplicaListResponse, deadline)
        if res is None:
            return None
        if res.status_code != OK or len(res.results) != len(asked):
            return self._refused(res.status_code)
        read = self._local.read_entry_into
        out: List[Optional[int]] = [None] * len(keys)
        for i, e in zip(small, self._keep_many(asked, stamp, res.results)):
            if e is not None:
                out[i] = read(keys[i], e, targets[i])
        served = sum(n is not None for n in out)
        self.served += served
        self.fallbacks += len(small) - served
        return out

    def _count(self, n):
        if n is None:
            self.fallbacks += 1
        else:
            self.served += 1
        return n

    # ------------------------------------------------------------------ lookups

    def _locate(self, key: str) -> Optional[LocalEntry]:
        stamp = self._local.begin()  # before the channel is opened, if need be: conservative
        res = self._ask("GetReplicaList", _GRL, mpb.GetReplicaListRequest(key=key), mpb.GetReplicaListResponse)
        return None if res is None else self._keep(key, stamp, res)

    def exists(self, key: str) -> Optional[bool]:
        """Whether `key` exists, asked of the master here (the real client would ask it the
        same), or None: ask the real client (no channel, a failure, a key it should name)."""
        if not plain_key(key):
            return None
        res = self._ask("ExistKey", _EXIST, mpb.ExistKeyRequest(key=key), mpb.ExistKeyResponse)
        if res is None:
            return None
        if res.status_code == OBJECT_NOT_FOUND:
            return False
        if res.status_code != OK:
            return self._refused(res.status_code)
        self._failing = False
        return bool(res.exists)

    def exist_many(self, keys: Sequence[str]) -> Optional[List[bool]]:
        """exists() for many keys in one call; None: ask the real client for all of them."""
        if not keys or len(keys) > MAX_BATCH_KEYS or not all(plain_key(k) for k in keys):
            return None
        res = self._ask("BatchExistKey", _BATCH_EXIST, mpb.BatchExistKeyRequest(keys=list(keys)), mpb.BatchExistKeyResponse)
        if res is None:
            return None
        if res.status_code != OK or len(res.results) != len(keys):
            return self._refused(res.status_code)
        if any(r.status_code not in (OK, OBJECT_NOT_FOUND) for r in res.results):
            return None
        self._failing = False
        return [r.status_code == OK and r.exists for r in res.results]

    def _ask(self, name: str, index: int, request, response_type, deadline: Optional[float] = None):
        """One call to the master on our channel (opened if need be): its decoded reply, or None
        when there is no channel or the call failed (lookups then pause) or the caller's
        `deadline` came first (the channel is fine: its late reply is dropped)."""
        ch = self._master()
        if ch is None:
            return None
        ours = _now() + CALL_TIMEOUT
        callers = deadline is not None and deadline < ours
        try:
            return response_type.FromString(ch.call(name, index, request.SerializeToString(), deadline if callers else ours))
        except DeadlineExceededError as e:
            return None if callers else self._failed(e)
        except (StoreError, ValueError) as e:
            return self._failed(e)

    def _keep(self, key: str, stamp, res) -> Optional[LocalEntry]:
        """Keeps the location of the first complete MEMORY replica of `res` wholly on this host's
        engines (under the lease granted to a request sent at `stamp`): the entry kept, or None."""
        if res.status_code != OK:
            return self._refused(res.status_code)
        self._failing = False
        slices = self._slices(res)
        return None if slices is None else self._local.cache.end_slices(key, stamp, slices, bool(res.slice_checksums), res.lease_ttl_ms * 1000)

    def _keep_many(self, keys: Sequence[str], stamp, results) -> List[Optional[LocalEntry]]:
        """_keep for a batch's results (in key order), the cache locked once."""
        self._failing = False
        found = []
        for r in results:
            slices = self._slices(r) if r.status_code == OK else None  # not found: the real client says so
            found.append(None if slices is None else (slices, bool(r.slice_checksums), r.lease_ttl_ms * 1000))
        return self._local.cache.end_many_slices(keys, stamp, found)

    def _slices(self, res) -> Optional[tuple]:
        """The slices of the first complete MEMORY replica of an OK `res` wholly on this host's
        engines, or None (none, or no lease to keep it under)."""
        if res.lease_ttl_ms <= 0:
            return None
        sums = res.slice_checksums
        hosts = self._hosts
        for r in res.replica_list:
            handles = r.handles
            if r.status != _COMPLETE or r.replica_type != _MEMORY or not handles or (sums and len(sums) != len(handles)):
                continue
            slices = []
            for i, h in enumerate(handles):
                ep = h.te_endpoint
                size = h.size
                if not ep or size <= 0 or not (hosts.get(ep) or self._same_host(ep)):
                    break
                slices.append(LocalSlice(ep, h.buffer, size, h.incarnation, sums[i] if sums else 0))
            else:
                return tuple(slices)
        return None

    # ------------------------------------------------------------------ for direct puts (direct_puts.py)

    def master_channel(self) -> Optional[Channel]:
        """Our master channel (connecting if need be), or None (failed: lookups and puts pause)."""
        return self._master()

    def master_busy(self, calls: int) -> bool:
        """Whether at least `calls` calls wait on our master channel now."""
        ch = self._channel
        return ch is not None and ch.in_flight() >= calls

    def same_host(self, endpoint: str) -> bool:
        """Whether an engine endpoint is on this host (that of the real client's engine)."""
        return self._same_host(endpoint)

    def master_failed(self, e: Exception) -> None:
        """A call on our master channel failed: as a failed lookup (a pause, the real client asked again)."""
        self._failed(e)

    def master_refused(self, code: int) -> None:
        """The master answered with a status the real client deals with."""
        self._refused(code)

    def _same_host(self, endpoint: str) -> bool:
        same = self._hosts.get(endpoint)
        if same is None:
            same = self._host is not None and _host(endpoint) == self._host
            if len(self._hosts) < 4096:
                self._hosts[endpoint] = same
        return same

    def _refused(self, code: int) -> None:
        if code == UNAVAILABLE_IN_CURRENT_STATUS:
            self._stale = True
            self._off_until = _now() + RETRY_AFTER
        return None

    def _failed(self, e: Exception) -> None:
        auth = isinstance(e, UnauthenticatedError)
        self._off_until = _now() + (AUTH_RETRY_AFTER if auth else RETRY_AFTER)
        self._stale = True
        if not self._failing:
            self._failing = True
            nxt = "it refused our cluster secret" if auth else "reads go through the real client meanwhile"
            log.warning("kvcache_store: looking up first reads at master %s failed (%s); %s", self._address, getattr(e, "message", e), nxt)
        with self._lock:
            ch, self._channel = self._channel, None
        if ch is not None:
            ch.close("dropped after a failure")
        return None

    def _master(self) -> Optional[Channel]:
        """Our master channel, connecting at the first call (None: failed; retried later)."""
        ch = self._channel
        if ch is not None and not ch.closed:
            return ch
        with self._lock:
            ch = self._channel
            if ch is not None and not ch.closed:
                return ch
            if self._closed:
                return None
            address = self._address
            try:
                host, port = split_host_port(address)
                sock = socket.create_connection((host, port), timeout=CALL_TIMEOUT)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except (OSError, StoreError) as e:
                err: Exception = e
            else:
                try:
                    ch = Channel(sock, address, self._spin_us, self._secret, magic=MASTER_MAGIC, interface="master-channel", peer="master")
                    err = None
                except StoreError as e:
                    err = e
            if err is None:
                self._channel = ch
                # the leases that master granted may be gone with it (a restart, a new leader)
                watch_hangup(ch.fileno(), self._local.clear, "kvstore-dummy-master")
                return ch
        self._failed(err)
        return None

    def close(self) -> None:
        self._closed = True
        with self._lock:
            ch, self._channel = self._channel, None
        if ch is not None:
            ch.close()
