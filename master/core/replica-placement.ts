// Handle arrays (the flat form of object-meta.ts, made by replica-placer.ts): freeing them,
// dropping the replicas on one segment, and turning them into wire ReplicaInfo messages.
import { BufStatus } from '../../proto/gen/store/BufStatus.js';
import { MemoryType } from '../../proto/gen/store/MemoryType.js';
import type { BufHandle__Output } from '../../proto/gen/store/BufHandle.js';
import type { ReplicaInfo__Output } from '../../proto/gen/store/ReplicaInfo.js';
import { ReplicaStatus } from '../../proto/gen/store/ReplicaStatus.js';
import { HANDLE_FIELDS } from './object-meta.js';
import type { ReplicaStatusValue } from './object-meta.js';
import type { SegmentRegistry } from './segment-registry.js';

/** Returns every handle's space to its segment (handles on segments already gone are skipped). */
export function freeHandles(segments: SegmentRegistry, h: readonly number[]): void {
  for (let i = 0; i < h.length; i += HANDLE_FIELDS) {
    const seg = segments.byId(h[i]!);
    if (seg !== undefined) seg.allocator.freeBlock(h[i + 1]!);
  }
}

/** Wire form of every replica of a handle array, all in `status`. */
export function replicaInfos(
  segments: SegmentRegistry,
  h: readonly number[],
  slices: number,
  status: ReplicaStatusValue,
  cxl: boolean,
): ReplicaInfo__Output[] {
  const bufStatus = status === ReplicaStatus.COMPLETE ? BufStatus.COMPLETE : BufStatus.INIT;
  const memoryType = cxl ? MemoryType.CXL : MemoryType.DRAM;
  const stride = slices * HANDLE_FIELDS;
  const out: ReplicaInfo__Output[] = new Array<ReplicaInfo__Output>(stride === 0 ? 0 : h.length / stride);
  let n = 0;
  for (let r = 0; r < h.length; r += stride) {
    const handles: BufHandle__Output[] = new Array<BufHandle__Output>(slices);
    for (let i = r, j = 0; i < r + stride; i += HANDLE_FIELDS, j++) {
      const seg = segments.byId(h[i]!)!;
      handles[j] = {
        segment_name: seg.name,
        size: h[i + 2]!,
        buffer: seg.allocator.addressOf(h[i + 1]!),
        status: bufStatus,
        te_endpoint: seg.teEndpoint,
        memory_type: memoryType,
      };
    }
    out[n++] = { handles, status };
  }
  return out;
}

/**
 * Keeps only the replicas with no handle on `segmentId`; the dropped replicas' space on other
 * segments is freed. Returns the surviving handle array (possibly empty).
 */
export function dropReplicasOn(segments: SegmentRegistry, h: readonly number[], slices: number, segmentId: number): number[] {
  const stride = slices * HANDLE_FIELDS;
  const kept: number[] = [];
  for (let r = 0; r < h.length; r += stride) {
    let hit = false;
    for (let i = r; i < r + stride; i += HANDLE_FIELDS) if (h[i] === segmentId) hit = true;
    const replica = h.slice(r, r + stride);
    if (hit) freeHandles(segments, replica);
    else kept.push(...replica);
  }
  return kept.slice(); // exact capacity
}
