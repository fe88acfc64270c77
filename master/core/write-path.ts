// The write RPCs of the core: PutStart, PutEnd, PutRevoke and their batch forms. A PutStart places
// the object (write-placement.ts) and creates it unfinished; PutEnd makes its replicas COMPLETE;
// PutRevoke cancels it (object-lifecycle.ts). Ending and revoking are shared with the upserts
// (upsert-path.ts), whose ends are the same operations.
import { ErrorCode } from '../../common/error-code.js';
import type { BatchKeysRequest__Output } from '../../proto/gen/store/BatchKeysRequest.js';
import type { BatchKeysResponse__Output } from '../../proto/gen/store/BatchKeysResponse.js';
import type { BatchPutStartRequest__Output } from '../../proto/gen/store/BatchPutStartRequest.js';
import type { BatchPutStartResponse__Output } from '../../proto/gen/store/BatchPutStartResponse.js';
import type { PutEndRequest__Output } from '../../proto/gen/store/PutEndRequest.js';
import type { PutEndResponse__Output } from '../../proto/gen/store/PutEndResponse.js';
import type { PutRevokeRequest__Output } from '../../proto/gen/store/PutRevokeRequest.js';
import type { PutRevokeResponse__Output } from '../../proto/gen/store/PutRevokeResponse.js';
import type { PutStartRequest__Output } from '../../proto/gen/store/PutStartRequest.js';
import type { PutStartResponse__Output } from '../../proto/gen/store/PutStartResponse.js';
import { ReplicaStatus } from '../../proto/gen/store/ReplicaStatus.js';
import { ReplicaType } from '../../proto/gen/store/ReplicaType.js';
import { BatchKeySet } from './batch-key-set.js';
import type { CoreShared } from './core-shared.js';
import { FLAG_CXL, FLAG_HARD_PIN, FLAG_REUSED, FLAG_SOFT_PIN, FLAG_UPSERT, type ObjectMeta } from './object-meta.js';
import type { ObjectLifecycle } from './object-lifecycle.js';
import { PlacedReplicas } from './replica-capture.js';
import { freeHandles } from './replica-placement.js';
import { lookedUpKeyCode, replicaNumOf, writeError } from './write-validation.js';
import type { WritePlacement } from './write-placement.js';

/** A key of an end or revoke call, with the replica type it names. */
export type KeyCall = { key: string; replica_type: number };

/** Keys of a batch end looked up one by one before the rest are looked up together (see lookUpEnds). */
const END_CHAIN_LOOKUPS = 4;

/** The flags of the pins a write asks for. */
export function pinFlags(softPin: boolean, hardPin: boolean): number {
  return (softPin ? FLAG_SOFT_PIN : 0) | (hardPin ? FLAG_HARD_PIN : 0);
}

/** Checks of a PutEnd/PutRevoke-style call whose key was looked up (`meta`): the key, and the replica type. */
function checkKey(key: unknown, replicaType: number, meta: ObjectMeta | undefined): number {
  const code = lookedUpKeyCode(key, meta);
  if (code !== ErrorCode.OK) return code;
  // Memory writes are ended and revoked here; a file-tier file is only ever reported complete (endWriteOf).
  if (replicaType !== ReplicaType.MEMORY) return ErrorCode.INVALID_PARAMS;
  return ErrorCode.OK;
}

/** The value's length: the slices of one replica. */
function sizeOf(meta: ObjectMeta): number {
  return meta.sliceLengths().reduce((a, b) => a + b, 0);
}

export class WritePath {
  /** Keys of the batch in progress that were absent when looked up (a key listed twice is looked up again). */
  private readonly batchSeen: BatchKeySet;

  constructor(
    private readonly s: CoreShared,
    private readonly life: ObjectLifecycle,
    private readonly placement: WritePlacement,
  ) {
    this.batchSeen = new BatchKeySet(s.keyHashSeed);
  }

  putStart(req: PutStartRequest__Output, now: number): PutStartResponse__Output {
    const code = writeError(req);
    if (code !== ErrorCode.OK) return { status_code: code, replica_list: [] };
    return this.putStartOf(req, this.s.objects.get(req.key), now);
  }

