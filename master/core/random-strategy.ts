// The `random` allocation strategy (default): preferred segments first, then a consecutive scan
// from a random start over at most min(100, total) segments, one replica per segment.
import { ErrorCode } from '../../common/error-code.js';
import type { AllocationRequest, AllocationResult, AllocationStrategy, SliceAllocation } from './allocation-strategy.js';
import { allocateWith, preferredPhase, randomScanPhase } from './allocation-strategy.js';
import type { Rng } from './rng.js';
import type { SegmentPool } from './segment-registry.js';

export class RandomStrategy implements AllocationStrategy {
  readonly name = 'random';

  allocate(pool: SegmentPool, req: AllocationRequest, rng: Rng): AllocationResult {
    return allocateWith(this, pool, req, rng);
  }

  place(pool: SegmentPool, p: SliceAllocation, rng: Rng): number {
    if (p.invalid) return ErrorCode.INVALID_PARAMS;
    if (p.preferred.length > 0) preferredPhase(pool, p);
    randomScanPhase(pool, p, rng);
    return p.outcome();
  }
}
