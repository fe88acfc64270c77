import fc from 'fast-check';
import { ErrorCode } from '../common/error-code.js';
import { codecOf, decodeMessage, decodeWith, encodeWith, lookupType } from '../common/master-proto.js';
import type { GetReplicaListResponse__Output } from '../proto/gen/store/GetReplicaListResponse.js';
import { MemoryType } from '../proto/gen/store/MemoryType.js';
import type { PutStartResponse__Output } from '../proto/gen/store/PutStartResponse.js';
import { ReplicaStatus } from '../proto/gen/store/ReplicaStatus.js';
import { ReplicaType } from '../proto/gen/store/ReplicaType.js';
import { makeCore, MEMORY, mountReq, putObject, putReq } from './core/master-core-fixture.js';
import { GrantedReplicas, PlacedReplicas } from './core/replica-capture.js';
import './replica-wire.js';

const LEASE = 5000;
const GRL = 'GetReplicaListResponse';
const PUT = 'PutStartResponse';

/** A plain copy of a reply (what a decoder or a JSON round trip gives). */
function plain<T>(reply: T): T {
  return JSON.parse(JSON.stringify(reply)) as T;
}

/**
 * The reply's own bytes, the generic encoder's bytes of its plain copy, and what protobufjs
 * decodes from the reply's bytes (it writes default values, so its own bytes differ).
 */
function encodings(type: string, reply: object): [Buffer, Buffer, unknown] {
  const codec = codecOf(type);
  const own = encodeWith(codec, reply);
  return [own, encodeWith(codec, plain(reply)), decodeMessage(lookupType(type), own)];
}

