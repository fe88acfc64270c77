// How objects leave the core, or lose replicas: a write cancelled (revoked, preempted, released
// by eviction, its segment gone), a complete object deleted (removal, eviction, a replica clear),
// an object's replicas on one segment dropped. Each keeps every structure of core-shared.ts in
// step: the table, the eviction and in-flight lists, leases, pin counts, the upserts' previous
// placements, re-replication, and the change sink.
import type { CoreShared } from './core-shared.js';
import { writeGeneration, type ObjectMeta } from './object-meta.js';
import { dropReplicasOn, freeHandles, quarantineHandles } from './replica-placement.js';

/** At most this many spare ObjectMetas are kept for reuse (see CoreShared.spareMetas). */
const SPARE_METAS = 4096;

export class ObjectLifecycle {
  constructor(private readonly s: CoreShared) {}

  /**
   * Cancels an unfinished write: its space is freed. An upsert that moved the object gets its
   * previous placement back (still complete); any other write leaves no object behind (an
   * in-place upsert has overwritten the old bytes, so they cannot be trusted).
   */
  abortWrite(key: string, meta: ObjectMeta): void {
    const s = this.s;
    quarantineHandles(s.segments, meta.h, writeGeneration(meta)); // its writer may still be sending
    s.inFlight.delete(meta);
    const prev = s.previous.get(key);
    if (prev !== undefined) {
      s.previous.delete(key);
      meta.h = prev.h;
      meta.slices = prev.slices;
      s.setFlags(meta, prev.flags);
      s.order.add(meta); // complete again; its old LRU place is not kept
      if (s.sink !== undefined) s.emitObject(meta);
      return;
    }
    this.forgetObject(key, meta);
  }

  /** Deletes a complete object (removal, eviction, a replica clear) and frees its space. */
  deleteObject(key: string, meta: ObjectMeta): void {
    // Its file, if any, serves it from now on: only if it holds this value (file-index.ts).
    if (this.s.files.size !== 0 && meta.hasChecksums) this.s.files.memoryGone(key, meta.checksums);
    this.s.sink?.removed(key);
    freeHandles(this.s.segments, meta.h);
    this.forgetObject(key, meta);
  }

  /** Drops an object from the map and from the lease and pin counts (its space is already freed). */
  forgetObject(key: string, meta: ObjectMeta): void {
    const s = this.s;
    s.rereplicator.forget(key);
    s.objects.delete(key);
    s.removals++;
    s.order.remove(meta);
    s.inFlight.delete(meta); // no-op unless a write on it was unfinished (both use meta.prev/next)
    const leased = meta.leaseUntil !== 0;
    s.leases.forget(meta);
    s.countPins(meta.flags, -1);
    if (!leased && s.spareMetas.length < SPARE_METAS) s.spareMetas.push(meta);
  }

  /** Removes the replicas of a complete object that touch segmentId; no replica left, no object. Returns the replicas it had (0: deleted). */
  dropReplicas(key: string, meta: ObjectMeta, segmentId: number): number {
    const s = this.s;
    const had = meta.replicaCount;
    const kept = dropReplicasOn(s.segments, meta.h, meta.slices, segmentId);
    if (kept.length === 0) {
      s.sink?.removed(key);
      this.forgetObject(key, meta);
      return 0;
    }
    s.rereplicator.invalidate(key); // a copy may be reading a replica just dropped
    meta.h = kept;
    if (s.sink !== undefined) s.emitObject(meta);
    return had;
  }
}
