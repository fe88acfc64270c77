// The removal RPCs of the core: Remove, RemoveByRegex and RemoveAll (those two walk the whole table
// in bounded steps, table-walk.ts), and BatchReplicaClear (a client's objects, or their replicas
// on one of its segments). Only complete objects without an active lease are removed.
import { ErrorCode } from '../../common/error-code.js';
import type { BatchReplicaClearRequest__Output } from '../../proto/gen/store/BatchReplicaClearRequest.js';
import type { BatchReplicaClearResponse__Output } from '../../proto/gen/store/BatchReplicaClearResponse.js';
import type { RemoveAllRequest__Output } from '../../proto/gen/store/RemoveAllRequest.js';
import type { RemoveAllResponse__Output } from '../../proto/gen/store/RemoveAllResponse.js';
import type { RemoveByRegexRequest__Output } from '../../proto/gen/store/RemoveByRegexRequest.js';
import type { RemoveByRegexResponse__Output } from '../../proto/gen/store/RemoveByRegexResponse.js';
import type { RemoveRequest__Output } from '../../proto/gen/store/RemoveRequest.js';
import type { RemoveResponse__Output } from '../../proto/gen/store/RemoveResponse.js';
import type { CoreShared } from './core-shared.js';
import { compileKeyRegex } from './key-regex.js';
import type { ObjectMeta } from './object-meta.js';
import type { ObjectLifecycle } from './object-lifecycle.js';
import type { Segment } from './segment-registry.js';
import { answered, removeSteps, STEP_OBJECTS, type Steps, type WalkHost } from './table-walk.js';
import { lookedUpKeyCode } from './write-validation.js';

export class RemovalPath {
  constructor(
    private readonly s: CoreShared,
    private readonly life: ObjectLifecycle,
    private readonly walkHost: WalkHost,
  ) {}

  remove(req: RemoveRequest__Output, now: number): RemoveResponse__Output {
    const meta = typeof req.key === 'string' ? this.s.objects.get(req.key) : undefined;
    const code = lookedUpKeyCode(req.key, meta);
    if (code !== ErrorCode.OK) return { status_code: code };
    if (meta === undefined) {
      if (this.s.files.remove(req.key)) return { status_code: ErrorCode.OK };
      // a file not scanned yet by a new leader's rescan would come back after it (read-path.ts)
      return { status_code: this.s.files.unknown(req.key) ? ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS : ErrorCode.OBJECT_NOT_FOUND };
    }
    if (!meta.complete) return { status_code: ErrorCode.REPLICA_IS_NOT_READY };
    if (meta.hardPinned && req.force !== true) return { status_code: ErrorCode.OBJECT_HARD_PINNED };
    if (meta.leased(now)) return { status_code: ErrorCode.OBJECT_HAS_LEASE };
    this.life.deleteObject(req.key, meta);
    this.s.files.remove(req.key);
    return { status_code: ErrorCode.OK };
  }

  /** RemoveByRegex in bounded steps: complete, unleased, not hard-pinned objects whose key matches. */
  removeByRegexSteps(req: RemoveByRegexRequest__Output, now: number): Steps<RemoveByRegexResponse__Output> {
    const re = compileKeyRegex(req.key_regex);
    if (re === null) return answered({ status_code: ErrorCode.INVALID_PARAMS, removed_count: 0 });
    return this.withFiles(
      removeSteps(this.walkHost, (key, meta) => !meta.hardPinned && re.test(key), now),
      (key) => re.test(key),
    );
  }

  /** RemoveAll in bounded steps: every complete object without an active lease, hard-pinned ones included. */
  removeAllSteps(_req: RemoveAllRequest__Output, now: number): Steps<RemoveAllResponse__Output> {
    return this.withFiles(
      removeSteps(this.walkHost, () => true, now),
      () => true,
    );
  }

  /**
   * A removal walk over memory, then over the file tier's objects held only there (the walk's
   * deletions remove the files of the objects it deletes: MasterCore's walk host). Counted in
   * the same reply; in steps of STEP_OBJECTS keys.
   */
  private *withFiles(
    memory: Steps<RemoveAllResponse__Output & RemoveByRegexResponse__Output>,
    match: (key: string) => boolean,
  ): Steps<RemoveAllResponse__Output & RemoveByRegexResponse__Output> {
    const reply = yield* memory;
    const files = this.s.files;
    if (!files.enabled || files.size === 0 || reply.status_code !== ErrorCode.OK) return reply;
    let removed = Number(reply.removed_count ?? 0);
    let n = 0;
    for (const key of [...files.keys()]) {
      if (++n % STEP_OBJECTS === 0) yield;
      if (this.s.objects.get(key) !== undefined || !match(key)) continue;
      if (files.remove(key)) removed++;
    }
    return { status_code: ErrorCode.OK, removed_count: removed };
  }

  /**
   * Clears replicas of the listed objects owned by client_id (an object is owned by a client when
   * it has a replica on one of that client's segments). Empty segment_name: whole objects are
   * deleted. Given: only replicas on that segment (which must be the client's). Objects leased,
   * still being written, hard-pinned, or not the client's are skipped silently.
   */
  batchReplicaClear(req: BatchReplicaClearRequest__Output, now: number): BatchReplicaClearResponse__Output {
    if (typeof req.client_id !== 'string' || req.client_id.length === 0 || !Array.isArray(req.object_keys)) {
      return { status_code: ErrorCode.INVALID_PARAMS, cleared_keys: [] };
    }
    const s = this.s;
    const cleared: string[] = [];
    let target: Segment | undefined;
    if (req.segment_name) {
      target = s.segments.byName(req.segment_name);
      if (target === undefined || target.clientId !== req.client_id) return { status_code: ErrorCode.OK, cleared_keys: [] };
    }
    for (const key of req.object_keys) {
      const meta = s.objects.get(key);
      if (meta === undefined || !meta.complete || meta.leased(now) || meta.hardPinned) continue;
      if (target === undefined) {
        if (!this.ownedBy(meta, req.client_id)) continue;
        this.life.deleteObject(key, meta);
      } else {
        if (!meta.hasHandleOn(target.id)) continue;
        this.life.dropReplicas(key, meta, target.id);
      }
      cleared.push(key);
    }
    return { status_code: ErrorCode.OK, cleared_keys: cleared };
  }

  private ownedBy(meta: ObjectMeta, clientId: string): boolean {
    for (let k = 0; k < meta.handleCount; k++) if (this.s.segments.byId(meta.segAt(k))?.clientId === clientId) return true;
    return false;
  }
}
