// The local hot cache (docs/tiers.md, "Hot cache"): a client-side DRAM cache of values read from
// DISK (SSD tier) replicas, so a value read again is served from this process's memory instead of
// a store service's SSD. Pure logic over a storage Buffer the caller provides (process memory, or
// a memfd mapping with MC_STORE_LOCAL_HOT_CACHE_USE_SHM).
//
// Staleness rule: an entry is keyed by the object's key, the value's version (the master gives a
// new one each time a write of the key ends: GetReplicaListResponse.version) and the identity of
// the replica it was read from: each handle's segment, registration (incarnation), address and
// size, and the slices' CRC-32C its writer recorded, if any. A rewritten object (a new put after a
// remove, an upsert, in place or moved) has a new version, so its new replica list never finds
// the old entry, whatever its place and checksums. From a master that gives no version (0) the
// checksums stand in for it, and a replica list without them is not cached (equal bytes at an
// unchanged place are the same value, up to a CRC-32C collision). Entries are only ever looked up
// with a replica list the master granted for the read in progress.
//
// Space is counted in blocks of MC_STORE_LOCAL_HOT_BLOCK_SIZE: a value takes ceil(size / block)
// blocks (not necessarily adjacent); the least recently used entries give theirs up. Admission:
// a count-min sketch counts misses per key; a value is admitted once its key was missed
// MC_STORE_LOCAL_HOT_ADMISSION_THRESHOLD times, so one-off reads do not flush the cache.
import { CountMinSketch } from '../common/count-min-sketch.js';
import { parseSize } from '../common/size.js';
import type { ReplicaInfo__Output } from '../proto/gen/store/ReplicaInfo.js';
import { InvalidParamsError } from './errors.js';

export const HOT_BLOCK_SIZE_DEFAULT = 2 * 1024 * 1024;
export const HOT_ADMISSION_THRESHOLD_DEFAULT = 2;

export interface HotCacheSettings {
  capacityBytes: number;
  blockSize: number;
  useShm: boolean;
  admissionThreshold: number;
}

/** The hot cache's settings from the environment; undefined when MC_STORE_LOCAL_HOT_CACHE_SIZE is unset (off). */
export function hotCacheSettings(env: Record<string, string | undefined>): HotCacheSettings | undefined {
  const sizeText = env.MC_STORE_LOCAL_HOT_CACHE_SIZE;
  if (sizeText === undefined || sizeText === '') return undefined;
  const size = (name: string, text: string): number => {
    let v: number;
    try {
      v = parseSize(text);
    } catch (e) {
      throw new InvalidParamsError(`${name}=${text}: ${(e as Error).message}`);
    }
    if (!Number.isSafeInteger(v) || v <= 0) throw new InvalidParamsError(`${name}=${text}: must be a positive size`);
    return v;
  };
  const capacityBytes = size('MC_STORE_LOCAL_HOT_CACHE_SIZE', sizeText);
  const blockText = env.MC_STORE_LOCAL_HOT_BLOCK_SIZE;
  const blockSize = blockText ? size('MC_STORE_LOCAL_HOT_BLOCK_SIZE', blockText) : HOT_BLOCK_SIZE_DEFAULT;
  if (blockSize > capacityBytes) throw new InvalidParamsError(`MC_STORE_LOCAL_HOT_BLOCK_SIZE=${blockText} is larger than the cache (${sizeText})`);
  const thresholdText = env.MC_STORE_LOCAL_HOT_ADMISSION_THRESHOLD;
  const admissionThreshold = thresholdText ? Number(thresholdText) : HOT_ADMISSION_THRESHOLD_DEFAULT;
  if (!Number.isSafeInteger(admissionThreshold) || admissionThreshold < 1) {
    throw new InvalidParamsError(`MC_STORE_LOCAL_HOT_ADMISSION_THRESHOLD=${thresholdText}: must be an integer >= 1`);
  }
  const shm = env.MC_STORE_LOCAL_HOT_CACHE_USE_SHM ?? '';
  return { capacityBytes, blockSize, useShm: shm === '1' || shm.toLowerCase() === 'true', admissionThreshold };
}

/**
 * The identity of a value of `key` read from `replica`, given the reply's `version` and
 * `sliceChecksums`, or undefined when it must not be cached (no version and no checksums).
 */
export function hotCacheId(key: string, replica: ReplicaInfo__Output, sliceChecksums: readonly number[], version: number): string | undefined {
  const sums = sliceChecksums.length === replica.handles.length ? sliceChecksums : [];
  if (version === 0 && sums.length === 0) return undefined;
  let id = `${key}\0${version}\0`;
  for (const h of replica.handles) id += `${h.segment_name}@${h.incarnation}:${h.buffer}+${h.size};`;
  return id + '\0' + sums.join(',');
}

