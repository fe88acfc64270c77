// Successful replies that carry an object's replica list: GetReplicaList (alone and per key of its
// batch form) and PutStart (alone and per key of its batch form). They are the master's hottest
// replies, and most of their cost was building ReplicaInfo/BufHandle objects only for the encoder
// to read them back. A reply here captures each handle as (segment, address, size) when it is
// made, and writes its wire bytes straight from that capture (SelfEncoding, common/proto-codec.ts),
// with each segment's name and endpoint pre-encoded once. `replica_list` builds the plain objects
// on first access (gRPC, HTTP, tests) from the same capture, so a reply describes the object as it
// was when the reply was made, whatever happens to the object afterwards.
import { ErrorCode } from '../../common/error-code.js';
import { varintBytes, WIRE_BODY, WIRE_TYPE, type SelfEncoding, type Writer } from '../../common/proto-codec.js';
import type { BufHandle__Output } from '../../proto/gen/store/BufHandle.js';
import { BufStatus, type BufStatus__Output } from '../../proto/gen/store/BufStatus.js';
import type { GetReplicaListResponse__Output } from '../../proto/gen/store/GetReplicaListResponse.js';
import { MemoryType, type MemoryType__Output } from '../../proto/gen/store/MemoryType.js';
import type { PutStartResponse__Output } from '../../proto/gen/store/PutStartResponse.js';
import type { ReplicaInfo__Output } from '../../proto/gen/store/ReplicaInfo.js';
import { ReplicaStatus } from '../../proto/gen/store/ReplicaStatus.js';
import { FLAG_CXL, HANDLE_FIELDS, writeGeneration, type ObjectMeta, type ReplicaStatusValue } from './object-meta.js';
import type { Segment, SegmentRegistry } from './segment-registry.js';

// Tags (field number << 3 | wire type) of the fields written here; see proto/store_master.proto.
const REPLY_REPLICA_LIST = 0x12; // GetReplicaListResponse.replica_list = 2, PutStartResponse.replica_list = 2
const REPLY_LEASE_TTL_MS = 0x18; // GetReplicaListResponse.lease_ttl_ms = 3
const REPLICA_HANDLES = 0x0a; // ReplicaInfo.handles = 1
const REPLICA_STATUS = 0x10; // ReplicaInfo.status = 2
const HANDLE_SIZE = 0x10; // BufHandle.size = 2
const HANDLE_BUFFER = 0x18; // BufHandle.buffer = 3
const HANDLE_STATUS = 0x20; // BufHandle.status = 4
const HANDLE_MEMORY_TYPE = 0x30; // BufHandle.memory_type = 6
const HANDLE_GENERATION = 0x40; // BufHandle.generation = 8
const REPLY_SLICE_CHECKSUMS = 0x22; // GetReplicaListResponse.slice_checksums = 4 (packed)

/** A segment's constant handle fields in wire form: segment_name (1), te_endpoint (5), incarnation (7). */
interface SegmentWire {
  name: Buffer;
  endpoint: Buffer;
  incarnation: Buffer;
}

const segmentWire = new WeakMap<Segment, SegmentWire>();

/** The checksums of an object whose writer recorded none (shared: replies are read-only). */
const NO_CHECKSUMS = Object.freeze([]) as unknown as number[];

/** Field `tag` holding string `s`, encoded (empty when `s` is empty: proto3 leaves defaults out). */
function stringField(tag: number, s: string): Buffer {
  if (s.length === 0) return Buffer.alloc(0);
  const body = Buffer.from(s, 'utf8');
  return Buffer.concat([Buffer.from([tag, ...varintBytes(body.length)]), body]);
}

/** Field `tag` holding the varint `v` (empty for 0). */
function varintField(tag: number, v: number): Buffer {
  return v === 0 ? Buffer.alloc(0) : Buffer.from([tag, ...varintBytes(v)]);
}

function wireOf(seg: Segment): SegmentWire {
  let w = segmentWire.get(seg);
  if (w === undefined) {
    w = { name: stringField(0x0a, seg.name), endpoint: stringField(0x2a, seg.teEndpoint), incarnation: varintField(0x38, seg.incarnation) };
    segmentWire.set(seg, w);
  }
  return w;
}

/**
 * The replicas of one object at one instant. The first handle is held in fields (the usual object
 * has one replica of one slice, so that case allocates nothing more); further handles go to
 * `more` as (segment, address, size) triples.
 */
class ReplicaCapture {
  private readonly slices: number;
  private readonly status: ReplicaStatusValue;
  private readonly memoryType: MemoryType__Output;
  /** Handles captured (replicas x slices). */
  private readonly count: number;
  private readonly seg0: Segment | null;
  private readonly addr0: number;
  private readonly size0: number;
  private readonly more: (Segment | number)[] | null;
  private list: ReplicaInfo__Output[] | undefined;
  /** The write's generation in every handle (PutStart replies), 0 in read replies. */
  protected readonly generation: number;

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

  /** The handles in wire order (replica-major), calling `each(segment, address, size)`. */
  private forEach(each: (seg: Segment, addr: number, size: number, k: number) => void): void {
    if (this.seg0 === null) return;
    each(this.seg0, this.addr0, this.size0, 0);
    const more = this.more;
    if (more !== null) for (let i = 0; i < more.length; i += HANDLE_FIELDS) each(more[i] as Segment, more[i + 1] as number, more[i + 2] as number, i / HANDLE_FIELDS + 1);
  }