describe('replica replies', () => {
  it('encode byte for byte as the plain messages do, for any layout', () => {
    fc.assert(
      fc.property(
        fc.record({
          replicas: fc.integer({ min: 1, max: 4 }),
          slices: fc.array(fc.integer({ min: 1, max: 1 << 20 }), { minLength: 1, maxLength: 3 }),
          // names from 1 to 200 bytes, some not ASCII: lengths past 127 take two varint bytes
          name: fc.string({ minLength: 1, maxLength: 200 }),
          endpoint: fc.oneof(fc.constant(''), fc.constant('10.0.0.7:17000'), fc.string({ maxLength: 150 })),
          base: fc.oneof(fc.constant(0), fc.constant(0x10000000), fc.constant(2 ** 47)),
          complete: fc.boolean(),
          cxl: fc.boolean(),
        }),
        ({ replicas, slices, name, endpoint, base, complete, cxl }) => {
          const core = makeCore({ defaultKvLeaseTtlMs: LEASE, ...(cxl ? { allocationStrategy: 'cxl' as const, enableCxl: true } : {}) });
          for (let s = 0; s < replicas; s++) {
            const req = mountReq(`${name}-${s}`, 64 << 20, 'client-a', base + s * (64 << 20), endpoint);
            expect(core.mountSegment(cxl ? { ...req, protocol: 'cxl' } : req, 0).status_code).toBe(ErrorCode.OK);
          }
          // the cxl strategy places one replica, on the preferred CXL segment
          const start = core.putStart(putReq('k', slices, { replica_num: replicas, preferred_segment: cxl ? `${name}-0` : '' }), 1);
          expect(start.status_code).toBe(ErrorCode.OK);
          if (cxl) expect(start.replica_list[0].handles[0].memory_type).toBe(MemoryType.CXL);
          expect(start).toBeInstanceOf(PlacedReplicas);
          const [own, generic, reference] = encodings(PUT, start);
          expect(own.equals(generic)).toBe(true);
          expect(reference).toEqual(plain(start));
          expect(decodeWith<PutStartResponse__Output>(codecOf(PUT), own)).toEqual(plain(start));
          if (complete) core.putEnd({ key: 'k', replica_type: MEMORY, slice_checksums: [] }, 2);
          const got = core.getReplicaList({ key: 'k' }, 3);
          if (!complete) {
            expect(got.status_code).toBe(ErrorCode.REPLICA_IS_NOT_READY);
            return;
          }
          expect(got).toBeInstanceOf(GrantedReplicas);
          const [gOwn, gGeneric, gReference] = encodings(GRL, got);
          expect(gOwn.equals(gGeneric)).toBe(true);
          expect(gReference).toEqual(plain(got));
          // the same replicas the admin query (plain objects) shows
          expect(plain(got.replica_list)).toEqual(plain(core.queryKey('k')));
        },
      ),
      { numRuns: 150 },
    );
  });

  it('list every replica and slice with its segment, address, size and status', () => {
    const core = makeCore({ defaultKvLeaseTtlMs: LEASE });
    core.mountSegment(mountReq('s0', 1 << 20, 'client-a', 0x1000_0000, 'host0:1'), 0);
    core.mountSegment(mountReq('s1', 1 << 20, 'client-a', 0x2000_0000, 'host1:1'), 0);
    const start = core.putStart(putReq('k', [100, 200], { replica_num: 2 }), 1);
    expect(start.replica_list.map((r) => r.status)).toEqual([ReplicaStatus.INITIALIZED, ReplicaStatus.INITIALIZED]);
    expect(start.replica_list.map((r) => r.handles.map((h) => h.size))).toEqual([
      [100, 200],
      [100, 200],
    ]);
    for (const h of start.replica_list.flatMap((r) => r.handles)) {
      const base = h.segment_name === 's0' ? 0x1000_0000 : 0x2000_0000;
      expect(h.buffer - base).toBeGreaterThanOrEqual(0);
      expect(h.te_endpoint).toBe(h.segment_name === 's0' ? 'host0:1' : 'host1:1');
      expect(h.memory_type).toBe(MemoryType.DRAM);
    }
    core.putEnd({ key: 'k', replica_type: MEMORY, slice_checksums: [] }, 2);
    const got = core.getReplicaList({ key: 'k' }, 3);
    expect(got.lease_ttl_ms).toBe(LEASE);
    expect(got.replica_list.map((r) => r.status)).toEqual([ReplicaStatus.COMPLETE, ReplicaStatus.COMPLETE]);
    expect(got.replica_list.map((r) => r.handles.map((h) => h.buffer))).toEqual(start.replica_list.map((r) => r.handles.map((h) => h.buffer)));
  });

  it('describe the object as it was when made, after its space is freed and reused', () => {
    const core = makeCore({ defaultKvLeaseTtlMs: 10 });
    core.mountSegment(mountReq('s0', 1 << 20, 'client-a', 0x1000_0000, 'host0:1'), 0);
    putObject(core, 'a', 4096, 0);
    putObject(core, 'b', 4096, 0);
    const got = core.getReplicaList({ key: 'b' }, 1);
    const bytes = encodeWith(codecOf(GRL), got);
    const before = plain(got.replica_list);
    expect(core.remove({ key: 'a', force: false }, 100).status_code).toBe(ErrorCode.OK);
    expect(core.remove({ key: 'b', force: false }, 100).status_code).toBe(ErrorCode.OK);
    putObject(core, 'c', 8192, 100);
    expect(plain(got.replica_list)).toEqual(before);
    expect(encodeWith(codecOf(GRL), got).equals(bytes)).toBe(true);
    expect(decodeWith<GetReplicaListResponse__Output>(codecOf(GRL), bytes)).toEqual(plain(got));
  });

  it('mark a replica on an SSD segment DISK, its handles SSD, byte for byte as the plain messages', () => {
    const core = makeCore({ defaultKvLeaseTtlMs: LEASE, enableOffload: true });
    core.mountSegment(mountReq('mem', 1 << 20, 'client-a', 0x1000_0000, 'host0:1', 3), 0);
    core.mountSegment({ ...mountReq('ssd', 1 << 20, 'client-a', 0x5000_0000, 'host0:1', 3), protocol: 'ssd' }, 0);
    putObject(core, 'k', [100, 200], 0);
    const [copy] = core.ping({ client_id: 'client-a', fence_acks: [], can_copy: true }, 1).copies;
    expect(core.replicaCopied({ client_id: 'client-a', copy_id: copy.copy_id, ok: true, failed_segments: [] }, 2).status_code).toBe(ErrorCode.OK);
    const got = core.getReplicaList({ key: 'k' }, 3);
    const [own, generic, reference] = encodings(GRL, got);
    expect(own.equals(generic)).toBe(true);
    expect(reference).toEqual(plain(got));
    const decoded = decodeWith<GetReplicaListResponse__Output>(codecOf(GRL), own);
    expect(decoded.replica_list.map((r) => [r.replica_type, r.handles.map((h) => [h.segment_name, h.memory_type])])).toEqual([
      [
        ReplicaType.MEMORY,
        [
          ['mem', MemoryType.DRAM],
          ['mem', MemoryType.DRAM],
        ],
      ],
      [
        ReplicaType.DISK,
        [
          ['ssd', MemoryType.SSD],
          ['ssd', MemoryType.SSD],
        ],
      ],
    ]);
  });

  it('inside a batch reply, encode as the plain batch does', () => {
    const core = makeCore({ defaultKvLeaseTtlMs: LEASE });
    core.mountSegment(mountReq('s0', 1 << 20, 'client-a', 0x1000_0000, 'host0:1'), 0);
    putObject(core, 'a', 64, 0);
    core.putStart(putReq('w', 64), 0);
    const batch = core.batchGetReplicaList({ keys: ['a', 'missing', 'w', 'a'] }, 1);
    const [own, generic, reference] = encodings('BatchGetReplicaListResponse', batch);
    expect(own.equals(generic)).toBe(true);
    expect(reference).toEqual(plain(batch));
  });

  it('are written from their capture, without building the plain replica list', () => {
    const core = makeCore({ defaultKvLeaseTtlMs: LEASE });
    core.mountSegment(mountReq('s0', 1 << 20, 'client-a', 0x1000_0000, 'host0:1'), 0);
    core.mountSegment(mountReq('s1', 1 << 20, 'client-a', 0x2000_0000, 'host1:1'), 0);
    const start = core.putStart(putReq('k', [100, 200], { replica_num: 2 }), 1);
    core.putEnd({ key: 'k', replica_type: MEMORY, slice_checksums: [7, 8] }, 2);
    const got = core.getReplicaList({ key: 'k' }, 3);
    for (const [type, reply] of [
      [PUT, start],
      [GRL, got],
    ] as const) {
      const expected = encodeWith(codecOf(type), plain(reply));
      Object.defineProperty(reply, 'replica_list', {
        get() {
          throw new Error('the encoder built the plain replica list');
        },
      });
      expect(encodeWith(codecOf(type), reply).equals(expected)).toBe(true);
    }
  });

  it('refuse to stand for a message of another type', () => {
    const core = makeCore();
    core.mountSegment(mountReq('s0', 1 << 20), 0);
    const start = core.putStart(putReq('k', 64), 0);
    expect(() => encodeWith(codecOf(GRL), start)).toThrow(/PutStartResponse encoding itself where a GetReplicaListResponse is expected/);
  });
});

