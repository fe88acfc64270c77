// MasterCore and integrity: segments mounted with an incarnation hand it out in every handle;
// writes carry a generation; the space of a write that is given up is reused only after the
// owner has fenced its generation; checksums recorded at PutEnd come back with every read;
// segments a writer could not reach are avoided for a while.
import { ErrorCode } from '../../common/error-code.js';
import { makeCore, MEMORY, mountReq, putReq, usage } from './master-core-fixture.js';

const INC = 0x1234_5678_9abc;

function fencedCore() {
  const core = makeCore();
  expect(core.mountSegment(mountReq('s0', 1 << 20, 'owner', 0x1000_0000, '10.0.0.1:1', INC), 0).status_code).toBe(ErrorCode.OK);
  return core;
}

describe('incarnations and generations', () => {
  it('every handle carries the segment incarnation; PutStart handles carry the write generation', () => {
    const core = fencedCore();
    const start = core.putStart(putReq('k', [100, 200]), 41);
    expect(start.replica_list[0].handles.map((h) => [h.incarnation, h.generation])).toEqual([
      [INC, 42],
      [INC, 42],
    ]);
    expect(core.putEnd({ key: 'k', replica_type: MEMORY, slice_checksums: [] }, 43).status_code).toBe(ErrorCode.OK);
    const got = core.getReplicaList({ key: 'k' }, 44);
    expect(got.replica_list[0].handles.map((h) => [h.incarnation, h.generation])).toEqual([
      [INC, 0],
      [INC, 0],
    ]);
  });

  it('refuses an incarnation that is not a safe integer', () => {
    const core = makeCore();
    expect(core.mountSegment(mountReq('bad', 4096, 'c', 0x1000, '', -1), 0).status_code).toBe(ErrorCode.INVALID_PARAMS);
    expect(core.mountSegment(mountReq('bad', 4096, 'c', 0x1000, '', 2 ** 60), 0).status_code).toBe(ErrorCode.INVALID_PARAMS);
  });
});

describe('write fences', () => {
  it('a revoked write keeps its space until the owner acks a fence refusing its generation', () => {
    const core = fencedCore();
    core.putStart(putReq('k', 4096), 9); // generation 10
    expect(usage(core).s0).toBe(4096);
    expect(core.putRevoke({ key: 'k', replica_type: MEMORY, failed_segments: [] }, 11).status_code).toBe(ErrorCode.OK);
    expect(usage(core).s0).toBe(4096); // quarantined, not free
    // the same space cannot be handed to another writer now
    const other = core.putStart(putReq('k2', 4096), 12);
    expect(other.replica_list[0].handles[0].buffer).not.toBe(0x1000_0000);
    const ping = core.ping({ client_id: 'owner', fence_acks: [], can_copy: false }, 13);
    expect(ping.fences).toEqual([{ segment_name: 's0', version: 1, below: 13, revoked: [] }]); // k2 (gen 13) is still open
    expect(usage(core).s0).toBe(8192);
    core.ping({ client_id: 'owner', fence_acks: [{ segment_name: 's0', version: 1 }], can_copy: false }, 14);
    expect(usage(core).s0).toBe(4096); // only k2's space is in use now
  });

  it('lists revoked generations that are not below every open write, and only the owner can ack', () => {
    const core = fencedCore();
    core.putStart(putReq('old', 1024), 1); // generation 2, stays open
    core.putStart(putReq('gone', 1024), 5); // generation 6
    core.putRevoke({ key: 'gone', replica_type: MEMORY, failed_segments: [] }, 7);
    const f = core.ping({ client_id: 'owner', fence_acks: [], can_copy: false }, 8).fences[0];
    expect(f).toMatchObject({ below: 2, revoked: [6] });
    core.ping({ client_id: 'intruder', fence_acks: [{ segment_name: 's0', version: f.version }], can_copy: false }, 9);
    expect(usage(core).s0).toBe(2048); // an ack from anyone but the owner frees nothing
    core.ping({ client_id: 'owner', fence_acks: [{ segment_name: 's0', version: f.version }], can_copy: false }, 9);
    expect(usage(core).s0).toBe(1024);
  });

  it('zombie writes released by eviction and writes of a dead client are fenced too', () => {
    const core = makeCore({ putStartReleaseTimeoutMs: 100, evictionHighWatermarkRatio: 0.0001 });
    core.mountSegment(mountReq('s0', 1 << 20, 'owner', 0x1000_0000, '10.0.0.1:1', INC), 0);
    core.putStart(putReq('zombie', 4096), 0);
    core.sweep(500); // releases the zombie
    expect(usage(core).s0).toBe(4096);
    const f = core.ping({ client_id: 'owner', fence_acks: [], can_copy: false }, 501).fences[0];
    expect(f.below).toBe(502);
    core.ping({ client_id: 'owner', fence_acks: [{ segment_name: 's0', version: f.version }], can_copy: false }, 502);
    expect(usage(core).s0).toBe(0);
  });

  it('segments mounted without an incarnation free a revoked write at once (owners that cannot fence)', () => {
    const core = makeCore();
    core.mountSegment(mountReq('plain', 1 << 20, 'owner'), 0);
    core.putStart(putReq('k', 4096), 1);
    core.putRevoke({ key: 'k', replica_type: MEMORY, failed_segments: [] }, 2);
    expect(usage(core).plain).toBe(0);
    expect(core.ping({ client_id: 'owner', fence_acks: [], can_copy: false }, 3).fences).toEqual([]);
  });
});

