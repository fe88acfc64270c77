// The `cxl` allocation strategy: the first preferred segment is the CXL segment; exactly one
// replica is allocated there and its buffer is marked MemoryType.CXL. An empty preferred list
// is INVALID_PARAMS; a missing, closed or full CXL segment is NO_AVAILABLE_HANDLE.
import { ErrorCode } from '../../common/error-code.js';
import { MemoryType } from '../../proto/gen/store/MemoryType.js';
import type { AllocationRequest, AllocationResult, AllocationStrategy, SliceAllocation } from './allocation-strategy.js';
import { allocateWith } from './allocation-strategy.js';
import type { Rng } from './rng.js';
import type { SegmentPool } from './segment-registry.js';

export class CxlStrategy implements AllocationStrategy {
  readonly name = 'cxl';

  allocate(pool: SegmentPool, req: AllocationRequest, rng?: Rng): AllocationResult {
    return allocateWith(this, pool, req, rng as Rng);
  }

  place(pool: SegmentPool, p: SliceAllocation): number {
    if (p.invalid || p.preferred.length === 0) return ErrorCode.INVALID_PARAMS;
    p.replicaNum = 1;
    p.memoryType = MemoryType.CXL;
    const seg = pool.byName(p.preferred[0]);
    if (seg !== undefined && p.eligible(seg)) p.tryOn(seg);
    return p.outcome();
  }
}
