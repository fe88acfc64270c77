// The read RPCs of the core: ExistKey, GetReplicaList and their batch forms (the regex query walks
// the whole table: table-walk.ts). While a new HA leader's rescan of the file tier runs, a key
// absent from memory and from the file index so far cannot be answered: its file may not be
// scanned yet. Such a read answers UNAVAILABLE_IN_CURRENT_STATUS (a batch: the whole batch),
// which the shell holds until the scan ends and then asks again (master/rescan-hold.ts).
// A read looks the key up, grants the object a lease and moves it to the recently-used end of its
// eviction list. The batch forms are loops of their own (not a call per key): the lease horizon
// moves once per batch, the TTL is read once, and keys with the same answer share one reply
// object (replies are read-only data on their way to the encoder), and the keys are looked up
// together (ObjectTable.getMany, whose cache misses overlap), so a key costs its share of that
// lookup, its lease and LRU bookkeeping, and, for GetReplicaList, its reply (replica-capture.ts:
// a capture of the handles, encoded straight from it by the fast channel, no ReplicaInfo objects).
import { ErrorCode } from '../../common/error-code.js';
import type { BatchExistKeyRequest__Output } from '../../proto/gen/store/BatchExistKeyRequest.js';
import type { BatchExistKeyResponse__Output } from '../../proto/gen/store/BatchExistKeyResponse.js';
import type { BatchGetReplicaListRequest__Output } from '../../proto/gen/store/BatchGetReplicaListRequest.js';
import type { BatchGetReplicaListResponse__Output } from '../../proto/gen/store/BatchGetReplicaListResponse.js';
import type { ExistKeyResponse__Output } from '../../proto/gen/store/ExistKeyResponse.js';
import type { GetReplicaListResponse__Output } from '../../proto/gen/store/GetReplicaListResponse.js';
import type { ReplicaInfo__Output } from '../../proto/gen/store/ReplicaInfo.js';
import type { EvictionOrder } from './eviction.js';
import type { FileIndex } from './file-index.js';
import { fileReplicaReply } from './file-replica.js';
import type { LeaseTracker } from './lease-tracker.js';
import { FLAG_DISK_ONLY, type ObjectMeta } from './object-meta.js';
import type { ObjectTable } from './object-table.js';
import { GrantedReplicas } from './replica-capture.js';
import type { SegmentRegistry } from './segment-registry.js';
import { lookedUpKeyCode } from './write-validation.js';
import { servedView } from './served-view.js';

/** The replica list of a shared not-found / not-ready reply. */
const NO_REPLICAS = Object.freeze([]) as unknown as ReplicaInfo__Output[];

export class ReadPath {
  constructor(
    private readonly objects: ObjectTable,
    private readonly segments: SegmentRegistry,
    private readonly leases: LeaseTracker,
    private readonly order: EvictionOrder,
    private readonly leaseTtlMs: number,
    /** The file tier: an object absent from memory may be served from its file (spec rule 5). */
    private readonly files: FileIndex,
    /** A replica list was granted for an object held only on SSD (disk-tier.ts counts it toward promotion). */
    private readonly diskRead: (meta: ObjectMeta) => void = () => {},
  ) {}

  existKey(key: string, now: number): ExistKeyResponse__Output {
    const meta = typeof key === 'string' ? this.objects.get(key) : undefined;
    const code = lookedUpKeyCode(key, meta);
    if (code !== ErrorCode.OK) return { status_code: code, exists: false, lease_ttl_ms: 0 };
    if (meta === undefined && this.files.get(key) !== undefined) return { status_code: ErrorCode.OK, exists: true, lease_ttl_ms: 0 };
    if (meta === undefined && this.files.unknown(key)) return { status_code: ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS, exists: false, lease_ttl_ms: 0 };
    if (meta === undefined || !meta.complete) return { status_code: ErrorCode.OK, exists: false, lease_ttl_ms: 0 };
    this.leases.advance(now);
    this.access(meta, now + this.leaseTtlMs, now);
    return { status_code: ErrorCode.OK, exists: true, lease_ttl_ms: this.leaseTtlMs };
  }

  batchExistKey(req: BatchExistKeyRequest__Output, now: number): BatchExistKeyResponse__Output {
    const keys = req.keys;
    if (!Array.isArray(keys)) return { status_code: ErrorCode.INVALID_PARAMS, results: [] };
    const ttl = this.leaseTtlMs;
    const until = now + ttl;
    let advanced = false;
    const yes: ExistKeyResponse__Output = Object.freeze({ status_code: ErrorCode.OK, exists: true, lease_ttl_ms: ttl });
    const no: ExistKeyResponse__Output = Object.freeze({ status_code: ErrorCode.OK, exists: false, lease_ttl_ms: 0 });
    const fileYes: ExistKeyResponse__Output = Object.freeze({ status_code: ErrorCode.OK, exists: true, lease_ttl_ms: 0 });
    const results = new Array<ExistKeyResponse__Output>(keys.length);
    const found = this.objects.getMany(keys);
    if (this.scanPending(keys, found)) return { status_code: ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS, results: [] };
    for (let i = 0; i < keys.length; i++) {
      const meta = found[i];
      const code = lookedUpKeyCode(keys[i], meta);
      if (code !== ErrorCode.OK) {
        results[i] = { status_code: code, exists: false, lease_ttl_ms: 0 };
        continue;
      }
      if (meta === undefined || !meta.complete) {
        results[i] = meta === undefined && this.files.get(keys[i]) !== undefined ? fileYes : no;
        continue;
      }
      if (!advanced) this.leases.advance(now);
      advanced = true;
      this.access(meta, until, now);
      results[i] = yes;
    }
    return { status_code: ErrorCode.OK, results };
  }

