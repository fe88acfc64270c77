// The wire form of the core's replica replies (GrantedReplicas and PlacedReplicas of
// master/core/replica-capture.ts): each writes its protobuf body straight from its capture of the
// handles (SelfEncoding, common/proto-codec.ts), byte for byte what the generic encoder writes
// for its plain `replica_list`, with each segment's name, endpoint and incarnation encoded once.
// The core makes the replies without knowing this; importing this module gives their classes the
// wire form (the fast channel's server does, master/channel-server.ts). Without it they still
// encode correctly, through their plain objects, only slower.
import { encodeInstancesAs, Writer } from '../common/proto-codec.js';
import { GrantedReplicas, PlacedReplicas, type ReplicaCapture } from './core/replica-capture.js';
import { HANDLE_FIELDS } from './core/object-meta.js';
import type { Segment } from './core/segment-registry.js';
import { MemoryType } from '../proto/gen/store/MemoryType.js';
import { ReplicaType } from '../proto/gen/store/ReplicaType.js';

// Tags (field number << 3 | wire type) of the fields written here; see proto/store_master.proto.
const REPLY_REPLICA_LIST = 0x12; // GetReplicaListResponse.replica_list = 2, PutStartResponse.replica_list = 2
const REPLY_LEASE_TTL_MS = 0x18; // GetReplicaListResponse.lease_ttl_ms = 3
const REPLY_SLICE_CHECKSUMS = 0x22; // GetReplicaListResponse.slice_checksums = 4 (packed)
const REPLY_VERSION = 0x28; // GetReplicaListResponse.version = 5
const REPLICA_HANDLES = 0x0a; // ReplicaInfo.handles = 1
const REPLICA_STATUS = 0x10; // ReplicaInfo.status = 2
const REPLICA_TYPE = 0x18; // ReplicaInfo.replica_type = 3
const HANDLE_SEGMENT_NAME = 0x0a; // BufHandle.segment_name = 1
const HANDLE_SIZE = 0x10; // BufHandle.size = 2
const HANDLE_BUFFER = 0x18; // BufHandle.buffer = 3
const HANDLE_STATUS = 0x20; // BufHandle.status = 4
const HANDLE_TE_ENDPOINT = 0x2a; // BufHandle.te_endpoint = 5
const HANDLE_MEMORY_TYPE = 0x30; // BufHandle.memory_type = 6
const HANDLE_INCARNATION = 0x38; // BufHandle.incarnation = 7
const HANDLE_GENERATION = 0x40; // BufHandle.generation = 8

/** A segment's constant handle fields in wire form: segment_name, te_endpoint, incarnation. */
interface SegmentWire {
  name: Buffer;
  endpoint: Buffer;
  incarnation: Buffer;
}

const segmentWire = new WeakMap<Segment, SegmentWire>();

/** The bytes `write` puts into a fresh Writer (pre-encoded fields; proto3 leaves defaults out). */
function preEncoded(write: (w: Writer) => void): Buffer {
  const w = new Writer(64);
  write(w);
  return Buffer.from(w.buf.subarray(0, w.pos));
}

function wireOf(seg: Segment): SegmentWire {
  let sw = segmentWire.get(seg);
  if (sw === undefined) {
    sw = {
      name: preEncoded((w) => {
        if (seg.name.length === 0) return;
        w.byte(HANDLE_SEGMENT_NAME);
        w.string(seg.name);
      }),
      endpoint: preEncoded((w) => {
        if (seg.teEndpoint.length === 0) return;
        w.byte(HANDLE_TE_ENDPOINT);
        w.string(seg.teEndpoint);
      }),
      incarnation: preEncoded((w) => {
        if (seg.incarnation === 0) return;
        w.byte(HANDLE_INCARNATION);
        w.varint(seg.incarnation);
      }),
    };
    segmentWire.set(seg, sw);
  }
  return sw;
}

/** Field 2 of both reply types: one ReplicaInfo per replica. */
function writeReplicaList(w: Writer, c: ReplicaCapture): void {
  const count = c.count;
  if (count === 0) return;
  const more = c.more;
  const slices = c.slices;
  let replica = -1;
  let disk = false;
  for (let k = 0; k < count; k++) {
    const i = (k - 1) * HANDLE_FIELDS;
    const seg = k === 0 ? c.seg0! : (more![i] as Segment);
    if (k % slices === 0) {
      if (replica >= 0) endReplica(w, c, replica, disk);
      w.byte(REPLY_REPLICA_LIST);
      replica = w.beginLen();
      disk = seg.disk; // a replica on offload segments is DISK (replica-capture.ts)
    }
    if (k === 0) writeHandle(w, c, seg, c.addr0, c.size0);
    else writeHandle(w, c, seg, more![i + 1] as number, more![i + 2] as number);
  }
  endReplica(w, c, replica, disk);
}

function endReplica(w: Writer, c: ReplicaCapture, start: number, disk: boolean): void {
  if (c.status !== 0) {
    w.byte(REPLICA_STATUS);
    w.varint(c.status);
  }
  if (disk) {
    w.byte(REPLICA_TYPE);
    w.varint(ReplicaType.DISK);
  }
  w.endLen(start);
}

function writeHandle(w: Writer, c: ReplicaCapture, seg: Segment, addr: number, size: number): void {
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
  const bufStatus = c.bufStatus;
  if (bufStatus !== 0) {
    w.byte(HANDLE_STATUS);
    w.varint(bufStatus);
  }
  w.raw(sw.endpoint);
  const memoryType = seg.disk ? MemoryType.SSD : c.memoryType;
  if (memoryType !== 0) {
    w.byte(HANDLE_MEMORY_TYPE);
    w.varint(memoryType);
  }
  w.raw(sw.incarnation);
  if (c.generation !== 0) {
    w.byte(HANDLE_GENERATION);
    w.varint(c.generation);
  }
  w.endLen(start);
}

encodeInstancesAs(GrantedReplicas, 'GetReplicaListResponse', function (this: GrantedReplicas, w: Writer): void {
  writeReplicaList(w, this);
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
  if (this.version !== 0) {
    w.byte(REPLY_VERSION);
    w.varint(this.version);
  }
});

encodeInstancesAs(PlacedReplicas, 'PutStartResponse', function (this: PlacedReplicas, w: Writer): void {
  writeReplicaList(w, this);
});
