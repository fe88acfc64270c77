// Intrusive doubly linked list of ObjectMeta in least-recently-used order: the head is the least
// recently used object. Links live on the objects themselves (`prev`, `next`, FLAG_LISTED), so
// append, prepend, remove and move-to-tail are O(1) and cost no allocation. An object is on at most one
// list at a time; the caller picks which.
import { FLAG_LISTED } from './object-meta.js';
import type { ObjectMeta } from './object-meta.js';
import { linkAtHead, linkAtTail, unlink } from './intrusive-links.js';

export class LruList {
  head: ObjectMeta | null = null;
  tail: ObjectMeta | null = null;
  size = 0;

  /** Adds meta at the most-recently-used end. meta must not be on any list. */
  append(meta: ObjectMeta): void {
    if (meta.listed) throw new Error(`object ${meta.key} is already on an eviction list`);
    linkAtTail(this, meta);
    meta.flags |= FLAG_LISTED;
    this.size++;
  }

  /** Adds meta at the least-recently-used end (the next to go). meta must not be on any list. */
  prepend(meta: ObjectMeta): void {
    if (meta.listed) throw new Error(`object ${meta.key} is already on an eviction list`);
    linkAtHead(this, meta);
    meta.flags |= FLAG_LISTED;
    this.size++;
  }

  /** Unlinks meta, which must be on this list. */
  remove(meta: ObjectMeta): void {
    unlink(this, meta);
    meta.flags &= ~FLAG_LISTED;
    this.size--;
  }

  /** Moves meta (on this list) to the most-recently-used end. */
  moveToTail(meta: ObjectMeta): void {
    if (this.tail === meta) return;
    this.remove(meta);
    this.append(meta);
  }

  *[Symbol.iterator](): IterableIterator<ObjectMeta> {
    for (let m = this.head; m !== null; m = m.next) yield m;
  }
}
