// Compact per-object metadata. The master holds a million of these, so each is one small object
// of small-integer fields: the usual object's one handle (one replica of one slice) is held in
// three fields, other layouts in one flat numeric array; replica status, pins and memory type are
// packed into one integer, and segments are referenced by their small integer id (see
// segment-registry.ts), never by name. `prev`/`next` link the object into one eviction list
// (lru-list.ts) so LRU order is kept without re-inserting map entries.
import { ReplicaStatus } from '../../proto/gen/store/ReplicaStatus.js';

export type ReplicaStatusValue = (typeof ReplicaStatus)[keyof typeof ReplicaStatus];

const STATUS_MASK = 0x7;
export const FLAG_SOFT_PIN = 1 << 3; // asked for at Put; effective while accessed within the soft-pin TTL
export const FLAG_HARD_PIN = 1 << 4;
export const FLAG_CXL = 1 << 5; // buffers sit in CXL memory
export const FLAG_UPSERT = 1 << 6; // the write in flight is an upsert
export const FLAG_REUSED = 1 << 7; // ...overwriting the previous placement in place
export const FLAG_LISTED = 1 << 8; // linked into an eviction list (lru-list.ts)
export const FLAG_DISK_ONLY = 1 << 9; // every replica is on offload (SSD) segments: on the disk eviction list (disk-tier.ts)
export const FLAG_AWAITING_COPY = 1 << 10; // picked by memory eviction, its offload copy on the way: on no eviction list until it is in (disk-tier.ts)

/** Stride of `h`: [segmentId, allocatorBlock, size] per handle. */
export const HANDLE_FIELDS = 3;

/** Largest size held inline: a small integer for V8 (a larger one would give every object a number box). */
const INLINE_SIZE_MAX = 0x7fffffff;

/**
 * Times are stored as two small integers each: whole PERIOD_MS periods, and ms within the period.
 * V8 keeps a small integer inside the object; a field holding a bigger or fractional number
 * instead points at a separate number object. Every read updates two times of the object it
 * reads (lease, last access), so with plain number fields each read made a long-lived object
 * point at a freshly allocated number, and every young-generation collection had to visit all
 * objects read since the last one. Measured on BatchGetReplicaList: scavenge pauses fell from
 * 7 ms to 1.5 ms and throughput rose 10-25%. The master's clock gives whole ms for this reason.
 */
const PERIOD_MS = 2 ** 30;

export class ObjectMeta {
  // The fields are given their values only in ObjectMeta.create (see there why); `declare` keeps
  // TypeScript from emitting initializers for a constructor that never runs.
  declare private leaseHi: number;
  declare private leaseLo: number;
  declare private accessHi: number;
  declare private accessLo: number;
  /**
   * The one handle of an object with exactly one (segment id, block, size), saving the array and
   * its store (two of the four heap objects a stored object was, the others being this record and
   * its key). Segment ids start at 1, so seg0 0 means the handles are in `hs`.
   */
  declare private seg0: number;
  declare private block0: number;
  declare private size0: number;
  declare private hs: number[] | null;
  declare slices: number;
  declare flags: number;
  /** The object's key (the same string the object map holds, so it costs one reference). */
  declare key: string;
  /**
   * Neighbours in the list the object is on: an eviction list while complete (FLAG_LISTED), the
   * in-flight list (in-flight-list.ts) while a write is unfinished; null at the ends or on none.
   */
  declare prev: ObjectMeta | null;
  declare next: ObjectMeta | null;
  /**
   * CRC-32C of each slice as the writer recorded it at PutEnd: one slice's as a signed 32-bit
   * integer (a small integer for V8, no number box), several as an array of them; null: none.
   */
  declare private crc: number | number[] | null;
  /**
   * The value's version (CoreShared.nextVersion), given when a write ends and carried in read
   * replies: a rewrite of the key (an upsert in place, a put after a removal) has a new one. A
   * small integer (0 until the first write ends).
   */
  declare version: number;

  private constructor() {}

  /**
   * A new record. It is made by an object literal, not by `new`: V8 tracks the survival of
   * objects made at a literal and, once most of them live on (as records do), allocates that
   * literal's objects straight in the old generation. Objects made by `new` always start in the
   * young generation, so each record was copied twice by young-generation collections before
   * settling, with the table and list pointers to it tracked meanwhile. Measured: the collector's
   * share of the master's put path fell from 23% to 9%; alternated BatchPutStart+BatchPutEnd runs
   * gave 6-30% more keys/s, and the core alone 20-30% less CPU per put. Setting the prototype in
   * the literal is a runtime call (most of what create costs), still far cheaper than the copies.
   * Every record is made here, so all have one hidden class.
   */
  static create(h: number[], slices: number, flags: number, leaseUntil: number, lastAccess: number, key = ''): ObjectMeta {
    const meta = {
      __proto__: ObjectMeta.prototype,
      leaseHi: 0,
      leaseLo: 0,
      accessHi: 0,
      accessLo: 0,
      seg0: 0,
      block0: 0,
      size0: 0,
      hs: null,
      slices,
      flags,
      key,
      prev: null,
      next: null,
      crc: null,
      version: 0,
    } as unknown as ObjectMeta;
    meta.leaseUntil = leaseUntil;
    meta.lastAccess = lastAccess;
    meta.h = h;
    return meta;
  }