interface Entry {
  blocks: number[];
  length: number;
}

export interface HotCacheStats {
  hits: number;
  misses: number;
  admitted: number;
  /** Values not admitted (below the threshold, or larger than the cache). */
  rejected: number;
  /** Entries given up for room. */
  evicted: number;
  usedBytes: number;
  capacityBytes: number;
}

export class HotCache {
  /** Entries by identity, least recently used first (a Map keeps insertion order; a hit re-inserts). */
  private readonly entries = new Map<string, Entry>();
  private readonly free: number[] = [];
  private readonly sketch = new CountMinSketch(1 << 14);
  private readonly blockCount: number;
  private hits = 0;
  private misses = 0;
  private admitted = 0;
  private rejected = 0;
  private evicted = 0;

  constructor(
    private readonly storage: Buffer,
    private readonly blockSize: number,
    private readonly admissionThreshold: number,
  ) {
    if (!Number.isSafeInteger(blockSize) || blockSize < 1) throw new RangeError(`HotCache block size must be a positive integer, got ${blockSize}`);
    this.blockCount = Math.floor(storage.length / blockSize);
    for (let b = this.blockCount - 1; b >= 0; b--) this.free.push(b);
  }

  /** A copy of the cached value for `id` (hotCacheId), or undefined (a miss, counted toward the key's admission). */
  get(key: string, id: string): Buffer | undefined {
    const e = this.lookup(key, id);
    if (e === undefined) return undefined;
    const out = Buffer.allocUnsafe(e.length);
    this.copyOut(e, out);
    return out;
  }

  /**
   * Copies the cached value for `id` into the start of `out` and returns its length, or returns -1
   * (a miss, counted toward the key's admission). `out` must hold the value (its size is the
   * replica's, known before the lookup).
   */
  copyInto(key: string, id: string, out: Uint8Array): number {
    const e = this.lookup(key, id);
    if (e === undefined) return -1;
    if (out.length < e.length) throw new RangeError(`hot cache: a ${e.length} B value does not fit in ${out.length} B`);
    this.copyOut(e, out);
    return e.length;
  }

  /** The entry for `id`, made the most recently used; a miss is counted. */
  private lookup(key: string, id: string): Entry | undefined {
    const e = this.entries.get(id);
    if (e === undefined) {
      this.misses++;
      this.sketch.add(key);
      return undefined;
    }
    this.entries.delete(id);
    this.entries.set(id, e); // most recently used
    this.hits++;
    return e;
  }

  /** Offers a value just read for `id`; kept when the key was missed often enough and it fits. */
  admit(key: string, id: string, value: Uint8Array): boolean {
    if (this.entries.has(id)) return true;
    const need = Math.ceil(value.length / this.blockSize) || 1;
    if (need > this.blockCount || this.sketch.estimate(key) < this.admissionThreshold) {
      this.rejected++;
      return false;
    }
    while (this.free.length < need) {
      const oldest = this.entries.keys().next();
      if (oldest.done) break;
      this.drop(oldest.value);
      this.evicted++;
    }
    const blocks = this.free.splice(this.free.length - need, need);
    const e: Entry = { blocks, length: value.length };
    for (let i = 0, at = 0; i < blocks.length; i++, at += this.blockSize) {
      const n = Math.min(this.blockSize, value.length - at);
      this.storage.set(value.subarray(at, at + n), blocks[i] * this.blockSize);
    }
    this.entries.set(id, e);
    this.admitted++;
    return true;
  }

  /** Forgets every entry of `key` (a writer of this process replaced or removed it). */
  forgetKey(key: string): void {
    const prefix = key + '\0';
    for (const id of [...this.entries.keys()]) if (id.startsWith(prefix)) this.drop(id);
  }

  stats(): HotCacheStats {
    return {
      hits: this.hits,
      misses: this.misses,
      admitted: this.admitted,
      rejected: this.rejected,
      evicted: this.evicted,
      usedBytes: (this.blockCount - this.free.length) * this.blockSize,
      capacityBytes: this.blockCount * this.blockSize,
    };
  }

  private drop(id: string): void {
    const e = this.entries.get(id);
    if (e === undefined) return;
    this.entries.delete(id);
    for (const b of e.blocks) this.free.push(b);
  }

  private copyOut(e: Entry, out: Uint8Array): void {
    for (let i = 0, at = 0; i < e.blocks.length; i++, at += this.blockSize) {
      const n = Math.min(this.blockSize, e.length - at);
      this.storage.copy(out, at, e.blocks[i] * this.blockSize, e.blocks[i] * this.blockSize + n);
    }
  }
}
