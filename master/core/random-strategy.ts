// The `random` allocation strategy (default): preferred segments first, then a consecutive scan
// from a random start over at most min(100, total) segments, one replica per segment.
import { ErrorCode } from '../../common/error-code.js';
import type { AllocationRequest, AllocationResult, AllocationStrategy } from './allocation-strategy.js';
import { invalidRequest, Placement, preferredPhase, randomScanPhase } from './allocation-strategy.js';
import type { Rng } from './rng.js';
import type { SegmentPool } from './segment-registry.js';

export class RandomStrategy implements AllocationStrategy {
  readonly name = 'random';

  allocate(pool: SegmentPool, req: AllocationRequest, rng: Rng): AllocationResult {
    if (invalidRequest(req)) return { ok: false, code: ErrorCode.INVALID_PARAMS };
    const p = new Placement(req);
    preferredPhase(pool, p);
    randomScanPhase(pool, p, rng);
    return p.result();
  }
}
