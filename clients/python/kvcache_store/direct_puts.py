"""A dummy client's put of an object into same-host memory, without the real client (as the
TypeScript client's client/dummy-direct-puts.ts): the dummy asks the master for the placement
itself (PutStart / BatchPutStart on the master channel of its first reads, direct_reads.py), and
when every replica lies in memory served by an engine of this host it copies the bytes into that
engine's memory through a writable same-host grant (shm_grant.py: the grant current, the
handle's registration, the engine's write fence checked before every chunk), computes each
slice's CRC-32C when the real client records them, and ends the put (PutEnd / BatchPutEnd).

The real client allows it in its Hello reply (`direct_puts`, with `checksums`): not while its Puts
also write the file tier (that copy is the real client's). A placement that is not all this
host's memory is revoked at once (naming no segment: nothing failed) and the put goes through the
real client; puts with that preferred segment (or none) then go through the real client for
MISS_PAUSE seconds. A copy that fails is revoked the same way (the real client then writes the
object: it reaches every host). The master's refusals (OBJECT_ALREADY_EXISTS, NO_AVAILABLE_HANDLE,
bad parameters) are raised as the real client's would be. Upserts always go through the real
client, and so do values above MAX_BYTES (the real client's engine copies those on its threads,
into mappings whose page tables it filled in beforehand; here every first write to a page of a
fresh mapping faulted under the GIL: 1 MiB puts written here ran at half the rate, measured
before grants' page tables were filled in by a thread), and puts made while BUSY_CALLS calls
already wait on the master channel.

On by default (DummyClient.setup(direct_puts=False) or STORE_DUMMY_DIRECT_PUTS=0 turn it off):
single puts of 4 and 64 KiB run at about twice the rate they have through the real client,
batches and 64 threads' puts (combined into batches, call_combiner.py) a little faster. It was
off while the same runs showed the real client's 1 and 4 MiB puts slower; that was the
benchmark's warm-up, not this path: with the TS dummy writing its own puts, the Python rows were
the first puts the real client served, so its code was compiled and its own grants filled in
during them (docs/client.md "Puts a dummy writes itself").
"""
import time
from typing import List, Optional, Sequence

import google_crc32c

from ._proto import store_master_pb2 as mpb
from .config import preferred_segment as _preferred, to_wire
from .direct_reads import CALL_TIMEOUT, DirectReads
from .errors import OK, UNAVAILABLE_IN_CURRENT_STATUS, StoreError, UnavailableError, check
from .local_reads import LocalReads, crc32c_at
from .values import Buf

_now = time.monotonic
_SERVICE = mpb.DESCRIPTOR.services_by_name["MasterService"]
_INDEX = {m.name: i for i, m in enumerate(_SERVICE.methods)}
_PUT_START, _PUT_END, _PUT_REVOKE = _INDEX["PutStart"], _INDEX["PutEnd"], _INDEX["PutRevoke"]
_BATCH_START, _BATCH_END, _BATCH_REVOKE = _INDEX["BatchPutStart"], _INDEX["BatchPutEnd"], _INDEX["BatchPutRevoke"]
_MEMORY = mpb.MEMORY
#: After a placement we cannot write (another host, a disk), puts with that preferred segment go
#: through the real client this long (seconds).
MISS_PAUSE = 5.0
#: Larger values are put through the real client (module docstring).
MAX_BYTES = 64 << 10
#: With this many calls already waiting on our master channel, a put goes through the real client:
#: many threads putting at once are bound by this process's GIL, and the real client does the
#: work in its own process.
BUSY_CALLS = 4
CRC_IN_C = google_crc32c.implementation == "c"
_UNAVAILABLE = UnavailableError("").code


