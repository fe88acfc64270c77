// The object map of the core, key -> ObjectMeta: an open-addressing hash table (linear probing)
// that keeps the full 32-bit hash of every key in an Int32Array beside the ObjectMeta array.
// Why not a JavaScript Map: with a million entries a Map lookup of a freshly decoded key walks a
// bucket array, a chain of entries and the stored key strings (each a cache miss) and measured
// 400-500 ns per key; here a probe reads one hash word and touches the stored object only when
// the whole hash matches (an absent key usually costs one cache line). The table is split over
// SHARDS sub-tables by the hash, so a growth rehashes 1/32 of the entries (a short pause, not one
// long one), and rehashing never re-reads a key (the hashes are kept). Shards fill at the same
// pace, so with one load limit all 32 would grow within a few thousand inserts (measured: 32
// rehashes of ~6 ms back to back around 512K objects, a 190 ms stall of the put path); each shard
// has its own limit between 1/4 and 1/2 full, which spreads the growths over a 2x range of
// sizes. Deleted slots become tombstones, cleared by the next rehash. Iteration goes slot by slot
// (no order is promised); deleting the entry just visited while iterating is allowed, as with a Map.
import type { ObjectMeta } from './object-meta.js';

const SHARD_BITS = 5;
const SHARDS = 1 << SHARD_BITS;
/** The shard is the top SHARD_BITS of the hash (bit 0 is always set, so never the low bits). */
const SHARD_SHIFT = 32 - SHARD_BITS;
const MIN_CAPACITY = 16;
/** Slot markers in the hash array; a live slot holds the key's hash with bit 0 set (odd). */
const EMPTY = 0;
const DELETED = 2;
/** Batch size up to which getMany works in preallocated scratch arrays. */
const SCRATCH = 4096;

/** A 32-bit hash of the whole key (multiply-xorshift per UTF-16 unit, then a final mix); odd. */
export function keyHash(key: string, seed: number): number {
  let h = seed ^ key.length;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x9e3779b1);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  return h | 1;
}

/** Load limit of shard s, in 1/1024ths of its capacity: 1/4 .. 1/2 (never above the usual 1/2), evenly spread. */
function loadLimit(s: number): number {
  return 256 + Math.round((256 * s) / (SHARDS - 1));
}

class Shard {
  hashes = new Int32Array(MIN_CAPACITY);
  metas: (ObjectMeta | undefined)[] = new Array<ObjectMeta | undefined>(MIN_CAPACITY).fill(undefined);
  /** log2 of the capacity */
  bits = Math.log2(MIN_CAPACITY);
  live = 0;
  /** live + tombstones: what probing has to step over */
  used = 0;
  /** `used` beyond which the shard is rehashed (grown when live entries are most of it). */
  private maxUsed: number;

  constructor(private readonly limit: number) {
    this.maxUsed = this.maxUsedAt(MIN_CAPACITY);
  }

  private maxUsedAt(capacity: number): number {
    return Math.floor((capacity * this.limit) / 1024);
  }

  /** Home slot of a hash: the high bits of its product with 2^32/phi (Fibonacci hashing). */
  home(h: number): number {
    return Math.imul(h, 0x9e3779b1) >>> (32 - this.bits);
  }

  /** Slot of key, or -1. */
  find(key: string, h: number): number {
    const hashes = this.hashes;
    const mask = hashes.length - 1;
    for (let i = this.home(h); ; i = (i + 1) & mask) {
      const s = hashes[i];
      if (s === EMPTY) return -1;
      if (s === h && this.metas[i]!.key === key) return i;
    }
  }

  /** Inserts or replaces; true when the key is new. */
  set(key: string, h: number, meta: ObjectMeta): boolean {
    const hashes = this.hashes;
    const mask = hashes.length - 1;
    let free = -1;
    let i = this.home(h);
    for (; ; i = (i + 1) & mask) {
      const s = hashes[i];
      if (s === EMPTY) break;
      if (s === DELETED) {
        if (free < 0) free = i;
      } else if (s === h && this.metas[i]!.key === key) {
        this.metas[i] = meta;
        return false;
      }
    }
    if (free >= 0) i = free;
    else this.used++;
    hashes[i] = h;
    this.metas[i] = meta;
    this.live++;
    // at most 1/4..1/2 full counting tombstones: probe runs stay short; a shard mostly of
    // tombstones is rebuilt at its size, one mostly live doubles
    if (this.used > this.maxUsed) this.rehash(this.live * 2 > this.maxUsed ? this.bits + 1 : this.bits);
    return true;
  }

  deleteAt(i: number): void {
    this.hashes[i] = DELETED;
    this.metas[i] = undefined;
    this.live--;
  }

  private rehash(bits: number): void {
    const oldHashes = this.hashes;
    const oldMetas = this.metas;
    const cap = 1 << bits;
    const hashes = new Int32Array(cap);
    const metas = new Array<ObjectMeta | undefined>(cap).fill(undefined);
    this.bits = bits;
    const mask = cap - 1;
    for (let j = 0; j < oldHashes.length; j++) {
      const s = oldHashes[j];
      if ((s & 1) === 0) continue;
      let i = this.home(s);
      while (hashes[i] !== EMPTY) i = (i + 1) & mask;
      hashes[i] = s;
      metas[i] = oldMetas[j];
    }
    this.hashes = hashes;
    this.metas = metas;
    this.used = this.live;
    this.maxUsed = this.maxUsedAt(cap);
  }
}

