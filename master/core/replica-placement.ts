// Handle arrays (the flat form of object-meta.ts, made by replica-placer.ts): freeing them, and
// dropping the replicas on one segment. Their replies capture them in replica-capture.ts.
import { HANDLE_FIELDS, type ObjectMeta } from './object-meta.js';
import type { SegmentRegistry } from './segment-registry.js';

/** Returns every handle's space to its segment (handles on segments already gone are skipped). */
export function freeHandles(segments: SegmentRegistry, h: readonly number[]): void {
  for (let i = 0; i < h.length; i += HANDLE_FIELDS) {
    const seg = segments.byId(h[i]);
    if (seg !== undefined) seg.allocator.freeBlock(h[i + 1]);
  }
}

/**
 * Space of a write that was given up (revoked, released, a copy that failed): its writer may still
 * have bytes on the way, so each segment holds it until its owner fences generation `gen`
 * (write-fence.ts). A segment mounted without an incarnation has an owner that cannot fence (a
 * tool, an older client): its space is freed at once.
 */
export function quarantineHandles(segments: SegmentRegistry, h: readonly number[], gen: number): void {
  for (let i = 0; i < h.length; i += HANDLE_FIELDS) {
    const seg = segments.byId(h[i]);
    if (seg === undefined) continue;
    if (seg.incarnation === 0) seg.allocator.freeBlock(h[i + 1]);
    else seg.fence.hold(h[i + 1], gen);
  }
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

/**
 * The object's memory replicas: those not on SSD (offload) segments. A DISK replica is placed
 * wholly on SSD segments (disk-tier.ts), so its first handle tells.
 */
export function memoryReplicaCount(segments: SegmentRegistry, meta: ObjectMeta): number {
  const slices = meta.slices;
  let n = 0;
  for (let k = 0, count = meta.handleCount; k < count; k += slices) if (segments.byId(meta.segAt(k))?.disk !== true) n++;
  return n;
}
