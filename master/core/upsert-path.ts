// The upsert RPCs of the core: UpsertStart (insert or update), UpsertEnd, UpsertRevoke and their
// batch forms. An absent key is written as by PutStart. A complete, unleased object with the same
// slice lengths is overwritten in place (replicas PROCESSING until UpsertEnd, `reused`); another
// layout gets new space, and the old placement is kept aside (CoreShared.previous) until UpsertEnd
// frees it or UpsertRevoke restores it. The ends and revokes are the writes' (write-path.ts).
import { ErrorCode } from '../../common/error-code.js';
import type { BatchKeysRequest__Output } from '../../proto/gen/store/BatchKeysRequest.js';
import type { BatchKeysResponse__Output } from '../../proto/gen/store/BatchKeysResponse.js';
import type { BatchUpsertStartRequest__Output } from '../../proto/gen/store/BatchUpsertStartRequest.js';
import type { BatchUpsertStartResponse__Output } from '../../proto/gen/store/BatchUpsertStartResponse.js';
import type { ReplicaInfo__Output } from '../../proto/gen/store/ReplicaInfo.js';
import { ReplicaStatus } from '../../proto/gen/store/ReplicaStatus.js';
import type { UpsertEndRequest__Output } from '../../proto/gen/store/UpsertEndRequest.js';
import type { UpsertEndResponse__Output } from '../../proto/gen/store/UpsertEndResponse.js';
import type { UpsertRevokeRequest__Output } from '../../proto/gen/store/UpsertRevokeRequest.js';
import type { UpsertRevokeResponse__Output } from '../../proto/gen/store/UpsertRevokeResponse.js';
import type { UpsertStartRequest__Output } from '../../proto/gen/store/UpsertStartRequest.js';
import type { UpsertStartResponse__Output } from '../../proto/gen/store/UpsertStartResponse.js';
import { PreviousPlacement, type CoreShared } from './core-shared.js';
import { FLAG_CXL, FLAG_HARD_PIN, FLAG_REUSED, FLAG_SOFT_PIN, FLAG_UPSERT, writeGeneration, type ObjectMeta } from './object-meta.js';
import type { ObjectLifecycle } from './object-lifecycle.js';
import { replicaList } from './replica-capture.js';
import { servedView } from './served-view.js';
import { validateWrite } from './write-validation.js';
import { pinFlags, type WritePath } from './write-path.js';
import type { WritePlacement } from './write-placement.js';

export class UpsertPath {
  constructor(
    private readonly s: CoreShared,
    private readonly life: ObjectLifecycle,
    private readonly placement: WritePlacement,
    private readonly writes: WritePath,
  ) {}

