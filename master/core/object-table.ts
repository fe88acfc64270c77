// The object map of the core, key -> ObjectMeta, split over SHARDS JavaScript Maps by a hash of
// the key. One Map of millions of entries rehashes all of them in a single set() whenever it
// grows past a power of two: measured here, 125 ms at 2^20 entries and 325 ms at 2^21, during
// which the master answers nobody. Split 32 ways, each growth moves 1/32 of the entries (a few
// ms). Iteration goes shard by shard (insertion order within a shard; no order is promised
// overall), and deleting the entry just visited while iterating is allowed, as with a Map.
import type { ObjectMeta } from './object-meta.js';

const SHARDS = 32;
/** Characters hashed from each end of a long key (keys share long prefixes, so both ends count). */
const HASHED_ENDS = 24;

function shardOf(key: string): number {
  const n = key.length;
  let h = n;
  if (n <= 2 * HASHED_ENDS) {
    for (let i = 0; i < n; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x9e3779b1);
  } else {
    for (let i = 0; i < HASHED_ENDS; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x9e3779b1);
    for (let i = n - HASHED_ENDS; i < n; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x9e3779b1);
  }
  return (h ^ (h >>> 15)) & (SHARDS - 1);
}

export class ObjectTable {
  private readonly shards: Map<string, ObjectMeta>[] = Array.from({ length: SHARDS }, () => new Map<string, ObjectMeta>());
  private count = 0;

  get size(): number {
    return this.count;
  }

  get(key: string): ObjectMeta | undefined {
    return this.shards[shardOf(key)]!.get(key);
  }

  has(key: string): boolean {
    return this.shards[shardOf(key)]!.has(key);
  }

  set(key: string, meta: ObjectMeta): void {
    const shard = this.shards[shardOf(key)]!;
    const before = shard.size;
    shard.set(key, meta);
    this.count += shard.size - before;
  }

  delete(key: string): boolean {
    const gone = this.shards[shardOf(key)]!.delete(key);
    if (gone) this.count--;
    return gone;
  }

  *[Symbol.iterator](): IterableIterator<[string, ObjectMeta]> {
    for (const shard of this.shards) yield* shard;
  }
}
