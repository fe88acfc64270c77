// Eviction policy: the order in which COMPLETE objects are evicted when space runs short, and which
// unfinished writes (zombie PutStarts) may be released first. Pure bookkeeping; the caller frees.
//
// Spec order: zombie puts past put_start_release_timeout, then objects that are not soft-pinned,
// least recently used first, then (if allowed) soft-pinned ones, only when no other candidate is
// left. Never a leased, hard-pinned or unfinished object.
//
// The order is kept incrementally (no sort, no scan of the object map): every complete object that
// is not hard-pinned sits on one of two intrusive LRU lists, `plain` or `soft` (written with a soft
// pin). An access moves the object to the tail and stamps lastAccess, so each list is ordered by
// lastAccess and a soft pin that lapsed (no access for the soft-pin TTL) is a prefix of `soft`. The
// unpinned candidates are the merge of `plain` with that prefix by lastAccess. Leased objects stay
// listed and are skipped; a lease is granted with an access, so they sit in the most recent TTL at
// the tails. Each victim therefore costs O(1) amortized, and one cursor skips at most `scanLimit`
// entries (a bounded step).
import { LruList } from './lru-list.js';
import { FLAG_AWAITING_COPY, FLAG_DISK_ONLY, FLAG_SOFT_PIN } from './object-meta.js';
import type { ObjectMeta } from './object-meta.js';

export interface EvictionPolicy {
  allowEvictSoftPinned: boolean;
  softPinTtlMs: number;
}

/** How many ineligible (leased) entries one cursor may skip: at least this many... */
export const EVICTION_MIN_SCAN = 10_000;
/** ...or this many per object it may evict. */
export const EVICTION_SCAN_PER_VICTIM = 8;
/** Most objects one PutStart may evict or release to make room for itself. */
export const PUT_EVICTION_CAP = 2_000;
/** Most objects one sweep evicts or releases while paying the eviction debt. */
export const SWEEP_EVICTION_BATCH = 2_000;

/** Number of objects one eviction aims to remove: the ratio of all objects, at least 1. */
export function evictionTarget(objectCount: number, ratio: number): number {
  return Math.max(1, Math.ceil(objectCount * ratio));
}

/** Skip budget of a cursor that may take up to `victims` objects. */
export function scanLimitFor(victims: number): number {
  return Math.max(EVICTION_MIN_SCAN, victims * EVICTION_SCAN_PER_VICTIM);
}

/**
 * The eviction lists. Holds exactly the complete, not hard-pinned objects that do not await an
 * offload copy: those with a replica in memory on `plain` or `soft`, those held only on SSD
 * segments on `disk` (disk-tier.ts evicts them when the disk quota is passed; memory eviction
 * never sees them). An object eviction picked whose memory may go only once its offload copy is
 * in is `park`ed off the lists meanwhile (FLAG_AWAITING_COPY) and `unpark`ed at the head, the next
 * to go, when the copy ends: a round, and every PutStart while memory is full of such objects,
 * would otherwise walk them all again (measured: most of the master's CPU per offloaded object,
 * docs/tiers.md).
 */
export class EvictionOrder {
  readonly plain = new LruList();
  readonly soft = new LruList();
  readonly disk = new LruList();

  get size(): number {
    return this.plain.size + this.soft.size + this.disk.size;
  }

  /** An object became complete: it is now the most recently used candidate (hard pins and parked objects never are). */
  add(meta: ObjectMeta): void {
    if (meta.hardPinned || meta.listed || (meta.flags & FLAG_AWAITING_COPY) !== 0) return;
    this.listOf(meta).append(meta);
  }

  /** Eviction picked the object and it awaits its offload copy: off the lists until `unpark`. */
  park(meta: ObjectMeta): void {
    this.remove(meta);
    meta.flags |= FLAG_AWAITING_COPY;
  }