  /**
   * Insert or update. Absent key: as PutStart. Complete, unleased object with the same slice
   * lengths: its placement is reused in place (replicas PROCESSING until UpsertEnd, `reused`).
   * Different layout: new space; the old placement is freed at UpsertEnd, restored by UpsertRevoke.
   * While the upsert is in flight the object is not readable.
   */
  upsertStart(req: UpsertStartRequest__Output, now: number): UpsertStartResponse__Output {
    const fail = (status_code: number): UpsertStartResponse__Output => ({ status_code, replica_list: [], reused: false });
    const v = validateWrite(req);
    if (!v.ok) return fail(v.code);
    const s = this.s;
    const placement = this.placement;
    const key = req.key;
    let meta = s.objects.get(key);
    if (meta !== undefined && !meta.complete) {
      if (!placement.preemptible(meta, now)) return fail(ErrorCode.OBJECT_ALREADY_EXISTS);
      this.life.abortWrite(key, meta);
      meta = s.objects.get(key);
    }
    if (meta === undefined) {
      const code = placement.place(v.sliceLengths, v.replicaNum, v.preferredSegment, now);
      if (code !== ErrorCode.OK) return fail(code);
      s.files.upsertStarted(key); // a value held only by its file is replaced
      const flags = ReplicaStatus.INITIALIZED | FLAG_UPSERT | pinFlags(v.softPin, v.hardPin) | (s.placer.cxl ? FLAG_CXL : 0);
      const created = placement.insertWrite(key, v.sliceLengths.length, flags, now);
      return { status_code: ErrorCode.OK, replica_list: this.view(created), reused: false };
    }
    if (meta.leased(now)) return fail(ErrorCode.OBJECT_HAS_LEASE);
    s.rereplicator.forget(key); // new bytes: a copy of the old ones must not join it
    const softPin = v.softPin ? FLAG_SOFT_PIN : 0;
    const old = meta.sliceLengths();
    // A replica on a RESTORED segment cannot be written in place: its owner has not registered it again.
    const sameLayout =
      old.length === v.sliceLengths.length && old.every((len, j) => len === v.sliceLengths[j]) && (s.segments.restored === 0 || servedView(s.segments, meta) === meta);
    if (sameLayout) {
      s.files.upsertStarted(key); // its file holds the old value
      s.sink?.removed(key); // its bytes are about to be overwritten: no longer state until UpsertEnd
      s.order.remove(meta); // in flight: not a candidate until UpsertEnd
      s.setFlags(meta, meta.flags | FLAG_UPSERT | FLAG_REUSED | softPin);
      meta.status = ReplicaStatus.PROCESSING;
      meta.lastAccess = now;
      s.inFlight.add(meta);
      return { status_code: ErrorCode.OK, replica_list: this.view(meta), reused: true };
    }
    // Keep the object out of eviction while space is found for its new layout.
    const before = new PreviousPlacement(meta.h, meta.slices, meta.flags);
    meta.status = ReplicaStatus.PROCESSING;
    const code = placement.place(v.sliceLengths, v.replicaNum, v.preferredSegment, now);
    if (code !== ErrorCode.OK) {
      meta.flags = before.flags; // only the status was changed; still listed, LRU place kept
      return fail(code);
    }
    s.order.remove(meta);
    s.files.upsertStarted(key); // its file holds the old value (a revoke brings back its memory replicas only)
    s.sink?.removed(key); // not readable while the upsert runs; a revoke reports it again (abortWrite)
    s.previous.set(key, before);
    s.placer.into(meta);
    meta.slices = v.sliceLengths.length;
    s.setFlags(meta, (before.flags & (FLAG_HARD_PIN | FLAG_SOFT_PIN)) | softPin | FLAG_UPSERT | (s.placer.cxl ? FLAG_CXL : 0));
    meta.status = ReplicaStatus.INITIALIZED;
    meta.lastAccess = now;
    s.inFlight.add(meta);
    return { status_code: ErrorCode.OK, replica_list: this.view(meta), reused: false };
  }

  batchUpsertStart(req: BatchUpsertStartRequest__Output, now: number): BatchUpsertStartResponse__Output {
    if (!Array.isArray(req.requests)) return { status_code: ErrorCode.INVALID_PARAMS, results: [] };
    return { status_code: ErrorCode.OK, results: req.requests.map((r) => this.upsertStart(r, now)) };
  }

  upsertEnd(req: UpsertEndRequest__Output, now: number): UpsertEndResponse__Output {
    return { status_code: this.writes.endWrite(req, now, req.slice_checksums) };
  }

  batchUpsertEnd(req: BatchKeysRequest__Output, now: number): BatchKeysResponse__Output {
    return this.writes.batchEndWrite(req, now);
  }

  upsertRevoke(req: UpsertRevokeRequest__Output, now: number): UpsertRevokeResponse__Output {
    this.placement.suspect(req.failed_segments, now);
    return { status_code: this.writes.revokeWrite(req) };
  }

  batchUpsertRevoke(req: BatchKeysRequest__Output, now: number): BatchKeysResponse__Output {
    this.placement.suspect(req.failed_segments, now);
    return this.writes.batchRevokeWrite(req);
  }

  /** The replicas of an upsert just started, as its writer needs them (with the write's generation). */
  private view(meta: ObjectMeta): ReplicaInfo__Output[] {
    return replicaList(this.s.segments, meta, writeGeneration(meta));
  }
}