export class ObjectTable {
  private readonly shards: Shard[] = Array.from({ length: SHARDS }, (_, s) => new Shard(loadLimit(s)));
  private count = 0;
  /** getMany's per-key hashes and home slots, reused across calls. */
  private readonly scratchHash = new Int32Array(SCRATCH);
  private readonly scratchSlot = new Int32Array(SCRATCH);
  /** Where getMany leaves the values it read only to start their loads (kept so they are not optimised away). */
  sink = 0;

  /** `seed` varies the hash function (a fixed default keeps runs reproducible). */
  constructor(private readonly seed = 0x2545f491) {}

  get size(): number {
    return this.count;
  }

  /** Slot count of each shard (diagnostics: shows which shards have grown). */
  shardCapacities(): number[] {
    return this.shards.map((s) => s.hashes.length);
  }

  get(key: string): ObjectMeta | undefined {
    const h = keyHash(key, this.seed);
    const shard = this.shards[h >>> SHARD_SHIFT];
    const i = shard.find(key, h);
    return i < 0 ? undefined : shard.metas[i];
  }

  /**
   * out[k] = get(keys[k]) for every k (undefined for a non-string). Faster than a get() per key
   * on a big table: the work goes in passes over the whole batch (hash words, then candidate
   * objects, then their key strings), so each pass issues its memory loads for every key before
   * any is needed and the cache misses of different keys overlap instead of queuing. Returns `out`
   * (a fresh array unless one is given).
   */
  getMany(keys: readonly unknown[], out: (ObjectMeta | undefined)[] = new Array<ObjectMeta | undefined>(keys.length)): (ObjectMeta | undefined)[] {
    const n = keys.length;
    // an unusually big batch gets arrays of its own rather than pinning a big scratch space
    const hs = n <= SCRATCH ? this.scratchHash : new Int32Array(n);
    const slots = n <= SCRATCH ? this.scratchSlot : new Int32Array(n);
    const shards = this.shards;
    let touch = 0;
    // pass 1: hash each key and read the hash word of its home slot
    for (let k = 0; k < n; k++) {
      const key = keys[k];
      if (typeof key !== 'string') {
        hs[k] = 0; // no live slot holds 0
        continue;
      }
      const h = keyHash(key, this.seed);
      const shard = shards[h >>> SHARD_SHIFT];
      const home = shard.home(h);
      hs[k] = h;
      slots[k] = home;
      touch ^= shard.hashes[home];
    }
    // pass 2: probe to the first slot holding the same hash (the words are cached now); read its object
    for (let k = 0; k < n; k++) {
      const h = hs[k];
      out[k] = undefined;
      if (h === 0) continue;
      const shard = shards[h >>> SHARD_SHIFT];
      const hashes = shard.hashes;
      const mask = hashes.length - 1;
      for (let i = slots[k]; ; i = (i + 1) & mask) {
        const w = hashes[i];
        if (w === EMPTY) break;
        if (w === h) {
          const meta = shard.metas[i]!;
          out[k] = meta;
          touch ^= meta.flags;
          break;
        }
      }
    }
    // pass 3: read the candidates' key strings (their headers)...
    for (let k = 0; k < n; k++) {
      const meta = out[k];
      if (meta !== undefined) touch ^= meta.key.length;
    }
    // pass 4: ...and compare; a different key under the same 32-bit hash takes the full probe
    for (let k = 0; k < n; k++) {
      const meta = out[k];
      if (meta !== undefined && meta.key !== keys[k]) out[k] = this.get(keys[k] as string);
    }
    this.sink = touch;
    return out;
  }

  has(key: string): boolean {
    const h = keyHash(key, this.seed);
    return this.shards[h >>> SHARD_SHIFT].find(key, h) >= 0;
  }

  /** meta.key must be `key` (lookups compare against it, so the table holds no key array). */
  set(key: string, meta: ObjectMeta): void {
    if (meta.key !== key) throw new Error(`ObjectTable.set: meta.key "${meta.key}" is not the key "${key}"`);
    const h = keyHash(key, this.seed);
    if (this.shards[h >>> SHARD_SHIFT].set(key, h, meta)) this.count++;
  }

  delete(key: string): boolean {
    const h = keyHash(key, this.seed);
    const shard = this.shards[h >>> SHARD_SHIFT];
    const i = shard.find(key, h);
    if (i < 0) return false;
    shard.deleteAt(i);
    this.count--;
    return true;
  }

  *[Symbol.iterator](): IterableIterator<[string, ObjectMeta]> {
    for (const shard of this.shards) {
      // a rehash (only set() causes one) swaps the arrays; the walk stays on the ones it began with
      const hashes = shard.hashes;
      const metas = shard.metas;
      for (let i = 0; i < hashes.length; i++) {
        const meta = metas[i];
        if ((hashes[i] & 1) === 1 && meta !== undefined) yield [meta.key, meta];
      }
    }
  }
}
