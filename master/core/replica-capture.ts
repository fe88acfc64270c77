// Successful replies that carry an object's replica list: GetReplicaList (alone and per key of its
// batch form) and PutStart (alone and per key of its batch form). They are the master's hottest
// replies, and most of their cost was building ReplicaInfo/BufHandle objects only for the encoder
// to read them back. A reply here captures each handle as (segment, address, size) when it is
// made; `replica_list` builds the plain objects on first access (gRPC, HTTP, tests) from that
// capture, so a reply describes the object as it was when the reply was made, whatever happens to
// the object afterwards. The core knows no wire format: a transport may write a reply's bytes
// straight from the capture (the fast channel does: master/replica-wire.ts).
import { ErrorCode } from '../../common/error-code.js';
import type { BufHandle__Output } from '../../proto/gen/store/BufHandle.js';
import { BufStatus, type BufStatus__Output } from '../../proto/gen/store/BufStatus.js';
import type { GetReplicaListResponse__Output } from '../../proto/gen/store/GetReplicaListResponse.js';
import { MemoryType, type MemoryType__Output } from '../../proto/gen/store/MemoryType.js';
import type { PutStartResponse__Output } from '../../proto/gen/store/PutStartResponse.js';
import type { ReplicaInfo__Output } from '../../proto/gen/store/ReplicaInfo.js';
import { ReplicaStatus } from '../../proto/gen/store/ReplicaStatus.js';
import { ReplicaType } from '../../proto/gen/store/ReplicaType.js';
import { FLAG_CXL, HANDLE_FIELDS, writeGeneration, type ObjectMeta, type ReplicaStatusValue } from './object-meta.js';
import type { Segment, SegmentRegistry } from './segment-registry.js';

/** The checksums of an object whose writer recorded none (shared: replies are read-only). */
const NO_CHECKSUMS = Object.freeze([]) as unknown as number[];

/**
 * The replicas of one object at one instant. The first handle is held in fields (the usual object
 * has one replica of one slice, so that case allocates nothing more); further handles go to
 * `more` as (segment, address, size) triples. Handles are in replica-major order: handle k
 * belongs to replica k / slices. The fields are read-only data for the transports.
 */
export class ReplicaCapture {
  readonly slices: number;
  readonly status: ReplicaStatusValue;
  readonly memoryType: MemoryType__Output;
  /** Handles captured (replicas x slices). */
  readonly count: number;
  /** The first handle: its segment (null when there is no handle), address and size. */
  readonly seg0: Segment | null;
  readonly addr0: number;
  readonly size0: number;
  /** Handles 1.. as (segment, address, size) triples; null when there is at most one handle. */
  readonly more: (Segment | number)[] | null;
  private list: ReplicaInfo__Output[] | undefined;
  /** The write's generation in every handle (PutStart replies), 0 in read replies. */
  readonly generation: number;

  constructor(segments: SegmentRegistry, meta: ObjectMeta, generation = 0) {
    this.generation = generation;
    this.slices = meta.slices;
    this.status = meta.status;
    this.memoryType = (meta.flags & FLAG_CXL) !== 0 ? MemoryType.CXL : MemoryType.DRAM;
    const count = meta.handleCount;
    this.count = count;
    const seg = count === 0 ? null : segments.byId(meta.segAt(0))!;
    this.seg0 = seg;
    this.addr0 = seg === null ? 0 : seg.allocator.addressOf(meta.blockAt(0));
    this.size0 = seg === null ? 0 : meta.sizeAt(0);
    if (count <= 1) {
      this.more = null;
      return;
    }
    const more: (Segment | number)[] = new Array<Segment | number>((count - 1) * HANDLE_FIELDS);
    for (let k = 1, i = 0; k < count; k++, i += HANDLE_FIELDS) {
      const s = segments.byId(meta.segAt(k))!;
      more[i] = s;
      more[i + 1] = s.allocator.addressOf(meta.blockAt(k));
      more[i + 2] = meta.sizeAt(k);
    }
    this.more = more;
  }

  /** The handles in order (replica-major), calling `each(segment, address, size, k)`. */
  private forEach(each: (seg: Segment, addr: number, size: number, k: number) => void): void {
    if (this.seg0 === null) return;
    each(this.seg0, this.addr0, this.size0, 0);
    const more = this.more;
    if (more !== null) for (let i = 0; i < more.length; i += HANDLE_FIELDS) each(more[i] as Segment, more[i + 1] as number, more[i + 2] as number, i / HANDLE_FIELDS + 1);
  }

  /** Every handle's status: complete with its replicas, else still being written. */
  get bufStatus(): BufStatus__Output {
    return this.status === ReplicaStatus.COMPLETE ? BufStatus.BUF_STATUS_COMPLETE : BufStatus.BUF_STATUS_INIT;
  }

  /** The plain ReplicaInfo messages, built once on first use. */
  get replica_list(): ReplicaInfo__Output[] {
    if (this.list !== undefined) return this.list;
    const slices = this.slices;
    const list: ReplicaInfo__Output[] = [];
    const bufStatus = this.bufStatus;
    this.forEach((seg, addr, size, k) => {
      // A replica on offload segments is a DISK replica (its handles SSD).
      if (k % slices === 0) list.push({ handles: [], status: this.status, replica_type: seg.disk ? ReplicaType.DISK : ReplicaType.MEMORY, file: null });
      const handle: BufHandle__Output = {
        segment_name: seg.name,
        size,
        buffer: addr,
        status: bufStatus,
        te_endpoint: seg.teEndpoint,
        memory_type: seg.disk ? MemoryType.SSD : this.memoryType,
        incarnation: seg.incarnation,
        generation: this.generation,
      };
      list[list.length - 1].handles.push(handle);
    });
    this.list = list;
    return list;
  }
}

/**
 * The plain ReplicaInfo messages of an object's replicas as they are now (admin and regex queries,
 * upserts: those pass the write's generation).
 */
export function replicaList(segments: SegmentRegistry, meta: ObjectMeta, generation = 0): ReplicaInfo__Output[] {
  return new ReplicaCapture(segments, meta, generation).replica_list;
}

/** A granted GetReplicaList: status OK, the replicas, and the lease TTL the read must finish in. */
export class GrantedReplicas extends ReplicaCapture implements GetReplicaListResponse__Output {
  readonly status_code = ErrorCode.OK;

  /** The slices' CRC-32C as the writer recorded them ([] when it recorded none). */
  readonly slice_checksums: number[];
  /** The value's version (ObjectMeta.version). */
  readonly version: number;

  constructor(
    segments: SegmentRegistry,
    meta: ObjectMeta,
    readonly lease_ttl_ms: number,
  ) {
    super(segments, meta);
    this.slice_checksums = meta.hasChecksums ? meta.checksums : NO_CHECKSUMS;
    this.version = meta.version;
  }

  toJSON(): GetReplicaListResponse__Output {
    return { status_code: this.status_code, replica_list: this.replica_list, lease_ttl_ms: this.lease_ttl_ms, slice_checksums: this.slice_checksums, version: this.version };
  }
}

/** A successful PutStart: status OK and the space reserved for the writer, with the write's generation. */
export class PlacedReplicas extends ReplicaCapture implements PutStartResponse__Output {
  readonly status_code = ErrorCode.OK;

  constructor(segments: SegmentRegistry, meta: ObjectMeta) {
    super(segments, meta, writeGeneration(meta));
  }

  toJSON(): PutStartResponse__Output {
    return { status_code: this.status_code, replica_list: this.replica_list };
  }
}