class DirectPuts:
    def __init__(self, reads: DirectReads, local: LocalReads):
        #: objects put here and their bytes, and objects tried here that went through the real
        #: client after all
        self.served = 0
        self.bytes = 0
        self.fallbacks = 0
        self._reads = reads
        self._local = local
        self._allowed = False
        self._checksums = False
        self._miss_until = {}  # preferred segment ('' : none) -> no direct put before then

    def stats(self) -> dict:
        return {"direct_puts": self.served, "direct_put_bytes": self.bytes, "direct_put_fallbacks": self.fallbacks}

    def configure(self, allowed: bool, checksums: bool) -> None:
        """What the real client's Hello said."""
        self._allowed = allowed and (CRC_IN_C or not checksums)
        self._checksums = checksums

    def usable(self, config, size: int) -> bool:
        """Whether a put of `size` bytes with `config` may be made here now."""
        if not self._allowed or size > MAX_BYTES or not self._reads.usable() or self._reads.master_busy(BUSY_CALLS):
            return False
        until = self._miss_until.get(_preferred(config))
        return until is None or _now() >= until

    # ------------------------------------------------------------------ single

    def put(self, key: str, parts: List[Buf], config) -> bool:
        """Puts `key` here: True when stored, False when it must go through the real client.
        Raises the master's refusal as a StoreError."""
        ch = self._reads.master_channel()
        if ch is None:
            return self._back(1)
        req = mpb.PutStartRequest(key=key, value_length=sum(b.size for b in parts), slice_lengths=[b.size for b in parts])
        to_wire(config, req.config)
        try:
            res = mpb.PutStartResponse.FromString(ch.call("PutStart", _PUT_START, req.SerializeToString(), _now() + CALL_TIMEOUT))
        except (StoreError, ValueError) as e:
            self._reads.master_failed(e)
            return self._back(1)
        if res.status_code == UNAVAILABLE_IN_CURRENT_STATUS:
            self._reads.master_refused(res.status_code)
            return self._back(1)
        check(res.status_code, f"put {key!r}: start refused")
        sums = self._write(parts, res.replica_list, config)
        if sums is None:
            self._revoke(ch, "PutRevoke", _PUT_REVOKE, mpb.PutRevokeRequest(key=key))
            return self._back(1)
        try:
            payload = ch.call("PutEnd", _PUT_END, mpb.PutEndRequest(key=key, slice_checksums=sums).SerializeToString(), _now() + CALL_TIMEOUT)
            ended = mpb.PutEndResponse.FromString(payload)
        except (StoreError, ValueError) as e:
            # whether the master ended it is unknown, as for the real client
            self._reads.master_failed(e)
            raise UnavailableError(f"put {key!r}: end: {getattr(e, 'message', e)}") from None
        check(ended.status_code, f"put {key!r}: end refused")
        self.served += 1
        self.bytes += req.value_length
        return True

    # ------------------------------------------------------------------ batches

    def batch_put(self, keys: Sequence[str], bufs: Sequence[Buf], config) -> List[Optional[int]]:
        """Puts each key here where it can: per key 0, a negative code (the master refused it),
        or None (put it through the real client)."""
        n = len(keys)
        out: List[Optional[int]] = [None] * n
        ch = self._reads.master_channel()
        if ch is None:
            return self._all_back(out)
        req = mpb.BatchPutStartRequest()
        wire = mpb.ReplicateConfig()
        to_wire(config, wire)
        add = req.requests.add
        for k, b in zip(keys, bufs):
            add(key=k, value_length=b.size, slice_lengths=(b.size,), config=wire)
        try:
            payload = ch.call("BatchPutStart", _BATCH_START, req.SerializeToString(), _now() + CALL_TIMEOUT)
            res = mpb.BatchPutStartResponse.FromString(payload)
        except (StoreError, ValueError) as e:
            self._reads.master_failed(e)
            return self._all_back(out)
        if res.status_code != OK or len(res.results) != n:
            self._reads.master_refused(res.status_code)
            return self._all_back(out)
        planned = []
        revoke = []
        for i, r in enumerate(res.results):
            if r.status_code != OK:
                out[i] = r.status_code
            elif self._ours(r.replica_list, (bufs[i],), config):
                planned.append(i)
            else:
                revoke.append(keys[i])
        sums = None
        if planned:
            sums = self._copy([((bufs[i],), res.results[i].replica_list) for i in planned])
            if sums is None:
                revoke.extend(keys[i] for i in planned)
        if revoke:
            self._revoke(ch, "BatchPutRevoke", _BATCH_REVOKE, mpb.BatchKeysRequest(keys=revoke))
        if planned and sums is not None:
            end = mpb.BatchKeysRequest(keys=[keys[i] for i in planned])
            for one in sums:
                end.checksums.add(crc32c=one if self._checksums else ())
            try:
                payload = ch.call("BatchPutEnd", _BATCH_END, end.SerializeToString(), _now() + CALL_TIMEOUT)
                ended = mpb.BatchKeysResponse.FromString(payload)
            except (StoreError, ValueError) as e:
                self._reads.master_failed(e)  # whether the master ended them is unknown, as for the real client
                for i in planned:
                    out[i] = _UNAVAILABLE
                return out
            by_key = {r.key: r.status_code for r in ended.results}
            for i in planned:
                code = ended.status_code if ended.status_code != OK else by_key.get(keys[i], OK)
                out[i] = code
                if code == OK:
                    self.served += 1
                    self.bytes += bufs[i].size
        self.fallbacks += sum(1 for x in out if x is None)
        return out

    # ------------------------------------------------------------------ copies

    def _ours(self, replicas, parts: Sequence[Buf], config) -> bool:
        """Whether every replica is memory of this host's engines, a handle per slice large
        enough (else: a pause for the preferred segment)."""
        same = self._reads.same_host
        for r in replicas:
            hs = r.handles
            if r.replica_type != _MEMORY or len(hs) != len(parts) or not all(h.te_endpoint and h.size >= b.size and same(h.te_endpoint) for h, b in zip(hs, parts)):
                self._miss_until[_preferred(config)] = _now() + MISS_PAUSE
                return False
        return len(replicas) > 0

    def _write(self, parts: List[Buf], replicas, config) -> Optional[List[int]]:
        """Copies one object's slices to every replica: their CRC-32Cs ([] when not recorded), or None."""
        if not self._ours(replicas, parts, config):
            return None
        sums = self._copy([(parts, replicas)])
        return None if sums is None else (sums[0] if self._checksums else [])

    def _copy(self, objects) -> Optional[List[List[int]]]:
        """Copies each object's (slices, replicas) to all its replicas: per object the CRC-32C of
        each slice (computed over the first copy; 0s when not recorded), or None when a copy
        failed (the engine refused or could not be reached: the real client writes them then)."""
        out = []
        try:
            for parts, replicas in objects:
                sums = []
                for j, b in enumerate(parts):
                    src = b.address if b.address is not None else b.view
                    first = None
                    for r in replicas:
                        h = r.handles[j]
                        at = self._local.peer(h.te_endpoint).write(h.buffer, src, b.size, h.incarnation, h.generation)
                        first = at if first is None else first
                    sums.append(crc32c_at(first, b.size) if self._checksums else 0)
                out.append(sums)
        except StoreError:
            return None
        return out

    def _revoke(self, ch, name: str, index: int, req) -> None:
        try:
            ch.call(name, index, req.SerializeToString(), _now() + CALL_TIMEOUT)
        except StoreError:
            pass  # the master discards the placement after its put timeout

    def _back(self, n: int) -> bool:
        self.fallbacks += n
        return False

    def _all_back(self, out: list) -> list:
        self.fallbacks += len(out)
        return out

