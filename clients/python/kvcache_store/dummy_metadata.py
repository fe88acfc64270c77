"""The metadata calls of DummyClient (existence, sizes, removal, regex queries, replica and IP
queries, health): small messages only, no values. Mixed into DummyClient, whose `_simple` sends
one call within its deadline and `_code` applies the return conventions."""
from typing import Dict, List, Optional, Sequence

from . import errors as E
from ._proto import store_client_pb2 as pb
from ._proto import store_master_pb2 as mpb
from .errors import StoreError


class MetadataCalls:
    def is_exist(self, key: str, *, timeout: Optional[float] = None) -> int:
        """1 when the key exists, 0 when not, a negative code on failure. Asked of the master
        here when first reads are (direct_reads.py), else of the real client."""
        try:
            direct = self._direct
            if direct is not None and timeout is None and direct.usable():
                here = direct.exists(key)
                if here is not None:
                    return 1 if here else 0
            return 1 if self._simple("IsExist", pb.KeyRequest(key=key), timeout).exists else 0
        except (StoreError, TypeError, ValueError) as e:
            return self._code(e)

    def batch_is_exist(self, keys: Sequence[str], *, timeout: Optional[float] = None) -> List[int]:
        try:
            if not keys:
                return []
            direct = self._direct
            if direct is not None and timeout is None and direct.usable():
                here = direct.exist_many(keys)
                if here is not None:
                    return [1 if x else 0 for x in here]
            return [1 if x else 0 for x in self._simple("BatchIsExist", pb.KeysRequest(keys=list(keys)), timeout).exists]
        except (StoreError, TypeError, ValueError) as e:
            return [self._code(e)] * len(keys)

    def get_size(self, key: str, *, timeout: Optional[float] = None) -> int:
        """The value's size in bytes, or a negative code (OBJECT_NOT_FOUND when missing)."""
        try:
            return int(self._simple("GetSize", pb.KeyRequest(key=key), timeout).size)
        except (StoreError, TypeError, ValueError) as e:
            return self._code(e)

    def remove(self, key: str, force: bool = False, *, timeout: Optional[float] = None) -> int:
        try:
            self._forget((key,))
            self._simple("Remove", pb.ClientRemoveRequest(key=key, force=bool(force)), timeout)
            return 0
        except (StoreError, TypeError, ValueError) as e:
            return self._code(e)

    def batch_remove(self, keys: Sequence[str], force: bool = False, *, timeout: Optional[float] = None) -> List[int]:
        """Removes each key (one call per key: the service has no batch removal): 0 / code per key."""
        return [self.remove(k, force, timeout=timeout) for k in keys]

    def remove_by_regex(self, regex_pattern: str, force: bool = False, *, timeout: Optional[float] = None) -> int:
        """Removes the unleased objects whose key matches: their count, or a negative code.
        `force` is not served by the real client (objects read recently stay)."""
        try:
            _no_force(force, "remove_by_regex")
            self._forget_all()
            return int(self._simple("RemoveByRegex", pb.RegexRequest(key_regex=regex_pattern), timeout).count)
        except (StoreError, TypeError, ValueError) as e:
            return self._code(e)

    def remove_all(self, force: bool = False, *, timeout: Optional[float] = None) -> int:
        try:
            _no_force(force, "remove_all")
            self._forget_all()
            return int(self._simple("RemoveAll", pb.EmptyRequest(), timeout).count)
        except (StoreError, TypeError, ValueError) as e:
            return self._code(e)

    def query_by_regex(self, regex_pattern: str, *, timeout: Optional[float] = None) -> Dict[str, List[dict]]:
        """Replica lists of the keys matching: {key: [{"status": "COMPLETE", "handles": [{segment_name,
        size, buffer, te_endpoint}...]}...]}. Raises on failure."""
        res = self._simple("QueryByRegex", pb.RegexRequest(key_regex=regex_pattern), timeout)
        return {k: [_replica(r) for r in v.replica_list] for k, v in res.object_map.items()}

    def batch_query_ip(self, client_ids: Sequence[str] = (), *, timeout: Optional[float] = None) -> Dict[str, List[str]]:
        """IP addresses of the given clients' segments (all clients when empty). Raises on failure."""
        res = self._simple("BatchQueryIp", mpb.BatchQueryIpRequest(client_ids=list(client_ids)), timeout)
        return {k: list(v.ip_addresses) for k, v in res.client_ip_map.items()}

    def batch_replica_clear(self, keys: Sequence[str], segment_name: str = "", *, timeout: Optional[float] = None) -> List[str]:
        """Clears the replicas of the keys (on one segment when named): the keys cleared. Raises on failure."""
        self._forget(keys)
        res = self._simple("BatchReplicaClear", pb.ClientBatchReplicaClearRequest(object_keys=list(keys), segment_name=segment_name), timeout)
        return list(res.cleared_keys)

    def health_check(self, *, timeout: Optional[float] = None) -> int:
        """0 when the real client answers, 1 when this client is closed or not set up, 2 when the
        real client is unreachable (Mooncake's codes)."""
        if self._closed or self._pool is None:
            return 1
        try:
            self._simple("Hello", pb.HelloRequest(client_name=self._client_name, protocol_version=1), timeout)
            return 0
        except StoreError:
            return 2


def _no_force(force: bool, what: str) -> None:
    if force:
        raise StoreError(E.NOT_IMPLEMENTED, f"{what}: force=True is not served by the real client (leased and pinned objects stay)")


def _replica(r) -> dict:
    return {
        "status": mpb.ReplicaStatus.Name(r.status),
        "handles": [
            {"segment_name": h.segment_name, "size": int(h.size), "buffer": int(h.buffer), "te_endpoint": h.te_endpoint}
            for h in r.handles
        ],
    }