  /** The object's copy ended (or will not come): listed again at the head, first to go, if it may be listed. */
  unpark(meta: ObjectMeta): void {
    if ((meta.flags & FLAG_AWAITING_COPY) === 0) return;
    meta.flags &= ~FLAG_AWAITING_COPY;
    if (meta.complete && !meta.hardPinned && !meta.listed) this.listOf(meta).prepend(meta);
  }

  /** The object left the candidates (deleted, or a write on it began). No-op if not listed. */
  remove(meta: ObjectMeta): void {
    if (meta.listed) this.listOf(meta).remove(meta);
  }

  /** The object was accessed: most recently used. No-op if not listed. */
  touch(meta: ObjectMeta): void {
    if (meta.listed) this.listOf(meta).moveToTail(meta);
  }

  /** Which list an object belongs on; its soft-pin flag must not change while it is listed. */
  listOf(meta: ObjectMeta): LruList {
    if ((meta.flags & FLAG_DISK_ONLY) !== 0) return this.disk;
    return (meta.flags & FLAG_SOFT_PIN) !== 0 ? this.soft : this.plain;
  }

  cursor(now: number, policy: EvictionPolicy, scanLimit: number): VictimCursor {
    return new VictimCursor(this, now, policy, scanLimit);
  }
}

/**
 * Walks the candidates in eviction order at one instant. The caller may delete each object `next`
 * returned before asking for the next one (the cursor has already moved past it), but nothing else.
 */
export class VictimCursor {
  private p: ObjectMeta | null;
  private s: ObjectMeta | null;
  private skipped = 0;
  private softPhase = false;
  /** The skip budget ran out: candidates may remain further on. */
  capped = false;

  constructor(
    order: EvictionOrder,
    private readonly now: number,
    private readonly policy: EvictionPolicy,
    private readonly scanLimit: number,
  ) {
    this.p = order.plain.head;
    this.s = order.soft.head;
  }

  /** The next victim, or null when there is none (or the skip budget is spent: see `capped`). */
  next(): ObjectMeta | null {
    if (this.capped) return null;
    if (!this.softPhase) {
      while (this.p !== null && !this.eligible(this.p)) if (!this.skip((this.p = this.p.next))) return null;
      while (this.s !== null && this.lapsed(this.s) && !this.eligible(this.s)) if (!this.skip((this.s = this.s.next))) return null;
      const p = this.p;
      const s = this.s !== null && this.lapsed(this.s) ? this.s : null;
      if (p !== null && (s === null || p.lastAccess <= s.lastAccess)) {
        this.p = p.next;
        return p;
      }
      if (s !== null) {
        this.s = s.next;
        return s;
      }
      // No unpinned candidate left: soft-pinned objects, if allowed.
      if (!this.policy.allowEvictSoftPinned) return null;
      this.softPhase = true;
    }
    while (this.s !== null && !this.eligible(this.s)) if (!this.skip((this.s = this.s.next))) return null;
    const s = this.s;
    if (s !== null) this.s = s.next;
    return s;
  }

  private eligible(m: ObjectMeta): boolean {
    return m.complete && !m.hardPinned && !m.leased(this.now);
  }

  private lapsed(m: ObjectMeta): boolean {
    return this.now - m.lastAccess >= this.policy.softPinTtlMs;
  }

  private skip(_moved: ObjectMeta | null): boolean {
    if (++this.skipped <= this.scanLimit) return true;
    this.capped = true;
    return false;
  }
}

/** Unfinished writes in start order (in-flight-list.ts; a Map of them in insertion order serves too). */
export interface InFlightWrites {
  values(): Iterable<ObjectMeta>;
}

/** Up to `limit` writes begun more than releaseTimeoutMs ago and never finished, oldest first. */
export function selectZombies(inFlight: InFlightWrites, now: number, releaseTimeoutMs: number, limit = Infinity): ObjectMeta[] {
  const out: ObjectMeta[] = [];
  // In-flight entries are inserted when their write starts, so start times ascend.
  for (const meta of inFlight.values()) {
    if (out.length >= limit || now - meta.lastAccess <= releaseTimeoutMs) break;
    out.push(meta);
  }
  return out;
}
