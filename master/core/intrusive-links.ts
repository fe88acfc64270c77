// The link and unlink steps shared by the core's intrusive lists (lru-list.ts, in-flight-list.ts):
// ObjectMeta.prev/next chain the objects themselves, so adding and removing cost no allocation.
import type { ObjectMeta } from './object-meta.js';

export interface LinkEnds {
  head: ObjectMeta | null;
  tail: ObjectMeta | null;
}

/** Links meta after the tail (meta must be on no list). */
export function linkAtTail(ends: LinkEnds, meta: ObjectMeta): void {
  meta.prev = ends.tail;
  meta.next = null;
  if (ends.tail === null) ends.head = meta;
  else ends.tail.next = meta;
  ends.tail = meta;
}

/** Links meta before the head (meta must be on no list). */
export function linkAtHead(ends: LinkEnds, meta: ObjectMeta): void {
  meta.next = ends.head;
  meta.prev = null;
  if (ends.head === null) ends.tail = meta;
  else ends.head.prev = meta;
  ends.head = meta;
}

/** Unlinks meta (which must be on the list whose ends these are) and clears its links. */
export function unlink(ends: LinkEnds, meta: ObjectMeta): void {
  const { prev, next } = meta;
  if (prev === null) ends.head = next;
  else prev.next = next;
  if (next === null) ends.tail = prev;
  else next.prev = prev;
  meta.prev = null;
  meta.next = null;
}