  private get bufStatus(): BufStatus__Output {
    return this.status === ReplicaStatus.COMPLETE ? BufStatus.BUF_STATUS_COMPLETE : BufStatus.BUF_STATUS_INIT;
  }

  /** The plain ReplicaInfo messages, built once on first use. */
  get replica_list(): ReplicaInfo__Output[] {
    if (this.list !== undefined) return this.list;
    const slices = this.slices;
    const list: ReplicaInfo__Output[] = [];
    const bufStatus = this.bufStatus;
    this.forEach((seg, addr, size, k) => {
      if (k % slices === 0) list.push({ handles: [], status: this.status });
      const handle: BufHandle__Output = {
        segment_name: seg.name,
        size,
        buffer: addr,
        status: bufStatus,
        te_endpoint: seg.teEndpoint,
        memory_type: this.memoryType,
        incarnation: seg.incarnation,
        generation: this.generation,
      };
      list[list.length - 1].handles.push(handle);
    });
    this.list = list;
    return list;
  }

  /** Field 2 of both reply types: one ReplicaInfo per replica, byte for byte what the generic encoder writes. */
  protected writeReplicaList(w: Writer): void {
    const more = this.more;
    const slices = this.slices;
    const count = this.count;
    if (count === 0) return;
    let replica = -1;
    for (let k = 0; k < count; k++) {
      if (k % slices === 0) {
        if (replica >= 0) this.endReplica(w, replica);
        w.byte(REPLY_REPLICA_LIST);
        replica = w.beginLen();
      }
      if (k === 0) this.writeHandle(w, this.seg0!, this.addr0, this.size0);
      else {
        const i = (k - 1) * HANDLE_FIELDS;
        this.writeHandle(w, more![i] as Segment, more![i + 1] as number, more![i + 2] as number);
      }
    }
    this.endReplica(w, replica);
  }

  private endReplica(w: Writer, start: number): void {
    if (this.status !== 0) {
      w.byte(REPLICA_STATUS);
      w.varint(this.status);
    }
    w.endLen(start);
  }

  private writeHandle(w: Writer, seg: Segment, addr: number, size: number): void {
    const sw = wireOf(seg);
    w.byte(REPLICA_HANDLES);
    const start = w.beginLen();
    w.raw(sw.name);
    if (size !== 0) {
      w.byte(HANDLE_SIZE);
      w.varint(size);
    }
    if (addr !== 0) {
      w.byte(HANDLE_BUFFER);
      w.varint(addr);
    }
    const bufStatus = this.bufStatus;
    if (bufStatus !== 0) {
      w.byte(HANDLE_STATUS);
      w.varint(bufStatus);
    }
    w.raw(sw.endpoint);
    if (this.memoryType !== 0) {
      w.byte(HANDLE_MEMORY_TYPE);
      w.varint(this.memoryType);
    }
    w.raw(sw.incarnation);
    if (this.generation !== 0) {
      w.byte(HANDLE_GENERATION);
      w.varint(this.generation);
    }
    w.endLen(start);
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
export class GrantedReplicas extends ReplicaCapture implements GetReplicaListResponse__Output, SelfEncoding {
  readonly status_code = ErrorCode.OK;

  /** The slices' CRC-32C as the writer recorded them ([] when it recorded none). */
  readonly slice_checksums: number[];

  constructor(
    segments: SegmentRegistry,
    meta: ObjectMeta,
    readonly lease_ttl_ms: number,
  ) {
    super(segments, meta);
    this.slice_checksums = meta.hasChecksums ? meta.checksums : NO_CHECKSUMS;
  }

  declare readonly [WIRE_TYPE]: string;

  [WIRE_BODY](w: Writer): void {
    this.writeReplicaList(w);
    if (this.lease_ttl_ms !== 0) {
      w.byte(REPLY_LEASE_TTL_MS);
      w.varint(this.lease_ttl_ms);
    }
    const sums = this.slice_checksums;
    if (sums.length !== 0) {
      w.byte(REPLY_SLICE_CHECKSUMS);
      const start = w.beginLen();
      for (let i = 0; i < sums.length; i++) w.varint(sums[i]);
      w.endLen(start);
    }
  }

  toJSON(): GetReplicaListResponse__Output {
    return { status_code: this.status_code, replica_list: this.replica_list, lease_ttl_ms: this.lease_ttl_ms, slice_checksums: this.slice_checksums };
  }
}

/** A successful PutStart: status OK and the space reserved for the writer, with the write's generation. */
export class PlacedReplicas extends ReplicaCapture implements PutStartResponse__Output, SelfEncoding {
  readonly status_code = ErrorCode.OK;

  constructor(segments: SegmentRegistry, meta: ObjectMeta) {
    super(segments, meta, writeGeneration(meta));
  }

  declare readonly [WIRE_TYPE]: string;

  [WIRE_BODY](w: Writer): void {
    this.writeReplicaList(w);
  }

  toJSON(): PutStartResponse__Output {
    return { status_code: this.status_code, replica_list: this.replica_list };
  }
}

// On the prototypes, so an instance carries no field for it.
Object.defineProperty(GrantedReplicas.prototype, WIRE_TYPE, { value: 'GetReplicaListResponse' });
Object.defineProperty(PlacedReplicas.prototype, WIRE_TYPE, { value: 'PutStartResponse' });