  getReplicaList(key: string, now: number): GetReplicaListResponse__Output {
    const meta = typeof key === 'string' ? this.objects.get(key) : undefined;
    const code = lookedUpKeyCode(key, meta);
    if (code !== ErrorCode.OK) return { status_code: code, replica_list: [], lease_ttl_ms: 0, slice_checksums: [], version: 0 };
    if (meta === undefined) {
      const file = this.files.get(key);
      if (file !== undefined) return fileReplicaReply(file, this.leaseTtlMs);
      const absent = this.files.unknown(key) ? ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS : ErrorCode.OBJECT_NOT_FOUND;
      return { status_code: absent, replica_list: [], lease_ttl_ms: 0, slice_checksums: [], version: 0 };
    }
    if (!meta.complete) return { status_code: ErrorCode.REPLICA_IS_NOT_READY, replica_list: [], lease_ttl_ms: 0, slice_checksums: [], version: 0 };
    // Replicas on RESTORED segments wait for their owner (served-view.ts); none left: not ready yet.
    const view = this.segments.restored === 0 ? meta : servedView(this.segments, meta);
    if (view === null) return { status_code: ErrorCode.REPLICA_IS_NOT_READY, replica_list: [], lease_ttl_ms: 0, slice_checksums: [], version: 0 };
    this.leases.advance(now);
    this.access(meta, now + this.leaseTtlMs, now);
    if ((meta.flags & FLAG_DISK_ONLY) !== 0) this.diskRead(meta);
    return new GrantedReplicas(this.segments, view, this.leaseTtlMs);
  }

  batchGetReplicaList(req: BatchGetReplicaListRequest__Output, now: number): BatchGetReplicaListResponse__Output {
    const keys = req.keys;
    if (!Array.isArray(keys)) return { status_code: ErrorCode.INVALID_PARAMS, results: [] };
    const ttl = this.leaseTtlMs;
    const until = now + ttl;
    let notFound: GetReplicaListResponse__Output | undefined;
    let notReady: GetReplicaListResponse__Output | undefined;
    const results = new Array<GetReplicaListResponse__Output>(keys.length);
    const found = this.objects.getMany(keys);
    if (this.scanPending(keys, found)) return { status_code: ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS, results: [] };
    // Two passes: the replies first (reads of handle arrays and allocator words), then the leases
    // and LRU moves (writes to list neighbours). Each pass is a short loop whose iterations do not
    // depend on each other, so the cache misses of different keys overlap.
    let granted = 0;
    const restored = this.segments.restored !== 0;
    for (let i = 0; i < keys.length; i++) {
      const code = lookedUpKeyCode(keys[i], found[i]);
      const meta = code === ErrorCode.OK ? found[i] : undefined;
      const view = meta === undefined || !meta.complete || !restored ? meta : (servedView(this.segments, meta) ?? undefined);
      if (view !== undefined && view.complete) {
        results[i] = new GrantedReplicas(this.segments, view, ttl);
        granted++;
      } else {
        found[i] = undefined;
        if (code !== ErrorCode.OK) {
          results[i] = { status_code: code, replica_list: [], lease_ttl_ms: 0, slice_checksums: [], version: 0 };
        } else if (meta === undefined && this.files.get(keys[i]) !== undefined) {
          results[i] = fileReplicaReply(this.files.get(keys[i])!, ttl);
        } else if (meta === undefined) {
          results[i] = notFound ??= Object.freeze({ status_code: ErrorCode.OBJECT_NOT_FOUND, replica_list: NO_REPLICAS, lease_ttl_ms: 0, slice_checksums: [], version: 0 });
        } else {
          results[i] = notReady ??= Object.freeze({ status_code: ErrorCode.REPLICA_IS_NOT_READY, replica_list: NO_REPLICAS, lease_ttl_ms: 0, slice_checksums: [], version: 0 });
        }
      }
    }
    if (granted > 0) {
      this.leases.advance(now);
      for (let i = 0; i < keys.length; i++) {
        const meta = found[i];
        if (meta === undefined) continue;
        this.access(meta, until, now);
        if ((meta.flags & FLAG_DISK_ONLY) !== 0) this.diskRead(meta);
      }
    }
    return { status_code: ErrorCode.OK, results };
  }

  /** Whether a batch names a key that only the file tier's rescan, still running, could find. */
  private scanPending(keys: readonly unknown[], found: readonly (ObjectMeta | undefined)[]): boolean {
    if (!this.files.scanning) return false;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i];
      if (found[i] === undefined && typeof key === 'string' && lookedUpKeyCode(key, undefined) === ErrorCode.OK && this.files.unknown(key)) return true;
    }
    return false;
  }

  /** A read of meta: its lease runs until `until` (horizon already advanced to now), LRU touched. */
  private access(meta: ObjectMeta, until: number, now: number): void {
    this.leases.extend(meta, until);
    meta.lastAccess = now;
    this.order.touch(meta);
  }
}
