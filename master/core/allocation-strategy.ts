// The allocation strategy interface (one implementation per file: random-strategy.ts,
// free-ratio-first-strategy.ts, cxl-strategy.ts) and the phases they share.
//
// Semantics, for ONE slice: `allocate` returns up to `replicaNum` buffers, each on a different
// segment, never on an excluded one. Best effort: fewer than asked is a success as long as at
// least one was placed; zero is NO_AVAILABLE_HANDLE; a bad request (replicaNum < 1, size < 1) is
// INVALID_PARAMS. The caller owns the returned buffers and frees them if it does not keep them.
//
// Two entry points share one implementation: `allocate` (a request in, buffer objects out) and
// `place`, the put path's form, which works in a SliceAllocation the caller reuses for every
// slice of every put (no request, result or buffer object per call).
import { ErrorCode } from '../../common/error-code.js';
import { MemoryType } from '../../proto/gen/store/MemoryType.js';
import type { AllocHandle, MutableAllocHandle } from '../../common/buffer-allocator.js';
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
  /**
   * The same rules into `p` (set up with `p.reset`): ErrorCode.OK with p.count >= 1 buffers in
   * p.segs/p.blocks, or the error code (nothing left allocated).
   */
  place(pool: SegmentPool, p: SliceAllocation, rng: Rng): number;
}

/** The random scan looks at no more than this many segments. */
export const RANDOM_SCAN_CAP = 100;
/** With a preferred segment, at most this many different segments are tried (preferred included). */
export const PREFERRED_ATTEMPTS = 10;
/** free_ratio_first looks at this many candidates per missing replica. */
export const CANDIDATES_PER_REPLICA = 6;

const NO_EXCLUSIONS: ReadonlySet<number> = new Set();

function invalidSlice(sliceLength: number, replicaNum: number): boolean {
  return !Number.isSafeInteger(replicaNum) || replicaNum < 1 || !Number.isSafeInteger(sliceLength) || sliceLength < 1;
}

export function invalidRequest(req: AllocationRequest): boolean {
  return invalidSlice(req.sliceLength, req.replicaNum);
}

/**
 * Working state of one strategy call, reusable: `reset` starts the next call. Its arrays only
 * grow (to the largest replica count seen), so a reused instance allocates nothing per call.
 */
export class SliceAllocation {
  sliceLength = 0;
  replicaNum = 0;
  /** Tried first, in order. */
  preferred: readonly string[] = [];
  /** Segment ids never used. */
  excluded: ReadonlySet<number> = NO_EXCLUSIONS;
  memoryType: MemoryTypeValue = MemoryType.DRAM;
  /** Whether segments a writer reported unreachable may be used (nothing else had room). */
  allowSuspect = false;
  /** Buffers placed so far: segs[i], its allocator block blocks[i], the handle handles[i]. */
  count = 0;
  readonly segs: (Segment | undefined)[] = [];
  readonly blocks: number[] = [];
  readonly handles: (AllocHandle | undefined)[] = [];
  /** Where allocators write the handle when the caller keeps no handle objects (see `constructor`). */
  private readonly scratch: MutableAllocHandle = { block: 0, offset: 0, address: 0, size: 0 };
  /** Ids of the segments tried for this slice (a handful: an array beats a Set here). */
  private readonly used: number[] = [];
  private usedCount = 0;
  attempts = 0;

  /** `keepHandles`: keep each buffer's handle object in `handles` (the `allocate` form needs them). */
  constructor(private readonly keepHandles = false) {}

  reset(sliceLength: number, replicaNum: number, preferred: readonly string[], excluded: ReadonlySet<number> = NO_EXCLUSIONS): this {
    this.sliceLength = sliceLength;
    this.replicaNum = replicaNum;
    this.preferred = preferred;
    this.excluded = excluded;
    this.memoryType = MemoryType.DRAM;
    this.count = 0;
    this.usedCount = 0;
    this.attempts = 0;
    return this;
  }

