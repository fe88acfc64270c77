// The unfinished writes (PutStart/UpsertStart not yet ended or revoked), in start order: an
// intrusive doubly linked list through ObjectMeta.prev/next, which are free while a write is in
// flight (only complete objects sit on an eviction list). Adding and removing cost no allocation
// and no hashing, where a Map keyed by the object's key cost two hash-table operations per write.
// Start times ascend from head to tail, so zombie writes are a prefix (eviction.ts).
import type { ObjectMeta } from './object-meta.js';
import { linkAtTail, unlink } from './intrusive-links.js';

export class InFlightList {
  head: ObjectMeta | null = null;
  tail: ObjectMeta | null = null;
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** Whether meta is on this list (meta must not be on an eviction list, which uses the same links). */
  has(meta: ObjectMeta): boolean {
    return !meta.listed && (meta.prev !== null || this.head === meta);
  }

  /** Appends meta (its write just started); no-op when it is already on the list. */
  add(meta: ObjectMeta): void {
    if (meta.listed) throw new Error(`object ${meta.key} is on an eviction list; it cannot be in flight`);
    if (this.has(meta)) return;
    linkAtTail(this, meta);
    this.count++;
  }

  /** Takes meta off the list (its write ended or was cancelled); false when it was not on it. */
  delete(meta: ObjectMeta): boolean {
    if (!this.has(meta)) return false;
    unlink(this, meta);
    this.count--;
    return true;
  }

  /** Oldest write first; the object just visited may be deleted during the walk. */
  *values(): IterableIterator<ObjectMeta> {
    for (let m = this.head; m !== null;) {
      const next = m.next;
      yield m;
      m = next;
    }
  }
}
