// The `cxl` allocation strategy: the first preferred segment is the CXL segment; exactly one
// replica is allocated there and its buffer is marked MemoryType.CXL. An empty preferred list
// is INVALID_PARAMS; a missing, closed or full CXL segment is NO_AVAILABLE_HANDLE.
import { ErrorCode } from '../../common/error-code.js';
import { MemoryType } from '../../proto/gen/store/MemoryType.js';
import type { AllocationRequest, AllocationResult, AllocationStrategy } from './allocation-strategy.js';
import { invalidRequest, Placement } from './allocation-strategy.js';
import type { SegmentPool } from './segment-registry.js';

export class CxlStrategy implements AllocationStrategy {
  readonly name = 'cxl';

  allocate(pool: SegmentPool, req: AllocationRequest): AllocationResult {
    if (invalidRequest(req) || req.preferred.length === 0) return { ok: false, code: ErrorCode.INVALID_PARAMS };
    const p = new Placement({ ...req, replicaNum: 1 }, MemoryType.CXL);
    const seg = pool.byName(req.preferred[0]!);
    if (seg !== undefined && p.eligible(seg)) p.tryOn(seg);
    return p.result();
  }
}
