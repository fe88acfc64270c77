// The `free_ratio_first` allocation strategy: preferred segments first; then min(6 x remaining,
// total) consecutive segments from a random start, sorted by free ratio (free / capacity, highest
// first), tried top down; if still short, the random scan of the `random` strategy.
import { ErrorCode } from '../../common/error-code.js';
import type { AllocationRequest, AllocationResult, AllocationStrategy, SliceAllocation } from './allocation-strategy.js';
import { allocateWith, CANDIDATES_PER_REPLICA, preferredPhase, randomScanPhase } from './allocation-strategy.js';
import type { Rng } from './rng.js';
import { randomIndex } from './rng.js';
import type { Segment, SegmentPool } from './segment-registry.js';

const byFreeRatio = (a: Segment, b: Segment): number => b.freeRatio - a.freeRatio;

export class FreeRatioFirstStrategy implements AllocationStrategy {
  readonly name = 'free_ratio_first';
  /** The candidate list, reused across calls (emptied after each). */
  private readonly candidates: Segment[] = [];

  allocate(pool: SegmentPool, req: AllocationRequest, rng: Rng): AllocationResult {
    return allocateWith(this, pool, req, rng);
  }

  place(pool: SegmentPool, p: SliceAllocation, rng: Rng): number {
    if (p.invalid) return ErrorCode.INVALID_PARAMS;
    preferredPhase(pool, p);
    const segs = pool.allocatable();
    const n = segs.length;
    if (!p.done && n > 0) {
      const k = Math.min(CANDIDATES_PER_REPLICA * p.remaining, n);
      const start = randomIndex(rng, n);
      const candidates = this.candidates;
      for (let i = 0; i < k; i++) candidates.push(segs[(start + i) % n]);
      // Array.prototype.sort is stable: equal ratios keep scan order.
      candidates.sort(byFreeRatio);
      const limit = p.attemptLimit;
      for (let i = 0; i < k; i++) {
        if (p.done || p.attempts >= limit) break;
        const seg = candidates[i];
        if (p.eligible(seg)) p.tryOn(seg);
      }
      candidates.length = 0;
    }
    randomScanPhase(pool, p, rng);
    return p.outcome();
  }
}