  /**
   * Handles, replica-major: replica r, slice j starts at (r * slices + j) * HANDLE_FIELDS. A new
   * array for an object with one handle: read it once, and change handles only by assigning.
   */
  get h(): number[] {
    if (this.hs !== null) return this.hs;
    return this.seg0 === 0 ? [] : [this.seg0, this.block0, this.size0];
  }

  set h(h: number[]) {
    if (h.length === HANDLE_FIELDS && h[2] <= INLINE_SIZE_MAX) this.setHandle(h[0], h[1], h[2]);
    else {
      this.hs = h;
      this.seg0 = this.block0 = this.size0 = 0;
    }
  }

  /** Makes (segment id, block, size) the object's only handle. */
  setHandle(seg: number, block: number, size: number): void {
    if (size > INLINE_SIZE_MAX) {
      this.h = [seg, block, size];
      return;
    }
    this.seg0 = seg;
    this.block0 = block;
    this.size0 = size;
    this.hs = null;
  }

  /** The slices' CRC-32C values (unsigned), or [] when the writer recorded none. */
  get checksums(): number[] {
    const c = this.crc;
    if (c === null) return [];
    if (typeof c === 'number') return [c >>> 0];
    return c.map((x) => x >>> 0);
  }

  set checksums(v: readonly number[] | null) {
    if (v === null || v.length === 0) this.crc = null;
    else if (v.length === 1) this.crc = v[0] | 0;
    else this.crc = v.map((x) => x | 0);
  }

  /** Whether the writer recorded checksums (no array built). */
  get hasChecksums(): boolean {
    return this.crc !== null;
  }

  /** Handles (replicas x slices). */
  get handleCount(): number {
    if (this.hs !== null) return this.hs.length / HANDLE_FIELDS;
    return this.seg0 === 0 ? 0 : 1;
  }

  /** Segment id, allocator block and size of handle k (0 <= k < handleCount), without building `h`. */
  segAt(k: number): number {
    return this.hs === null ? this.seg0 : this.hs[k * HANDLE_FIELDS];
  }

  blockAt(k: number): number {
    return this.hs === null ? this.block0 : this.hs[k * HANDLE_FIELDS + 1];
  }

  sizeAt(k: number): number {
    return this.hs === null ? this.size0 : this.hs[k * HANDLE_FIELDS + 2];
  }

  /** Bytes held: the sizes of all handles. */
  bytes(): number {
    if (this.hs === null) return this.size0;
    let n = 0;
    for (let i = 2; i < this.hs.length; i += HANDLE_FIELDS) n += this.hs[i];
    return n;
  }

  /** Monotonic ms until which a lease protects the object (0: never leased; -1: forgotten, see lease-tracker.ts). */
  get leaseUntil(): number {
    return this.leaseHi * PERIOD_MS + this.leaseLo;
  }

  set leaseUntil(t: number) {
    const hi = Math.floor(t / PERIOD_MS);
    this.leaseHi = hi;
    this.leaseLo = t - hi * PERIOD_MS;
  }

  /** While a write is in flight: when it started. Once complete: the last access. */
  get lastAccess(): number {
    return this.accessHi * PERIOD_MS + this.accessLo;
  }

  set lastAccess(t: number) {
    const hi = Math.floor(t / PERIOD_MS);
    this.accessHi = hi;
    this.accessLo = t - hi * PERIOD_MS;
  }

  get status(): ReplicaStatusValue {
    return (this.flags & STATUS_MASK) as ReplicaStatusValue;
  }

  set status(s: ReplicaStatusValue) {
    this.flags = (this.flags & ~STATUS_MASK) | s;
  }

  get complete(): boolean {
    return (this.flags & STATUS_MASK) === ReplicaStatus.COMPLETE;
  }

  get replicaCount(): number {
    return this.handleCount / this.slices;
  }

  get hardPinned(): boolean {
    return (this.flags & FLAG_HARD_PIN) !== 0;
  }

  leased(now: number): boolean {
    return this.leaseUntil > now;
  }

  /** Soft pin is dropped after `ttl` without access and comes back with the next access. */
  softPinned(now: number, ttl: number): boolean {
    return (this.flags & FLAG_SOFT_PIN) !== 0 && now - this.lastAccess < ttl;
  }

  /** Slice lengths, read from the first replica. */
  sliceLengths(): number[] {
    const out: number[] = [];
    for (let j = 0; j < this.slices; j++) out.push(this.sizeAt(j));
    return out;
  }

  get listed(): boolean {
    return (this.flags & FLAG_LISTED) !== 0;
  }

  hasHandleOn(segmentId: number): boolean {
    return this.hs === null ? this.seg0 === segmentId && segmentId !== 0 : handlesOn(this.hs, segmentId);
  }
}

/**
 * The generation of an unfinished write: its start time (the master's clock gives whole ms) plus
 * one, so that 0 never names a write (write-fence.ts explains generations).
 */
export function writeGeneration(meta: ObjectMeta): number {
  return meta.lastAccess + 1;
}

/** Whether the packed handles `h` (HANDLE_FIELDS numbers each, segment id first) have one on the segment. */
export function handlesOn(h: readonly number[], segmentId: number): boolean {
  for (let i = 0; i < h.length; i += HANDLE_FIELDS) if (h[i] === segmentId) return true;
  return false;
}
