// Per-segment index of objects: for each segment id, the set of objects with a buffer on it (their
// current placement, or the previous placement an upsert in flight may fall back to). Unmounting a
// segment or dropping a client then costs O(objects on that segment), not O(all objects).
// The caller reports every placement change: `remove` with the handle arrays before it, `add` with
// those after (the flat arrays of object-meta.ts; no array is allocated here).
import { HANDLE_FIELDS } from './object-meta.js';
import type { ObjectMeta } from './object-meta.js';

const NONE: readonly number[] = [];

export class SegmentIndex {
  private readonly bySegment = new Map<number, Set<ObjectMeta>>();

  /** meta has buffers on the segments of h (and h2). */
  add(meta: ObjectMeta, h: readonly number[], h2: readonly number[] = NONE): void {
    for (let i = 0; i < h.length; i += HANDLE_FIELDS) this.setOf(h[i]!).add(meta);
    for (let i = 0; i < h2.length; i += HANDLE_FIELDS) this.setOf(h2[i]!).add(meta);
  }

  /** meta no longer has buffers on the segments of h (and h2). */
  remove(meta: ObjectMeta, h: readonly number[], h2: readonly number[] = NONE): void {
    for (let i = 0; i < h.length; i += HANDLE_FIELDS) this.bySegment.get(h[i]!)?.delete(meta);
    for (let i = 0; i < h2.length; i += HANDLE_FIELDS) this.bySegment.get(h2[i]!)?.delete(meta);
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

  private setOf(segmentId: number): Set<ObjectMeta> {
    let set = this.bySegment.get(segmentId);
    if (set === undefined) this.bySegment.set(segmentId, (set = new Set()));
    return set;
  }
}

/** Distinct segment ids of one or two handle arrays (for checks; small: replicas x slices). */
export function segmentIdsOf(h: readonly number[], h2: readonly number[] = NONE): number[] {
  const out: number[] = [];
  for (const arr of [h, h2]) {
    for (let i = 0; i < arr.length; i += HANDLE_FIELDS) if (!out.includes(arr[i]!)) out.push(arr[i]!);
  }
  return out;
}