describe('checksums', () => {
  it('are stored at PutEnd and returned with every GetReplicaList; a wrong count is refused', () => {
    const core = fencedCore();
    core.putStart(putReq('k', [10, 20]), 1);
    expect(core.putEnd({ key: 'k', replica_type: MEMORY, slice_checksums: [1] }, 2).status_code).toBe(ErrorCode.INVALID_PARAMS);
    expect(core.putEnd({ key: 'k', replica_type: MEMORY, slice_checksums: [0xdeadbeef, 7] }, 2).status_code).toBe(ErrorCode.OK);
    expect(core.getReplicaList({ key: 'k' }, 3).slice_checksums).toEqual([0xdeadbeef, 7]);
    core.putStart(putReq('one', 10), 4);
    core.putEnd({ key: 'one', replica_type: MEMORY, slice_checksums: [0xffffffff] }, 5);
    expect(core.getReplicaList({ key: 'one' }, 6).slice_checksums).toEqual([0xffffffff]);
    core.putStart(putReq('none', 10), 7);
    core.putEnd({ key: 'none', replica_type: MEMORY, slice_checksums: [] }, 8);
    expect(core.getReplicaList({ key: 'none' }, 9).slice_checksums).toEqual([]);
    const batch = core.batchGetReplicaList({ keys: ['k', 'none'] }, 10);
    expect(batch.results.map((r) => r.slice_checksums)).toEqual([[0xdeadbeef, 7], []]);
  });

  it('batch ends take one list per key', () => {
    const core = fencedCore();
    core.batchPutStart({ requests: [putReq('a', 10), putReq('b', 10)] }, 1);
    const end = core.batchPutEnd({ keys: ['a', 'b'], replica_type: MEMORY, checksums: [{ crc32c: [11] }, { crc32c: [1, 2] }], failed_segments: [] }, 2);
    expect(end.results.map((r) => r.status_code)).toEqual([ErrorCode.OK, ErrorCode.INVALID_PARAMS]);
    expect(core.getReplicaList({ key: 'a' }, 3).slice_checksums).toEqual([11]);
  });
});

describe('unreachable segments', () => {
  it('a segment a writer reported is not placed on until the report times out, unless nothing else has room', () => {
    const core = makeCore({ suspectSegmentMs: 1000 });
    core.mountSegment(mountReq('a', 1 << 20, 'o1', 0x1000_0000, 'a:1'), 0);
    core.mountSegment(mountReq('b', 1 << 20, 'o2', 0x2000_0000, 'b:1'), 0);
    core.putStart(putReq('k', 4096, { preferred_segment: 'a' }), 1);
    core.putRevoke({ key: 'k', replica_type: MEMORY, failed_segments: ['a'] }, 2);
    for (let i = 0; i < 10; i++) {
      const r = core.putStart(putReq(`k${i}`, 4096, { preferred_segment: 'a' }), 3);
      expect(r.replica_list[0].handles[0].segment_name).toBe('b');
    }
    const both = core.putStart(putReq('two', 4096, { replica_num: 2 }), 4);
    expect(both.replica_list).toHaveLength(1); // best effort: b only
    core.sweep(1003); // the report has timed out
    expect(core.putStart(putReq('again', 4096, { preferred_segment: 'a' }), 1004).replica_list[0].handles[0].segment_name).toBe('a');
    // every segment suspect: placed anyway
    core.putRevoke({ key: 'again', replica_type: MEMORY, failed_segments: ['a', 'b'] }, 1005);
    expect(core.putStart(putReq('last', 4096), 1006).status_code).toBe(ErrorCode.OK);
  });
});
