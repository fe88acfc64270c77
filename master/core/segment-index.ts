// Per-segment index of objects: for each segment id, the set of objects with a buffer on it (their
// current placement, or the previous placement an upsert in flight may fall back to). Unmounting a
// segment or dropping a client then costs O(objects on that segment), not O(all objects).
// The caller reports every placement change as (segments before, segments after).
import { HANDLE_FIELDS } from './object-meta.js';
import type { ObjectMeta } from './object-meta.js';

const NONE: readonly number[] = [];

/** Distinct segment ids of one or two handle arrays (small: replicas x slices). */
export function segmentIdsOf(h: readonly number[], h2: readonly number[] = NONE): number[] {
  const out: number[] = [];
  for (const arr of [h, h2]) {
    for (let i = 0; i < arr.length; i += HANDLE_FIELDS) {
      const id = arr[i]!;
      if (!out.includes(id)) out.push(id);
    }
  }
  return out;
}

export class SegmentIndex {
  private readonly bySegment = new Map<number, Set<ObjectMeta>>();

  /** meta's segments went from `before` to `after` (either may be empty). */
  update(meta: ObjectMeta, before: readonly number[], after: readonly number[]): void {
    for (const id of before) if (!after.includes(id)) this.bySegment.get(id)?.delete(meta);
    for (const id of after) {
      if (before.includes(id)) continue;
      let set = this.bySegment.get(id);
      if (set === undefined) this.bySegment.set(id, (set = new Set()));
      set.add(meta);
    }
  }

  /** A snapshot of the objects on a segment (safe to mutate the index while walking it). */
  objectsOn(segmentId: number): ObjectMeta[] {
    const set = this.bySegment.get(segmentId);
    return set === undefined ? [] : [...set];
  }

  has(segmentId: number, meta: ObjectMeta): boolean {
    return this.bySegment.get(segmentId)?.has(meta) ?? false;
  }

  /** The segment is gone; its (by then empty) entry goes too. */
  dropSegment(segmentId: number): void {
    this.bySegment.delete(segmentId);
  }

  /** Number of (segment, object) entries. */
  get entries(): number {
    let n = 0;
    for (const set of this.bySegment.values()) n += set.size;
    return n;
  }
}
