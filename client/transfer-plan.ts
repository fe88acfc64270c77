// Pure planning of a Put's writes and a Get's reads: which replica to try first, which slices are
// a local memcpy (the handle is on one of this client's own segments) and which become transfer
// engine operations, and whether a read finished inside its lease. No I/O, no clock.
import type { BufHandle__Output } from '../proto/gen/store/BufHandle.js';
import type { ReplicaInfo__Output } from '../proto/gen/store/ReplicaInfo.js';
import { ReplicaStatus } from '../proto/gen/store/ReplicaStatus.js';
import { ReplicaType } from '../proto/gen/store/ReplicaType.js';
import { StoreError } from './errors.js';
import { ErrorCode } from '../common/error-code.js';

/** One engine operation: the addon's own type. */
export type { EngineTransferOp as TransferOp } from './native-port.js';
import type { EngineTransferOp as TransferOp } from './native-port.js';

/** One piece of an object: `offset` into the value, `length` bytes, stored at `handle`. */
export interface Piece {
  offset: number;
  length: number;
  handle: BufHandle__Output;
  local: boolean;
}

/** Lease TTL assumed when the master reports none (its documented default). */
export const DEFAULT_LEASE_TTL_MS = 5000;

/** Bytes of a replica: the sum of its handles. */
export function replicaSize(replica: ReplicaInfo__Output): number {
  let n = 0;
  for (const h of replica.handles) n += Number(h.size);
  return n;
}

/**
 * Readable replicas in the order to try them: COMPLETE only; those entirely on this client's own
 * segments first (a memcpy), then those partly local, then the rest in the master's order.
 */
export function orderReplicas(replicas: readonly ReplicaInfo__Output[], isOwn: (segment: string) => boolean): ReplicaInfo__Output[] {
  if (replicas.length === 1) {
    // The common case (replica_num 1): nothing to sort.
    const r = replicas[0];
    return r.status === ReplicaStatus.COMPLETE && r.handles.length > 0 ? [r] : [];
  }
  // MEMORY replicas before DISK ones (an SSD tier's copy is read only when no memory one is complete)
  const score = (r: ReplicaInfo__Output) => {
    const local = r.handles.filter((h) => isOwn(h.segment_name)).length;
    return (r.replica_type === ReplicaType.DISK ? 3 : 0) + (local === r.handles.length ? 0 : local > 0 ? 1 : 2);
  };
  return replicas
    .filter((r) => r.status === ReplicaStatus.COMPLETE && r.handles.length > 0)
    .map((r, i) => ({ r, i, s: score(r) }))
    .sort((a, b) => a.s - b.s || a.i - b.i)
    .map((x) => x.r);
}

/** Splits a replica into pieces at their value offsets, checking the layout covers `expected` bytes. */
export function replicaPieces(replica: ReplicaInfo__Output, isOwn: (segment: string) => boolean, sliceLengths?: readonly number[]): Piece[] {
  if (sliceLengths && sliceLengths.length !== replica.handles.length) {
    throw new StoreError(ErrorCode.INTERNAL_ERROR, `master returned ${replica.handles.length} handles for ${sliceLengths.length} slices`);
  }
  let offset = 0;
  return replica.handles.map((h, i) => {
    const size = Number(h.size);
    const length = sliceLengths ? sliceLengths[i] : size;
    if (size < length) throw new StoreError(ErrorCode.INTERNAL_ERROR, `master returned a ${size} B handle for a ${length} B slice`);
    const p = { offset, length, handle: h, local: isOwn(h.segment_name) };
    offset += length;
    return p;
  });
}

/** Engine operations moving the remote pieces to/from the local memory at `localAddressOf(piece)`. */
export function transferOps(op: 'read' | 'write', pieces: readonly Piece[], localAddressOf: (p: Piece) => number, endpointOf: (h: BufHandle__Output) => string): TransferOp[] {
  const ops: TransferOp[] = [];
  for (const p of pieces) {
    if (p.local || p.length === 0) continue;
    ops.push({ op, endpoint: endpointOf(p.handle), remoteAddress: Number(p.handle.buffer), localAddress: localAddressOf(p), length: p.length });
  }
  return ops;
}

/** The instant (ms, same clock as `startMs`) after which a read's data must not be returned. */
export function leaseDeadline(startMs: number, leaseTtlMs: number): number {
  return startMs + (leaseTtlMs > 0 ? leaseTtlMs : DEFAULT_LEASE_TTL_MS);
}

export function withinLease(nowMs: number, deadlineMs: number): boolean {
  return nowMs < deadlineMs;
}

/** Byte offsets of consecutive slices: [0, l0, l0+l1, ...]. */
export function sliceOffsets(lengths: readonly number[]): number[] {
  const out: number[] = [];
  let o = 0;
  for (const l of lengths) {
    out.push(o);
    o += l;
  }
  return out;
}
