// The `free_ratio_first` allocation strategy: preferred segments first; then min(6 x remaining,
// total) consecutive segments from a random start, sorted by free ratio (free / capacity, highest
// first), tried top down; if still short, the random scan of the `random` strategy.
import { ErrorCode } from '../../common/error-code.js';
import type { AllocationRequest, AllocationResult, AllocationStrategy } from './allocation-strategy.js';
import { CANDIDATES_PER_REPLICA, invalidRequest, Placement, preferredPhase, randomScanPhase } from './allocation-strategy.js';
import type { Rng } from './rng.js';
import { randomIndex } from './rng.js';
import type { SegmentPool } from './segment-registry.js';

export class FreeRatioFirstStrategy implements AllocationStrategy {
  readonly name = 'free_ratio_first';

  allocate(pool: SegmentPool, req: AllocationRequest, rng: Rng): AllocationResult {
    if (invalidRequest(req)) return { ok: false, code: ErrorCode.INVALID_PARAMS };
    const p = new Placement(req);
    preferredPhase(pool, p);
    const segs = pool.allocatable();
    const n = segs.length;
    if (!p.done && n > 0) {
      const k = Math.min(CANDIDATES_PER_REPLICA * p.remaining, n);
      const start = randomIndex(rng, n);
      const candidates = [];
      for (let i = 0; i < k; i++) candidates.push(segs[(start + i) % n]!);
      // Array.prototype.sort is stable: equal ratios keep scan order.
      candidates.sort((a, b) => b.freeRatio - a.freeRatio);
      for (const seg of candidates) {
        if (p.done || p.attempts >= p.attemptLimit) break;
        if (p.eligible(seg)) p.tryOn(seg);
      }
    }
    randomScanPhase(pool, p, rng);
    return p.result();
  }
}