  /**
   * PutStart per request, in order, with the same outcome as one putStart after another. The
   * keys are looked up together first (ObjectTable.getMany: their cache misses overlap); a
   * looked-up object stays valid until an object is deleted (eviction, a preempted zombie), after
   * which keys are looked up one by one again, and a key listed twice is looked up again.
   */
  batchPutStart(req: BatchPutStartRequest__Output, now: number): BatchPutStartResponse__Output {
    const requests = req.requests;
    if (!Array.isArray(requests)) return { status_code: ErrorCode.INVALID_PARAMS, results: [] };
    const s = this.s;
    const n = requests.length;
    const results = new Array<PutStartResponse__Output>(n);
    const keys = new Array<unknown>(n);
    for (let i = 0; i < n; i++) keys[i] = requests[i].key;
    const found = s.objects.getMany(keys);
    const removals = s.removals;
    const seen = this.batchSeen;
    const placement = this.placement;
    placement.beginBatch();
    try {
      for (let i = 0; i < n; i++) {
        const r = requests[i];
        const code = writeError(r);
        if (code !== ErrorCode.OK) {
          results[i] = { status_code: code, replica_list: [] };
          continue;
        }
        const key = r.key;
        let existing = s.removals === removals ? found[i] : s.objects.get(key);
        // Absent when looked up, but an earlier request of this batch may have put it.
        if (existing === undefined && n > 1 && !seen.add(key)) existing = s.objects.get(key);
        results[i] = this.putStartOf(r, existing, now);
      }
    } finally {
      seen.clear();
      placement.endBatch();
    }
    return { status_code: ErrorCode.OK, results };
  }

  /** PutStart of a valid request; `existing` is objects.get(req.key). */
  private putStartOf(req: PutStartRequest__Output, existing: ObjectMeta | undefined, now: number): PutStartResponse__Output {
    const s = this.s;
    const placement = this.placement;
    const key = req.key;
    const cfg = req.config;
    const sliceLengths = req.slice_lengths;
    const replicaNum = replicaNumOf(cfg);
    const preferred = cfg?.preferred_segment ?? '';
    let code: number | undefined;
    // An object held only by the file tier exists too (spec: immutable until removed).
    if (existing === undefined && s.files.enabled && s.files.has(key)) return { status_code: ErrorCode.OBJECT_ALREADY_EXISTS, replica_list: [] };
    if (existing !== undefined) {
      if (existing.complete || !placement.preemptible(existing, now)) return { status_code: ErrorCode.OBJECT_ALREADY_EXISTS, replica_list: [] };
      // The zombie writer may still write into its buffers: place first so the new space is not
      // the old space (spec: "the old space is not reused"), unless nothing else is left.
      code = placement.place(sliceLengths, replicaNum, preferred, now);
      if (s.objects.get(key) === existing && !existing.complete) this.life.abortWrite(key, existing); // eviction may have released it
      if (s.objects.has(key)) {
        if (code === ErrorCode.OK) s.placer.free();
        return { status_code: ErrorCode.OBJECT_ALREADY_EXISTS, replica_list: [] };
      }
      if (code === ErrorCode.NO_AVAILABLE_HANDLE) code = undefined;
    }
    code ??= placement.place(sliceLengths, replicaNum, preferred, now);
    if (code !== ErrorCode.OK) return { status_code: code, replica_list: [] };
    const flags = ReplicaStatus.INITIALIZED | pinFlags(cfg?.with_soft_pin === true, cfg?.with_hard_pin === true) | (s.placer.cxl ? FLAG_CXL : 0);
    const meta = placement.insertWrite(key, sliceLengths.length, flags, now);
    return new PlacedReplicas(s.segments, meta);
  }

  putEnd(req: PutEndRequest__Output, now: number): PutEndResponse__Output {
    return { status_code: this.endWrite(req, now, req.slice_checksums) };
  }

  batchPutEnd(req: BatchKeysRequest__Output, now: number): BatchKeysResponse__Output {
    return this.batchEndWrite(req, now);
  }

  putRevoke(req: PutRevokeRequest__Output, now: number): PutRevokeResponse__Output {
    this.placement.suspect(req.failed_segments, now);
    return { status_code: this.revokeWrite(req) };
  }

  batchPutRevoke(req: BatchKeysRequest__Output, now: number): BatchKeysResponse__Output {
    this.placement.suspect(req.failed_segments, now);
    return this.batchRevokeWrite(req);
  }

  /** PutEnd / UpsertEnd: the write is done, replicas COMPLETE. Ending a complete object is a no-op. */
  endWrite(call: KeyCall, now: number, checksums?: readonly number[]): number {
    return this.endWriteOf(call.key, call.replica_type, typeof call.key === 'string' ? this.s.objects.get(call.key) : undefined, now, checksums);
  }