  get invalid(): boolean {
    return invalidSlice(this.sliceLength, this.replicaNum);
  }

  get done(): boolean {
    return this.count >= this.replicaNum;
  }

  get remaining(): number {
    return this.replicaNum - this.count;
  }

  /** Attempt limit for this call: PREFERRED_ATTEMPTS when a preferred segment was named. */
  get attemptLimit(): number {
    return this.preferred.length > 0 ? PREFERRED_ATTEMPTS : Number.POSITIVE_INFINITY;
  }

  eligible(seg: Segment): boolean {
    if (seg.status !== 'MOUNTED' || seg.disk) return false; // offload segments hold disk replicas only (disk-tier.ts)
    if (seg.suspectUntil !== 0 && !this.allowSuspect) return false;
    const id = seg.id;
    for (let i = 0; i < this.usedCount; i++) if (this.used[i] === id) return false;
    return this.excluded.size === 0 || !this.excluded.has(id);
  }

  /** Tries one segment; records it as used for this slice either way. */
  tryOn(seg: Segment): boolean {
    this.used[this.usedCount++] = seg.id;
    this.attempts++;
    const handle = this.keepHandles ? seg.allocator.allocate(this.sliceLength) : seg.allocator.allocate(this.sliceLength, this.scratch);
    if (handle === null) return false;
    const i = this.count++;
    this.segs[i] = seg;
    this.blocks[i] = handle.block;
    if (this.keepHandles) this.handles[i] = handle;
    return true;
  }

  /** Drops the references to the segments and handles of the last call (a reused instance must not keep an unmounted segment alive). */
  forget(): void {
    for (let i = 0; i < this.count; i++) {
      this.segs[i] = undefined;
      this.handles[i] = undefined;
    }
  }

  /** The outcome code of `place`; the buffers stay in segs/blocks. */
  outcome(): number {
    return this.count > 0 ? ErrorCode.OK : ErrorCode.NO_AVAILABLE_HANDLE;
  }

  /** The placed buffers as objects (the `allocate` form). */
  result(): AllocationResult {
    if (this.count === 0) return { ok: false, code: ErrorCode.NO_AVAILABLE_HANDLE };
    const buffers: AllocatedBuffer[] = [];
    for (let i = 0; i < this.count; i++) buffers.push({ segment: this.segs[i]!, handle: this.handles[i]!, memoryType: this.memoryType });
    return { ok: true, buffers };
  }
}

/** `allocate` in terms of `place`: one fresh working state per call. */
export function allocateWith(strategy: AllocationStrategy, pool: SegmentPool, req: AllocationRequest, rng: Rng): AllocationResult {
  const p = new SliceAllocation(true).reset(req.sliceLength, req.replicaNum, req.preferred, req.excluded);
  const code = strategy.place(pool, p, rng);
  return code === ErrorCode.OK ? p.result() : { ok: false, code };
}

/** Phase 1 of every strategy: preferred segments in order, one replica each. */
export function preferredPhase(pool: SegmentPool, p: SliceAllocation): void {
  const preferred = p.preferred;
  for (let i = 0; i < preferred.length; i++) {
    if (p.done || p.attempts >= p.attemptLimit) return;
    const seg = pool.byName(preferred[i]);
    if (seg !== undefined && p.eligible(seg)) p.tryOn(seg);
  }
}

/** Random start, consecutive scan over at most min(100, total) segments. */
export function randomScanPhase(pool: SegmentPool, p: SliceAllocation, rng: Rng): void {
  const segs = pool.allocatable();
  const n = segs.length;
  if (n === 0 || p.done) return;
  const start = randomIndex(rng, n);
  const cap = Math.min(RANDOM_SCAN_CAP, n);
  const limit = p.attemptLimit;
  for (let i = 0, at = start; i < cap && !p.done && p.attempts < limit; i++) {
    const seg = segs[at];
    if (p.eligible(seg)) p.tryOn(seg);
    if (++at === n) at = 0;
  }
}
