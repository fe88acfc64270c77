// Placing a whole object: one strategy call per slice (each slice's replicas on different
// segments), then the replica count is the smallest number any slice got; surplus buffers are
// returned. Result: the flat handle array of object-meta.ts. Also freeing such arrays and
// turning them into wire ReplicaInfo messages.
import { ErrorCode } from '../../common/error-code.js';
import { BufStatus } from '../../proto/gen/store/BufStatus.js';
import { MemoryType } from '../../proto/gen/store/MemoryType.js';
import type { BufHandle__Output } from '../../proto/gen/store/BufHandle.js';
import type { ReplicaInfo__Output } from '../../proto/gen/store/ReplicaInfo.js';
import { ReplicaStatus } from '../../proto/gen/store/ReplicaStatus.js';
import type { AllocatedBuffer, AllocationStrategy } from './allocation-strategy.js';
import { HANDLE_FIELDS } from './object-meta.js';
import type { ReplicaStatusValue } from './object-meta.js';
import type { Rng } from './rng.js';
import type { SegmentRegistry } from './segment-registry.js';

export type PlacementResult = { ok: true; h: number[]; cxl: boolean } | { ok: false; code: number };

const NO_EXCLUSIONS: ReadonlySet<number> = new Set();

function releaseAll(perSlice: readonly AllocatedBuffer[][]): void {
  for (const bufs of perSlice) for (const b of bufs) b.segment.allocator.free(b.handle);
}

export function placeReplicas(
  strategy: AllocationStrategy,
  segments: SegmentRegistry,
  sliceLengths: readonly number[],
  replicaNum: number,
  preferred: readonly string[],
  rng: Rng,
): PlacementResult {
  const perSlice: AllocatedBuffer[][] = [];
  let count = replicaNum;
  for (const sliceLength of sliceLengths) {
    const r = strategy.allocate(segments, { sliceLength, replicaNum, preferred, excluded: NO_EXCLUSIONS }, rng);
    if (!r.ok) {
      releaseAll(perSlice);
      return { ok: false, code: r.code };
    }
    perSlice.push(r.buffers);
    count = Math.min(count, r.buffers.length);
  }
  if (count === 0) {
    releaseAll(perSlice);
    return { ok: false, code: ErrorCode.NO_AVAILABLE_HANDLE };
  }
  for (const bufs of perSlice) if (bufs.length > count) for (const b of bufs.splice(count)) b.segment.allocator.free(b.handle);
  // Sized up front: a pushed-to array would carry spare capacity in every object's metadata.
  const h: number[] = new Array<number>(count * perSlice.length * HANDLE_FIELDS);
  let cxl = false;
  let i = 0;
  for (let r = 0; r < count; r++) {
    for (let j = 0; j < perSlice.length; j++) {
      const b = perSlice[j]![r]!;
      h[i++] = b.segment.id;
      h[i++] = b.handle.block;
      h[i++] = b.handle.size;
      if (b.memoryType === MemoryType.CXL) cxl = true;
    }
  }
  return { ok: true, h, cxl };
}

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
