// The allocation strategy interface (one implementation per file: random-strategy.ts,
// free-ratio-first-strategy.ts, cxl-strategy.ts) and the phases they share.
//
// Semantics, for ONE slice: `allocate` returns up to `replicaNum` buffers, each on a different
// segment, never on an excluded one. Best effort: fewer than asked is a success as long as at
// least one was placed; zero is NO_AVAILABLE_HANDLE; a bad request (replicaNum < 1, size < 1) is
// INVALID_PARAMS. The caller owns the returned buffers and frees them if it does not keep them.
import { ErrorCode } from '../../common/error-code.js';
import { MemoryType } from '../../proto/gen/store/MemoryType.js';
import type { AllocHandle } from './buffer-allocator.js';
import type { Rng } from './rng.js';
import { randomIndex } from './rng.js';
import type { Segment, SegmentPool } from './segment-registry.js';

export type MemoryTypeValue = (typeof MemoryType)[keyof typeof MemoryType];

export interface AllocatedBuffer {
  readonly segment: Segment;
  readonly handle: AllocHandle;
  readonly memoryType: MemoryTypeValue;
}

export type AllocationResult = { ok: true; buffers: AllocatedBuffer[] } | { ok: false; code: number };

export interface AllocationRequest {
  sliceLength: number;
  replicaNum: number;
  /** Tried first, in order. */
  preferred: readonly string[];
  /** Segment ids never used. */
  excluded: ReadonlySet<number>;
}

export interface AllocationStrategy {
  readonly name: string;
  allocate(pool: SegmentPool, req: AllocationRequest, rng: Rng): AllocationResult;
}

/** The random scan looks at no more than this many segments. */
export const RANDOM_SCAN_CAP = 100;
/** With a preferred segment, at most this many different segments are tried (preferred included). */
export const PREFERRED_ATTEMPTS = 10;
/** free_ratio_first looks at this many candidates per missing replica. */
export const CANDIDATES_PER_REPLICA = 6;

export function invalidRequest(req: AllocationRequest): boolean {
  return !Number.isSafeInteger(req.replicaNum) || req.replicaNum < 1 || !Number.isSafeInteger(req.sliceLength) || req.sliceLength < 1;
}

/** Working state of one strategy call. */
export class Placement {
  readonly buffers: AllocatedBuffer[] = [];
  /** Ids of the segments tried for this slice (a handful: an array beats a Set here). */
  readonly used: number[] = [];
  attempts = 0;

  constructor(
    readonly req: AllocationRequest,
    readonly memoryType: MemoryTypeValue = MemoryType.DRAM,
  ) {}

  get done(): boolean {
    return this.buffers.length >= this.req.replicaNum;
  }

  get remaining(): number {
    return this.req.replicaNum - this.buffers.length;
  }

  /** Attempt limit for this call: PREFERRED_ATTEMPTS when a preferred segment was named. */
  get attemptLimit(): number {
    return this.req.preferred.length > 0 ? PREFERRED_ATTEMPTS : Number.POSITIVE_INFINITY;
  }

  eligible(seg: Segment): boolean {
    return seg.status === 'MOUNTED' && !this.used.includes(seg.id) && (this.req.excluded.size === 0 || !this.req.excluded.has(seg.id));
  }

  /** Tries one segment; records it as used for this slice either way. */
  tryOn(seg: Segment): boolean {
    this.used.push(seg.id);
    this.attempts++;
    const handle = seg.allocator.allocate(this.req.sliceLength);
    if (handle === null) return false;
    this.buffers.push({ segment: seg, handle, memoryType: this.memoryType });
    return true;
  }

  result(): AllocationResult {
    return this.buffers.length > 0 ? { ok: true, buffers: this.buffers } : { ok: false, code: ErrorCode.NO_AVAILABLE_HANDLE };
  }
}

/** Phase 1 of every strategy: preferred segments in order, one replica each. */
export function preferredPhase(pool: SegmentPool, p: Placement): void {
  for (const name of p.req.preferred) {
    if (p.done || p.attempts >= p.attemptLimit) return;
    const seg = pool.byName(name);
    if (seg !== undefined && p.eligible(seg)) p.tryOn(seg);
  }
}

/** Random start, consecutive scan over at most min(100, total) segments. */
export function randomScanPhase(pool: SegmentPool, p: Placement, rng: Rng): void {
  const segs = pool.allocatable();
  const n = segs.length;
  if (n === 0 || p.done) return;
  const start = randomIndex(rng, n);
  const cap = Math.min(RANDOM_SCAN_CAP, n);
  for (let i = 0; i < cap && !p.done && p.attempts < p.attemptLimit; i++) {
    const seg = segs[(start + i) % n]!;
    if (p.eligible(seg)) p.tryOn(seg);
  }
}