  /**
   * BatchPutEnd / BatchUpsertEnd: endWrite per key, with the objects of the whole batch looked up
   * first in one ObjectTable.getMany (their cache misses overlap; a lookup per key measured as the
   * largest cost of the put path). Ending a write never removes an object, so the looked-up
   * objects stay valid through the batch (a key listed twice finds its object complete the second time).
   */
  batchEndWrite(req: BatchKeysRequest__Output, now: number): BatchKeysResponse__Output {
    const keys = req.keys;
    if (!Array.isArray(keys)) return { status_code: ErrorCode.INVALID_PARAMS, results: [] };
    const found = this.lookUpEnds(keys);
    const replicaType = req.replica_type;
    const results = new Array<{ key: string; status_code: number }>(keys.length);
    const sums = req.checksums;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i];
      results[i] = { key, status_code: this.endWriteOf(key, replicaType, found[i], now, sums?.[i]?.crc32c) };
    }
    return { status_code: ErrorCode.OK, results };
  }

  /** PutRevoke / UpsertRevoke: the write is cancelled and its space returned. */
  revokeWrite(call: KeyCall): number {
    const meta = typeof call.key === 'string' ? this.s.objects.get(call.key) : undefined;
    const code = checkKey(call.key, call.replica_type, meta);
    if (code !== ErrorCode.OK) return code;
    if (meta === undefined) return ErrorCode.OBJECT_NOT_FOUND;
    if (meta.complete) return ErrorCode.INVALID_PARAMS; // nothing in flight; Remove deletes objects
    this.life.abortWrite(call.key, meta);
    return ErrorCode.OK;
  }

  /** BatchPutRevoke / BatchUpsertRevoke: revokeWrite per key, one KeyResult per key in request order. */
  batchRevokeWrite(req: BatchKeysRequest__Output): BatchKeysResponse__Output {
    if (!Array.isArray(req.keys)) return { status_code: ErrorCode.INVALID_PARAMS, results: [] };
    const replica_type = req.replica_type;
    return { status_code: ErrorCode.OK, results: req.keys.map((key) => ({ key, status_code: this.revokeWrite({ key, replica_type }) })) };
  }

  /**
   * objects.get(key) for every key of a batch end, found mostly without hashing. A batch usually
   * ends the writes one BatchPutStart began, in the same order, and those follow each other on the
   * in-flight list (appended in start order). So the object after key i's on its list is tried
   * first for key i+1: every object reachable through the list links is in the table, and keys
   * are unique there, so an equal key means the same object. Looked up before any write ends (ends
   * change the links). A batch in another order falls back to looking its keys up together.
   */
  private lookUpEnds(keys: readonly unknown[]): (ObjectMeta | undefined)[] {
    const n = keys.length;
    const found = new Array<ObjectMeta | undefined>(n);
    let next: ObjectMeta | null = null;
    let lookups = 0;
    for (let i = 0; i < n; i++) {
      const key = keys[i];
      let meta: ObjectMeta | undefined;
      if (next !== null && next.key === key) meta = next;
      else if (typeof key !== 'string') meta = undefined;
      else if (++lookups > END_CHAIN_LOOKUPS) return this.s.objects.getMany(keys, found);
      else meta = this.s.objects.get(key);
      found[i] = meta;
      next = meta === undefined ? null : meta.next;
    }
    return found;
  }

  /** endWrite of the object already looked up for `key` (`meta`: objects.get(key)). */
  private endWriteOf(key: string, replicaType: number, meta: ObjectMeta | undefined, now: number, checksums?: readonly number[]): number {
    // A writer's file of the object is complete (file tier): the index takes it or refuses it.
    if (replicaType === ReplicaType.DISK && this.s.files.enabled) {
      const keyCode = lookedUpKeyCode(key, meta);
      if (keyCode !== ErrorCode.OK) return keyCode;
      // A master that did not see the memory write end (restarted, restored, a new leader) takes
      // the file of a complete object it holds, as the object is now.
      if (meta !== undefined && meta.complete && !this.s.files.has(key)) this.s.files.expect(key, sizeOf(meta), meta.checksums, now);
      return this.s.files.complete(key, checksums ?? []);
    }
    const code = checkKey(key, replicaType, meta);
    if (code !== ErrorCode.OK) return code;
    if (meta === undefined) return ErrorCode.OBJECT_NOT_FOUND;
    if (meta.complete) return ErrorCode.OK;
    if (checksums !== undefined && checksums.length !== 0) {
      if (checksums.length !== meta.slices || !checksums.every((c) => Number.isInteger(c) && c >= 0 && c <= 0xffffffff)) return ErrorCode.INVALID_PARAMS;
      meta.checksums = checksums;
    } else {
      meta.checksums = null;
    }
    const s = this.s;
    if (s.previous.size !== 0) {
      const prev = s.previous.get(key);
      if (prev !== undefined) {
        s.previous.delete(key);
        freeHandles(s.segments, prev.h);
      }
    }
    // The value's file follows, a Put's or an Upsert's (written by the client, rule 4; an
    // upsert's old file left the index when it started: file-index.ts `upsertStarted`).
    if (s.files.enabled) s.files.expect(key, sizeOf(meta), meta.checksums, now);
    meta.flags &= ~(FLAG_UPSERT | FLAG_REUSED);
    meta.version = s.nextVersion(); // a new value: readers' caches keyed by the old version miss it
    meta.status = ReplicaStatus.COMPLETE;
    meta.lastAccess = now;
    s.inFlight.delete(meta);
    s.order.add(meta);
    if (s.sink !== undefined) s.emitObject(meta);
    s.disk.completed(meta); // queued for offload (disk-tier.ts)
    return ErrorCode.OK;
  }
}
