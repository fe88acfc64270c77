// MasterCore segments and clients: mount/unmount (with grace), liveness expiry, remount hints,
// BatchQueryIp, BatchReplicaClear and the read-only views.
import { ErrorCode } from '../../common/error-code.js';
import { defaultMasterCoreConfig, EMPTY_STATS, MOUNT_LIMITS } from './master-core.js';
import type { MasterCore } from './master-core.js';
import { makeCore, MEMORY, mountReq, putObject, putReq, usage } from './master-core-fixture.js';

const TTL = defaultMasterCoreConfig.clientTtlMs;

describe('mount', () => {
  it('registers a segment and its client, generating a UUID segment id', () => {
    const core = makeCore({ viewVersion: 7 });
    expect(core.ping({ client_id: 'c1', fence_acks: [], can_copy: false }, 0)).toEqual({
      status_code: ErrorCode.OK,
      view_version: 7,
      need_remount: true,
      fences: [],
      copies: [],
      file_tier_root: '',
      copy_push: false, // no shell sends copy notices here
      more_copies: false,
    });
    const r = core.mountSegment(mountReq('seg-a', 1 << 20, 'c1', 0x7f00_0000_0000, '10.1.1.1:15000'), 5);
    expect(r.status_code).toBe(ErrorCode.OK);
    expect(r.segment_id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(core.ping({ client_id: 'c1', fence_acks: [], can_copy: false }, 6)).toEqual({
      status_code: ErrorCode.OK,
      view_version: 7,
      need_remount: false,
      fences: [],
      copies: [],
      file_tier_root: '',
      copy_push: false, // no shell sends copy notices here
      more_copies: false,
    });
    expect(core.segmentsDetail()).toEqual([
      {
        segment_name: 'seg-a',
        segment_id: r.segment_id,
        client_id: 'c1',
        base_address: 0x7f00_0000_0000,
        size_bytes: 1 << 20,
        te_endpoint: '10.1.1.1:15000',
        protocol: 'tcp',
        status: 'MOUNTED',
        allocator_used_bytes: 0,
        allocator_capacity_bytes: 1 << 20,
      },
    ]);
    expect(core.segmentNames()).toEqual(['seg-a']);
    expect(core.querySegment('seg-a')).toEqual({ used: 0, capacity: 1 << 20 });
    expect(core.querySegment('nope')).toBeUndefined();
  });

  it('keeps a given segment id and uses the segment name as endpoint when none is given', () => {
    const core = makeCore();
    const id = '0a1b2c3d-0000-4000-8000-00000000abcd';
    expect(core.mountSegment({ ...mountReq('host-1:12345', 4096), segment_id: id }, 0)).toEqual({ status_code: ErrorCode.OK, segment_id: id });
    expect(core.segmentsDetail()[0].te_endpoint).toBe('host-1:12345');
  });

  it('rejects bad mounts and changes nothing', () => {
    const core = makeCore();
    core.mountSegment(mountReq('seg', 4096, 'c1'), 0);
    const before = core.segmentsDetail();
    const cases: [Parameters<MasterCore['mountSegment']>[0], number][] = [
      [mountReq('zero', 0), ErrorCode.INVALID_PARAMS],
      [mountReq('', 4096), ErrorCode.INVALID_PARAMS],
      [mountReq('nocli', 4096, ''), ErrorCode.INVALID_PARAMS],
      [{ ...mountReq('badid', 4096), segment_id: 'not-a-uuid' }, ErrorCode.INVALID_PARAMS],
      [mountReq('overflow', 2 ** 52, 'c1', 2 ** 53 - 10), ErrorCode.INVALID_PARAMS],
      [mountReq('seg', 4096, 'c1'), ErrorCode.SEGMENT_ALREADY_EXISTS],
      [{ ...mountReq('other', 4096), segment_id: before[0].segment_id }, ErrorCode.SEGMENT_ALREADY_EXISTS],
      // strings past MOUNT_LIMITS: each would be repeated in every reply naming the segment
      [mountReq('n'.repeat(MOUNT_LIMITS.segment_name + 1), 4096), ErrorCode.INVALID_PARAMS],
      // names follow the key alphabet (common/key-rules.ts): one line each in /get_all_segments
      [mountReq('two\nsegments', 4096), ErrorCode.INVALID_PARAMS],
      [mountReq('lone\ud800', 4096), ErrorCode.INVALID_PARAMS],
      [mountReq('c1\u0085', 4096), ErrorCode.INVALID_PARAMS],
      // the other strings are repeated in replies: they must be Unicode text
      [mountReq('badte', 4096, 'c1', 0x10000000, '127.0.0.1:1\udcff'), ErrorCode.INVALID_PARAMS],
      [mountReq('badcli', 4096, 'c1\udcff'), ErrorCode.INVALID_PARAMS],
      [mountReq('longcli', 4096, 'c'.repeat(MOUNT_LIMITS.client_id + 1)), ErrorCode.INVALID_PARAMS],
      [mountReq('longte', 4096, 'c1', 0x10000000, `h${'x'.repeat(MOUNT_LIMITS.te_endpoint)}:1`), ErrorCode.INVALID_PARAMS],
      [{ ...mountReq('longproto', 4096), protocol: 'p'.repeat(MOUNT_LIMITS.protocol + 1) }, ErrorCode.INVALID_PARAMS],
    ];
    for (const [req, code] of cases) expect(core.mountSegment(req, 1).status_code).toBe(code);
    expect(core.segmentsDetail()).toEqual(before);
    expect(core.stats(1).clients).toBe(1);
  });
});

describe('unmount', () => {
  function twoSegments(): MasterCore {
    const core = makeCore();
    core.mountSegment(mountReq('s0', 1 << 20, 'c0', 0), 0);
    core.mountSegment(mountReq('s1', 1 << 20, 'c1', 1 << 30), 0);
    return core;
  }

  it('rejects unknown segments and foreign clients', () => {
    const core = twoSegments();
    expect(core.unmountSegment({ segment_name: 'nope', client_id: '', grace_period_seconds: 0 }, 0).status_code).toBe(ErrorCode.SEGMENT_NOT_FOUND);
    expect(core.unmountSegment({ segment_name: 's0', client_id: 'c1', grace_period_seconds: 0 }, 0).status_code).toBe(ErrorCode.INVALID_PARAMS);
    expect(core.unmountSegment({ segment_name: 's0\n', client_id: 'c0', grace_period_seconds: 0 }, 0).status_code).toBe(ErrorCode.INVALID_PARAMS);
    expect(core.unmountSegment({ segment_name: 's9', client_id: 'c0', grace_period_seconds: 0 }, 0).status_code).toBe(ErrorCode.SEGMENT_NOT_FOUND);
    expect(core.segmentNames()).toEqual(['s0', 's1']);
  });

  it("refuses an unmount that does not name the owner's client id, empty included (issue 14)", () => {
    const core = twoSegments();
    putObject(core, 'k', 1000, 0, { preferred_segment: 's0' });
    expect(core.unmountSegment({ segment_name: 's0', client_id: '', grace_period_seconds: 0 }, 1).status_code).toBe(ErrorCode.INVALID_PARAMS);
    expect(core.unmountSegment({ segment_name: 's0', client_id: 'c1', grace_period_seconds: 5 }, 1).status_code).toBe(ErrorCode.INVALID_PARAMS);
    expect(core.segmentNames()).toEqual(['s0', 's1']);
    expect(core.segmentsDetail().find((s) => s.segment_name === 's0')!.status).toBe('MOUNTED');
    expect(core.queryKey('k')!.map((r) => r.handles[0].segment_name)).toEqual(['s0']);
  });

  it("refuses a mount under a mounted segment's name from another client or endpoint: the owner's segment is unchanged", () => {
    const core = makeCore();
    core.mountSegment(mountReq('s0', 1 << 20, 'owner', 1 << 30, 'owner-host:1', 7), 0);
    const before = core.segmentsDetail();
    expect(core.mountSegment(mountReq('s0', 1 << 20, 'stranger', 1 << 20, 'stranger-host:1'), 1).status_code).toBe(ErrorCode.SEGMENT_ALREADY_EXISTS);
    expect(core.mountSegment(mountReq('s0', 1 << 20, 'owner', 1 << 20, 'stranger-host:1'), 1).status_code).toBe(ErrorCode.SEGMENT_ALREADY_EXISTS);
    expect(core.segmentsDetail()).toEqual(before);
    const put = core.putStart(putReq('k', 100), 2);
    expect(put.replica_list[0].handles[0].te_endpoint).toBe('owner-host:1');
  });

  it('removes every replica on the segment at once, deleting objects left with none', () => {
    const core = twoSegments();
    putObject(core, 'both', 1000, 0, { replica_num: 2 });
    putObject(core, 'only0', 1000, 0, { preferred_segment: 's0' });
    putObject(core, 'only1', 1000, 0, { preferred_segment: 's1' });
    expect(core.unmountSegment({ segment_name: 's0', client_id: 'c0', grace_period_seconds: 0 }, 1).status_code).toBe(ErrorCode.OK);
    expect(core.segmentNames()).toEqual(['s1']);
    expect(core.queryKey('only0')).toBeUndefined();
    expect(core.queryKey('both')!.map((r) => r.handles[0].segment_name)).toEqual(['s1']);
    expect(core.getReplicaList({ key: 'only1' }, 2).status_code).toBe(ErrorCode.OK);
    expect(core.querySegment('s1')!.used).toBe(2000);
  });

  it('frees the other slices of a replica that loses one slice', () => {
    const core = makeCore();
    core.mountSegment(mountReq('big', 1 << 20, 'c', 0), 0);
    core.mountSegment(mountReq('small', 4096, 'c', 1 << 30), 0);
    core.mountSegment(mountReq('big2', 1 << 20, 'c', 2 ** 31), 0);
    // slice 0 (8 KiB) only fits big/big2, slice 1 (1 KiB) prefers small
    putObject(core, 'k', [8192, 1024], 0, { preferred_segment: 'small' });
    const segs = core.queryKey('k')![0].handles.map((h) => h.segment_name);
    expect(segs[1]).toBe('small');
    core.unmountSegment({ segment_name: 'small', client_id: 'c', grace_period_seconds: 0 }, 1);
    expect(core.queryKey('k')).toBeUndefined();
    expect(core.querySegment('big')!.used + core.querySegment('big2')!.used).toBe(0);
  });

  it('revokes writes in flight on the segment', () => {
    const core = twoSegments();
    core.putStart(putReq('w', 1000, { replica_num: 2 }), 0);
    core.unmountSegment({ segment_name: 's0', client_id: 'c0', grace_period_seconds: 0 }, 1);
    expect(core.queryKey('w')).toBeUndefined();
    expect(core.putEnd({ key: 'w', replica_type: MEMORY, slice_checksums: [] }, 2).status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
    expect(core.querySegment('s1')!.used).toBe(0);
  });

  it('handles an upsert in flight whose old or new placement is on the segment', () => {
    // old placement on s0, new (other layout) on s1: unmounting s0 drops the fallback only
    const a = twoSegments();
    putObject(a, 'k', 1000, 0, { preferred_segment: 's0' });
    expect(a.upsertStart(putReq('k', 2000, { preferred_segment: 's1' }), 1).reused).toBe(false);
    a.unmountSegment({ segment_name: 's0', client_id: 'c0', grace_period_seconds: 0 }, 2);
    expect(a.upsertEnd({ key: 'k', replica_type: MEMORY, slice_checksums: [] }, 3).status_code).toBe(ErrorCode.OK);
    expect(a.queryKey('k')!.map((r) => [r.handles[0].segment_name, r.handles[0].size])).toEqual([['s1', 2000]]);
    expect(a.querySegment('s1')!.used).toBe(2000);
    expect(a.checkIndexes()).toEqual([]);
    // ...so revoking such an upsert leaves nothing to fall back to
    const r = twoSegments();
    putObject(r, 'k', 1000, 0, { preferred_segment: 's0' });
    r.upsertStart(putReq('k', 2000, { preferred_segment: 's1' }), 1);
    r.unmountSegment({ segment_name: 's0', client_id: 'c0', grace_period_seconds: 0 }, 2);
    expect(r.upsertRevoke({ key: 'k', replica_type: MEMORY, failed_segments: [] }, 3).status_code).toBe(ErrorCode.OK);
    expect(r.queryKey('k')).toBeUndefined();
    expect(r.querySegment('s1')!.used).toBe(0);
    // unmounting s1 instead revokes the upsert: the object is back on s0 as it was
    const b = twoSegments();
    putObject(b, 'k', 1000, 0, { preferred_segment: 's0' });
    b.upsertStart(putReq('k', 2000, { preferred_segment: 's1' }), 1);
    b.unmountSegment({ segment_name: 's1', client_id: 'c1', grace_period_seconds: 0 }, 2);
    expect(b.queryKey('k')!.map((r) => [r.handles[0].segment_name, r.handles[0].size])).toEqual([['s0', 1000]]);
    expect(b.querySegment('s0')!.used).toBe(1000);
    expect(b.checkIndexes()).toEqual([]);
  });

  it('with a grace period keeps the segment readable but closed to allocation, then sweep unmounts it', () => {
    const core = twoSegments();
    putObject(core, 'k', 1000, 0, { preferred_segment: 's0' });
    expect(core.unmountSegment({ segment_name: 's0', client_id: 'c0', grace_period_seconds: 5 }, 1000).status_code).toBe(ErrorCode.OK);
    expect(core.segmentsDetail().find((s) => s.segment_name === 's0')!.status).toBe('UNMOUNTING');
    expect(core.getReplicaList({ key: 'k' }, 1001).status_code).toBe(ErrorCode.OK);
    for (let i = 0; i < 10; i++) {
      const r = core.putStart(putReq(`n${i}`, 100, { preferred_segment: 's0' }), 1001);
      expect(r.replica_list[0].handles[0].segment_name).toBe('s1');
    }
    core.ping({ client_id: 'c0', fence_acks: [], can_copy: false }, 5999);
    core.ping({ client_id: 'c1', fence_acks: [], can_copy: false }, 5999);
    expect(core.sweep(5999).unmountedSegments).toEqual([]);
    expect(core.sweep(6000).unmountedSegments).toEqual(['s0']);
    expect(core.getReplicaList({ key: 'k' }, 6001).status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
  });
});

describe('client liveness', () => {
  it('drops a client silent for longer than client_ttl and unmounts its segments', () => {
    const core = makeCore();
    core.mountSegment(mountReq('s0', 1 << 20, 'c0', 0), 0);
    core.mountSegment(mountReq('s1', 1 << 20, 'c1', 1 << 30), 0);
    putObject(core, 'on0', 100, 0, { preferred_segment: 's0' });
    putObject(core, 'on1', 100, 0, { preferred_segment: 's1' });
    core.ping({ client_id: 'c1', fence_acks: [], can_copy: false }, TTL);
    expect(core.sweep(TTL).droppedClients).toEqual([]);
    const report = core.sweep(TTL + 1);
    expect(report.droppedClients).toEqual(['c0']);
    expect(report.unmountedSegments).toEqual(['s0']);
    expect(core.queryKey('on0')).toBeUndefined();
    expect(core.queryKey('on1')).toBeDefined();
    expect(core.ping({ client_id: 'c0', fence_acks: [], can_copy: false }, TTL + 2).need_remount).toBe(true);
    expect(core.ping({ client_id: 'c1', fence_acks: [], can_copy: false }, TTL + 2).need_remount).toBe(false);
    expect(core.stats(TTL + 2).clients).toBe(1);
  });

  it('rejects a ping without a client id', () => {
    expect(makeCore().ping({ client_id: '', fence_acks: [], can_copy: false }, 0).status_code).toBe(ErrorCode.INVALID_PARAMS);
  });
});

describe('BatchQueryIp', () => {
  it('returns the unique hosts of each client, skipping unknown clients', () => {
    const core = makeCore();
    core.mountSegment(mountReq('a1', 4096, 'ca', 0, '10.0.0.1:100'), 0);
    core.mountSegment(mountReq('a2', 4096, 'ca', 8192, '10.0.0.1:101'), 0);
    core.mountSegment(mountReq('a3', 4096, 'ca', 16384, '10.0.0.2:100'), 0);
    core.mountSegment(mountReq('b1', 4096, 'cb', 32768, '[fd00::1]:100'), 0);
    const r = core.batchQueryIp({ client_ids: ['ca', 'cb', 'unknown'] }, 0);
    expect(r.status_code).toBe(ErrorCode.OK);
    expect({ ...r.client_ip_map }).toEqual({ ca: { ip_addresses: ['10.0.0.1', '10.0.0.2'] }, cb: { ip_addresses: ['fd00::1'] } });
  });
});

describe('BatchReplicaClear', () => {
  function cluster(): MasterCore {
    const core = makeCore();
    core.mountSegment(mountReq('a', 1 << 20, 'ca', 0), 0);
    core.mountSegment(mountReq('b', 1 << 20, 'cb', 1 << 30), 0);
    putObject(core, 'two', 100, 0, { replica_num: 2 });
    putObject(core, 'onA', 100, 0, { preferred_segment: 'a' });
    putObject(core, 'onB', 100, 0, { preferred_segment: 'b' });
    putObject(core, 'leased', 100, 0, { preferred_segment: 'a' });
    core.putStart(putReq('writing', 100, { preferred_segment: 'a' }), 0);
    core.getReplicaList({ key: 'leased' }, 1);
    return core;
  }
  const all = ['two', 'onA', 'onB', 'leased', 'writing', 'missing'];

  it('without a segment deletes the client-owned, unleased, complete objects', () => {
    const core = cluster();
    const r = core.batchReplicaClear({ object_keys: all, client_id: 'ca', segment_name: '' }, 2);
    expect(r).toEqual({ status_code: ErrorCode.OK, cleared_keys: ['two', 'onA'] });
    expect(['two', 'onA', 'onB', 'leased', 'writing'].map((k) => core.queryKey(k) !== undefined)).toEqual([false, false, true, true, true]);
  });

  it('with a segment clears only the replicas on it', () => {
    const core = cluster();
    const r = core.batchReplicaClear({ object_keys: all, client_id: 'ca', segment_name: 'a' }, 2);
    expect(r.cleared_keys).toEqual(['two', 'onA']);
    expect(core.queryKey('two')!.map((x) => x.handles[0].segment_name)).toEqual(['b']);
    expect(core.queryKey('onA')).toBeUndefined();
    expect(core.querySegment('a')!.used).toBe(2 * 104); // leased + writing, 100 bytes each rounded to 8
  });

  it('skips segments of another client and rejects a missing client id', () => {
    const core = cluster();
    const before = usage(core);
    expect(core.batchReplicaClear({ object_keys: all, client_id: 'cb', segment_name: 'a' }, 2).cleared_keys).toEqual([]);
    expect(core.batchReplicaClear({ object_keys: all, client_id: '', segment_name: '' }, 2).status_code).toBe(ErrorCode.INVALID_PARAMS);
    expect(usage(core)).toEqual(before);
  });
});

describe('read-only views', () => {
  it('report keys, replicas and totals without granting leases', () => {
    const core = makeCore();
    core.mountSegment(mountReq('s', 1 << 20, 'c', 4096, '1.2.3.4:5'), 0);
    putObject(core, 'a', 100, 0, { with_soft_pin: true });
    putObject(core, 'b', 200, 0, { with_hard_pin: true });
    core.putStart(putReq('w', 300), 0);
    expect([...core.allKeys()].sort()).toEqual(['a', 'b']);
    expect(core.queryKey('a')![0].handles[0]).toMatchObject({ segment_name: 's', size: 100, te_endpoint: '1.2.3.4:5' });
    expect(core.queryKey('w')).toEqual([]);
    expect(core.queryKey('zzz')).toBeUndefined();
    expect(core.remove({ key: 'a', force: false }, 1).status_code).toBe(ErrorCode.OK); // queryKey gave no lease
    // every other total (re-replication, tasks, the file and SSD tiers) is zero
    expect(core.stats(1)).toEqual({
      ...EMPTY_STATS,
      segments: 1,
      capacityBytes: 1 << 20,
      usedBytes: 200 + 304,
      objects: 2,
      hardPinned: 1,
      clients: 1,
    });
  });
});