describe('file-tier replies (docs/tiers.md "File tier")', () => {
  it('carry replica_type DISK and file {path, size} through the fast channel codec, as protobufjs reads them', async () => {
    const { fileReplicaReply } = await import('./core/file-replica.js');
    const reply = fileReplicaReply({ size: 5_000_000_000, checksums: [1, 0xffffffff], name: 'a%2Fb' }, LEASE);
    const [own, , pb] = encodings(GRL, reply);
    const back = decodeWith<GetReplicaListResponse__Output>(codecOf(GRL), own);
    expect(back.replica_list).toEqual([{ handles: [], status: ReplicaStatus.COMPLETE, replica_type: 1, file: { path: 'a%2Fb', size: 5_000_000_000 } }]);
    expect(back.slice_checksums).toEqual([1, 0xffffffff]);
    expect(back.lease_ttl_ms).toBe(LEASE);
    expect(pb).toMatchObject({ replica_list: [{ replica_type: 1, file: { path: 'a%2Fb', size: 5000000000 } }] });
    // A memory replica's reply leaves both fields out (proto3 defaults): its bytes did not change.
    const core = makeCore();
    core.mountSegment(mountReq('seg', 1 << 20), 0);
    putObject(core, 'k', 10, 1);
    const mem = decodeWith<GetReplicaListResponse__Output>(codecOf(GRL), encodeWith(codecOf(GRL), core.getReplicaList({ key: 'k' }, 2)));
    expect(mem.replica_list[0].replica_type).toBe(0);
    expect(mem.replica_list[0].file).toBeNull();
  });
});
