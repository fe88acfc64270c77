// MasterCore write lifecycle: PutStart/PutEnd/PutRevoke, zombie writes, validation, batches, upsert.
import { ErrorCode } from '../../common/error-code.js';
import { BufStatus } from '../../proto/gen/store/BufStatus.js';
import { MemoryType } from '../../proto/gen/store/MemoryType.js';
import { ReplicaStatus } from '../../proto/gen/store/ReplicaStatus.js';
import { defaultMasterCoreConfig, MasterCore } from './master-core.js';
import { DISK, makeCore, MEMORY, mountReq, putObject, putReq, usage } from './master-core-fixture.js';

const MiB = 1 << 20;

function coreWith(segments: number, size = 16 * MiB, overrides = {}): MasterCore {
  const core = makeCore(overrides);
  for (let i = 0; i < segments; i++) {
    const r = core.mountSegment(mountReq(`seg-${i}`, size, 'client-a', 0x1000_0000 * (i + 1), `10.0.0.${i}:1700${i}`), 0);
    expect(r.status_code).toBe(ErrorCode.OK);
  }
  return core;
}

describe('put lifecycle', () => {
  it('PutStart allocates INITIALIZED replicas, PutEnd makes them COMPLETE and readable', () => {
    const core = coreWith(1);
    const start = core.putStart(putReq('k', 4096), 10);
    expect(start.status_code).toBe(ErrorCode.OK);
    expect(start.replica_list).toHaveLength(1);
    const replica = start.replica_list[0];
    expect(replica.status).toBe(ReplicaStatus.INITIALIZED);
    expect(replica.handles).toEqual([
      {
        segment_name: 'seg-0',
        size: 4096,
        buffer: 0x1000_0000,
        status: BufStatus.BUF_STATUS_INIT,
        te_endpoint: '10.0.0.0:17000',
        memory_type: MemoryType.DRAM,
        incarnation: 0,
        generation: 11,
      },
    ]); // generation: the write's start (10) + 1
    // not readable before PutEnd
    expect(core.getReplicaList({ key: 'k' }, 11).status_code).toBe(ErrorCode.REPLICA_IS_NOT_READY);
    expect(core.existKey({ key: 'k' }, 11)).toEqual({ status_code: ErrorCode.OK, exists: false, lease_ttl_ms: 0 });

    expect(core.putEnd({ key: 'k', replica_type: MEMORY, slice_checksums: [] }, 12).status_code).toBe(ErrorCode.OK);
    const got = core.getReplicaList({ key: 'k' }, 13);
    expect(got.status_code).toBe(ErrorCode.OK);
    expect(got.lease_ttl_ms).toBe(defaultMasterCoreConfig.defaultKvLeaseTtlMs);
    expect(got.replica_list[0].status).toBe(ReplicaStatus.COMPLETE);
    expect(got.replica_list[0].handles[0].status).toBe(BufStatus.BUF_STATUS_COMPLETE);
    expect(got.replica_list[0].handles[0].buffer).toBe(0x1000_0000);
    // PutEnd again is harmless (a retried call)
    expect(core.putEnd({ key: 'k', replica_type: MEMORY, slice_checksums: [] }, 14).status_code).toBe(ErrorCode.OK);
  });

  it('places each replica of a slice on a different segment, one handle per slice in order', () => {
    const core = coreWith(4);
    const start = core.putStart(putReq('k', [1000, 2000, 3000], { replica_num: 3 }), 0);
    expect(start.status_code).toBe(ErrorCode.OK);
    expect(start.replica_list).toHaveLength(3);
    for (const r of start.replica_list) expect(r.handles.map((h) => h.size)).toEqual([1000, 2000, 3000]);
    for (let slice = 0; slice < 3; slice++) {
      const segs = start.replica_list.map((r) => r.handles[slice].segment_name);
      expect(new Set(segs).size).toBe(3);
    }
  });

  it('gives fewer replicas than asked when segments run short, and NO_AVAILABLE_HANDLE when none fit', () => {
    const core = coreWith(2, 64 * 1024);
    const start = core.putStart(putReq('k', 1024, { replica_num: 5 }), 0);
    expect(start.status_code).toBe(ErrorCode.OK);
    expect(start.replica_list).toHaveLength(2);
    const before = usage(core);
    expect(core.putStart(putReq('big', 1 << 20), 0).status_code).toBe(ErrorCode.NO_AVAILABLE_HANDLE);
    expect(usage(core)).toEqual(before);
    expect(core.getReplicaList({ key: 'big' }, 0).status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
    expect(makeCore().putStart(putReq('x', 8), 0).status_code).toBe(ErrorCode.NO_AVAILABLE_HANDLE);
  });

  it('returns a whole multi-slice replica or nothing: surplus slice buffers are freed', () => {
    // seg-1 only fits small slices; the 40 KiB slice gets one replica, so the object gets one.
    const core = makeCore();
    core.mountSegment(mountReq('seg-0', 64 * 1024, 'c', 0), 0);
    core.mountSegment(mountReq('seg-1', 16 * 1024, 'c', 1 << 30), 0);
    const start = core.putStart(putReq('k', [1024, 40 * 1024], { replica_num: 2 }), 0);
    expect(start.status_code).toBe(ErrorCode.OK);
    expect(start.replica_list).toHaveLength(1);
    const used = Object.values(usage(core)).reduce((a, b) => a + b, 0);
    expect(used).toBe(1024 + 40 * 1024);
  });

  it('refuses PutStart on a complete key with OBJECT_ALREADY_EXISTS', () => {
    const core = coreWith(1);
    putObject(core, 'k', 100, 0);
    const before = usage(core);
    expect(core.putStart(putReq('k', 100), 1).status_code).toBe(ErrorCode.OBJECT_ALREADY_EXISTS);
    expect(usage(core)).toEqual(before);
    expect(core.getReplicaList({ key: 'k' }, 2).status_code).toBe(ErrorCode.OK);
  });

  it('PutRevoke returns the space and forgets the object', () => {
    const core = coreWith(1);
    core.putStart(putReq('k', 5000, { replica_num: 1 }), 0);
    expect(usage(core)['seg-0']).toBeGreaterThan(0);
    expect(core.putRevoke({ key: 'k', replica_type: MEMORY, failed_segments: [] }, 1).status_code).toBe(ErrorCode.OK);
    expect(usage(core)['seg-0']).toBe(0);
    expect(core.getReplicaList({ key: 'k' }, 2).status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
    expect(core.putRevoke({ key: 'k', replica_type: MEMORY, failed_segments: [] }, 3).status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
    expect(core.putEnd({ key: 'k', replica_type: MEMORY, slice_checksums: [] }, 3).status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
  });

  it('refuses to revoke a complete object and to end or revoke a DISK replica', () => {
    const core = coreWith(1);
    putObject(core, 'k', 100, 0);
    expect(core.putRevoke({ key: 'k', replica_type: MEMORY, failed_segments: [] }, 1).status_code).toBe(ErrorCode.INVALID_PARAMS);
    expect(core.putEnd({ key: 'k', replica_type: DISK, slice_checksums: [] }, 1).status_code).toBe(ErrorCode.INVALID_PARAMS);
    expect(core.putRevoke({ key: '', replica_type: MEMORY, failed_segments: [] }, 1).status_code).toBe(ErrorCode.INVALID_KEY);
    expect(core.getReplicaList({ key: 'k' }, 2).status_code).toBe(ErrorCode.OK);
  });
});

describe('zombie PutStart', () => {
  const discard = defaultMasterCoreConfig.putStartDiscardTimeoutMs;

  it('blocks a second PutStart within the discard timeout', () => {
    const core = coreWith(1);
    const first = core.putStart(putReq('k', 100), 1000);
    const before = usage(core);
    expect(core.putStart(putReq('k', 100), 1000 + discard).status_code).toBe(ErrorCode.OBJECT_ALREADY_EXISTS);
    expect(usage(core)).toEqual(before);
    // the first writer can still finish
    expect(core.putEnd({ key: 'k', replica_type: MEMORY, slice_checksums: [] }, 1000 + discard).status_code).toBe(ErrorCode.OK);
    expect(core.getReplicaList({ key: 'k' }, 1000 + discard).replica_list[0].handles[0].buffer).toBe(first.replica_list[0].handles[0].buffer);
  });

  it('lets a PutStart after the discard timeout preempt: old space released, new space given', () => {
    const core = coreWith(1);
    core.putStart(putReq('k', 4096), 1000);
    const usedOnce = usage(core)['seg-0'];
    const second = core.putStart(putReq('k', 8192), 1000 + discard + 1);
    expect(second.status_code).toBe(ErrorCode.OK);
    expect(second.replica_list[0].handles[0].size).toBe(8192);
    expect(usage(core)['seg-0']).toBe(8192);
    expect(usedOnce).toBe(4096);
    expect(core.putEnd({ key: 'k', replica_type: MEMORY, slice_checksums: [] }, 1000 + discard + 2).status_code).toBe(ErrorCode.OK);
    expect(core.getReplicaList({ key: 'k' }, 1000 + discard + 3).replica_list[0].handles[0].size).toBe(8192);
  });
});

describe('validation changes nothing', () => {
  const cases: [string, ReturnType<typeof putReq>, number][] = [
    ['empty key', putReq('', 10), ErrorCode.INVALID_KEY],
    ['value_length 0', { ...putReq('k', 10), value_length: 0, slice_lengths: [] }, ErrorCode.INVALID_PARAMS],
    ['no slices', { ...putReq('k', 10), slice_lengths: [] }, ErrorCode.INVALID_PARAMS],
    ['a zero slice', { ...putReq('k', [10, 0]), value_length: 10 }, ErrorCode.INVALID_PARAMS],
    ['sum differs from value_length', { ...putReq('k', [10, 20]), value_length: 31 }, ErrorCode.INVALID_PARAMS],
    ['replica_num 33', putReq('k', 10, { replica_num: 33 }), ErrorCode.INVALID_PARAMS],
    ['fractional length', { ...putReq('k', 10), value_length: 10.5, slice_lengths: [10.5] }, ErrorCode.INVALID_PARAMS],
  ];
  it.each(cases)('%s', (_name, req, code) => {
    const core = coreWith(2);
    putObject(core, 'existing', 64, 0);
    const before = { usage: usage(core), stats: core.stats(1) };
    expect(core.putStart(req, 1).status_code).toBe(code);
    expect(core.upsertStart(req, 1).status_code).toBe(code);
    expect({ usage: usage(core), stats: core.stats(1) }).toEqual(before);
    expect([...core.allKeys()]).toEqual(['existing']);
  });

  it('treats replica_num 0 and a missing config as one replica', () => {
    const core = coreWith(3);
    expect(core.putStart(putReq('a', 10, { replica_num: 0 }), 0).replica_list).toHaveLength(1);
    expect(core.putStart({ ...putReq('b', 10), config: null }, 0).replica_list).toHaveLength(1);
  });

  it('rejects bad keys on every keyed call', () => {
    const core = coreWith(1);
    expect(core.getReplicaList({ key: '' }, 0).status_code).toBe(ErrorCode.INVALID_KEY);
    expect(core.existKey({ key: '' }, 0).status_code).toBe(ErrorCode.INVALID_KEY);
    expect(core.remove({ key: '', force: false }, 0).status_code).toBe(ErrorCode.INVALID_KEY);
    expect(core.putEnd({ key: '', replica_type: MEMORY, slice_checksums: [] }, 0).status_code).toBe(ErrorCode.INVALID_KEY);
    expect(core.getReplicaList({ key: 'x'.repeat(5000) }, 0).status_code).toBe(ErrorCode.INVALID_KEY);
  });

  it.each([
    ['a newline', 'two\nkeys'],
    ['a C1 control', 'nel\u0085'],
    ['DEL', 'del\u007f'],
    ['an unpaired surrogate', 'alias\ud800'],
    ['4097 UTF-8 bytes in 2049 characters', 'é'.repeat(2049)],
  ])('refuses a key with %s on writes and lookups alike (common/key-rules.ts)', (_name, key) => {
    const core = coreWith(1);
    const before = { usage: usage(core), stats: core.stats(1) };
    expect(core.putStart(putReq(key, 10), 1).status_code).toBe(ErrorCode.INVALID_KEY);
    expect(core.upsertStart(putReq(key, 10), 1).status_code).toBe(ErrorCode.INVALID_KEY);
    const starts = core.batchPutStart({ requests: [putReq('fine', 10), putReq(key, 10)] }, 1);
    expect(starts.results.map((r) => r.status_code)).toEqual([ErrorCode.OK, ErrorCode.INVALID_KEY]);
    expect(core.getReplicaList({ key }, 1).status_code).toBe(ErrorCode.INVALID_KEY);
    expect(core.existKey({ key }, 1).status_code).toBe(ErrorCode.INVALID_KEY);
    expect(core.batchExistKey({ keys: [key] }, 1).results[0].status_code).toBe(ErrorCode.INVALID_KEY);
    expect(core.batchGetReplicaList({ keys: [key, 'fine'] }, 1).results.map((r) => r.status_code)).toEqual([ErrorCode.INVALID_KEY, ErrorCode.REPLICA_IS_NOT_READY]);
    expect(core.putEnd({ key, replica_type: MEMORY, slice_checksums: [] }, 1).status_code).toBe(ErrorCode.INVALID_KEY);
    expect(core.putRevoke({ key, replica_type: MEMORY, failed_segments: [] }, 1).status_code).toBe(ErrorCode.INVALID_KEY);
    expect(core.remove({ key, force: true }, 1).status_code).toBe(ErrorCode.INVALID_KEY);
    expect(core.putRevoke({ key: 'fine', replica_type: MEMORY, failed_segments: [] }, 1).status_code).toBe(ErrorCode.OK);
    expect({ usage: usage(core), stats: core.stats(1) }).toEqual(before);
  });

  it('accepts keys with spaces, commas, slashes and any script, up to 4096 UTF-8 bytes', () => {
    const core = coreWith(1);
    for (const key of ['a b,c/d', 'ключ', '🙂', 'é'.repeat(2048)]) {
      expect(core.putStart(putReq(key, 10), 1).status_code).toBe(ErrorCode.OK);
      expect(core.putEnd({ key, replica_type: MEMORY, slice_checksums: [] }, 1).status_code).toBe(ErrorCode.OK);
      expect(core.getReplicaList({ key }, 2).status_code).toBe(ErrorCode.OK);
    }
  });
});

describe('batch calls', () => {
  it('answer one result per item, in request order, with a top-level OK', () => {
    const core = coreWith(2);
    const starts = core.batchPutStart({ requests: [putReq('a', 10), putReq('', 10), putReq('c', 30)] }, 0);
    expect(starts.status_code).toBe(ErrorCode.OK);
    expect(starts.results.map((r) => r.status_code)).toEqual([ErrorCode.OK, ErrorCode.INVALID_KEY, ErrorCode.OK]);
    const ends = core.batchPutEnd({ keys: ['a', 'missing', 'c'], replica_type: MEMORY, checksums: [], failed_segments: [] }, 1);
    expect(ends).toEqual({
      status_code: ErrorCode.OK,
      results: [
        { key: 'a', status_code: ErrorCode.OK },
        { key: 'missing', status_code: ErrorCode.OBJECT_NOT_FOUND },
        { key: 'c', status_code: ErrorCode.OK },
      ],
    });
    const gets = core.batchGetReplicaList({ keys: ['c', 'nope', 'a'] }, 2);
    expect(gets.results.map((r) => [r.status_code, r.replica_list[0]?.handles[0]?.size])).toEqual([
      [ErrorCode.OK, 30],
      [ErrorCode.OBJECT_NOT_FOUND, undefined],
      [ErrorCode.OK, 10],
    ]);
    const exists = core.batchExistKey({ keys: ['a', 'nope'] }, 3);
    expect(exists.results.map((r) => r.exists)).toEqual([true, false]);
    core.batchPutStart({ requests: [putReq('d', 10), putReq('e', 10)] }, 4);
    const revokes = core.batchPutRevoke({ keys: ['d', 'e', 'a'], replica_type: MEMORY, checksums: [], failed_segments: [] }, 5);
    expect(revokes.results.map((r) => r.status_code)).toEqual([ErrorCode.OK, ErrorCode.OK, ErrorCode.INVALID_PARAMS]);
    expect(core.batchPutEnd({ keys: [], replica_type: MEMORY, checksums: [], failed_segments: [] }, 6)).toEqual({ status_code: ErrorCode.OK, results: [] });
  });

  it('end writes per key as the single calls do: a key listed twice, a bad key, a moved upsert', () => {
    const core = coreWith(1);
    core.batchPutStart({ requests: [putReq('a', 10), putReq('b', 10)] }, 0);
    core.putEnd({ key: 'b', replica_type: MEMORY, slice_checksums: [] }, 0);
    const usedBefore = core.querySegment('seg-0')!.used;
    expect(core.upsertStart(putReq('b', 4096), 1).reused).toBe(false); // new layout: new space
    const ends = core.batchUpsertEnd({ keys: ['a', 'a', '', 'b', 'b'], replica_type: MEMORY, checksums: [], failed_segments: [] }, 2);
    expect(ends.results.map((r) => r.status_code)).toEqual([ErrorCode.OK, ErrorCode.OK, ErrorCode.INVALID_KEY, ErrorCode.OK, ErrorCode.OK]);
    // b's previous placement was freed exactly once; both objects readable with their new sizes
    expect(core.querySegment('seg-0')!.used).toBe(usedBefore - 16 + 4096);
    expect(core.queryKey('b')![0].handles[0].size).toBe(4096);
    expect(core.queryKey('a')![0].status).toBe(ReplicaStatus.COMPLETE);
    expect(core.checkIndexes()).toEqual([]);
    // a batch with a wrong replica type ends nothing
    core.putStart(putReq('c', 10), 3);
    expect(core.batchPutEnd({ keys: ['c'], replica_type: DISK, checksums: [], failed_segments: [] }, 4).results[0].status_code).toBe(ErrorCode.INVALID_PARAMS);
    expect(core.queryKey('c')).toEqual([]);
  });
});

describe('upsert', () => {
  it('behaves like PutStart for an absent key', () => {
    const core = coreWith(1);
    const r = core.upsertStart(putReq('k', 100), 0);
    expect(r.status_code).toBe(ErrorCode.OK);
    expect(r.reused).toBe(false);
    expect(r.replica_list[0].status).toBe(ReplicaStatus.INITIALIZED);
    expect(core.upsertEnd({ key: 'k', replica_type: MEMORY, slice_checksums: [] }, 1).status_code).toBe(ErrorCode.OK);
    expect(core.getReplicaList({ key: 'k' }, 2).status_code).toBe(ErrorCode.OK);
  });

  it('reuses the placement in place when the slice layout is unchanged', () => {
    const core = coreWith(3);
    putObject(core, 'k', [100, 200], 0, { replica_num: 2 });
    const before = core.queryKey('k')!;
    const beforeUsage = usage(core);
    const r = core.upsertStart(putReq('k', [100, 200], { replica_num: 2 }), 1);
    expect(r.status_code).toBe(ErrorCode.OK);
    expect(r.reused).toBe(true);
    expect(r.replica_list.map((x) => x.status)).toEqual([ReplicaStatus.PROCESSING, ReplicaStatus.PROCESSING]);
    expect(r.replica_list.map((x) => x.handles.map((h) => h.buffer))).toEqual(before.map((x) => x.handles.map((h) => h.buffer)));
    expect(usage(core)).toEqual(beforeUsage);
    expect(core.getReplicaList({ key: 'k' }, 2).status_code).toBe(ErrorCode.REPLICA_IS_NOT_READY);
    expect(core.upsertEnd({ key: 'k', replica_type: MEMORY, slice_checksums: [] }, 3).status_code).toBe(ErrorCode.OK);
    expect(core.getReplicaList({ key: 'k' }, 4).replica_list.map((x) => x.status)).toEqual([ReplicaStatus.COMPLETE, ReplicaStatus.COMPLETE]);
  });

  it('allocates new space when the layout changes and frees the old space at UpsertEnd', () => {
    const core = coreWith(1);
    putObject(core, 'k', 1000, 0);
    const r = core.upsertStart(putReq('k', [3000, 5000]), 1);
    expect(r.status_code).toBe(ErrorCode.OK);
    expect(r.reused).toBe(false);
    expect(r.replica_list[0].handles.map((h) => h.size)).toEqual([3000, 5000]);
    expect(usage(core)['seg-0']).toBe(1000 + 3000 + 5000);
    expect(core.upsertEnd({ key: 'k', replica_type: MEMORY, slice_checksums: [] }, 2).status_code).toBe(ErrorCode.OK);
    expect(usage(core)['seg-0']).toBe(3000 + 5000);
    expect(core.getReplicaList({ key: 'k' }, 3).replica_list[0].handles.map((h) => h.size)).toEqual([3000, 5000]);
  });

  it('refuses a leased object with OBJECT_HAS_LEASE', () => {
    const core = coreWith(1);
    putObject(core, 'k', 1000, 0);
    core.getReplicaList({ key: 'k' }, 10);
    expect(core.upsertStart(putReq('k', 1000), 11).status_code).toBe(ErrorCode.OBJECT_HAS_LEASE);
    expect(core.getReplicaList({ key: 'k' }, 12).status_code).toBe(ErrorCode.OK);
    expect(core.upsertStart(putReq('k', 1000), 12 + defaultMasterCoreConfig.defaultKvLeaseTtlMs).reused).toBe(true);
  });

  it('UpsertRevoke restores a moved object, and deletes one overwritten in place', () => {
    const core = coreWith(1);
    putObject(core, 'moved', 1000, 0);
    putObject(core, 'inplace', 1000, 0);
    core.upsertStart(putReq('moved', 2000), 1);
    core.upsertStart(putReq('inplace', 1000), 1);
    expect(core.batchUpsertRevoke({ keys: ['moved', 'inplace'], replica_type: MEMORY, checksums: [], failed_segments: [] }, 2).results.map((r) => r.status_code)).toEqual([
      ErrorCode.OK,
      ErrorCode.OK,
    ]);
    const moved = core.getReplicaList({ key: 'moved' }, 3);
    expect(moved.status_code).toBe(ErrorCode.OK);
    expect(moved.replica_list[0].handles[0].size).toBe(1000);
    expect(core.getReplicaList({ key: 'inplace' }, 3).status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
    expect(usage(core)['seg-0']).toBe(1000);
  });

  it('batch upsert answers per key in order', () => {
    const core = coreWith(1);
    putObject(core, 'a', 100, 0);
    const r = core.batchUpsertStart({ requests: [putReq('a', 100), putReq('b', 50), putReq('', 1)] }, 1);
    expect(r.results.map((x) => [x.status_code, x.reused])).toEqual([
      [ErrorCode.OK, true],
      [ErrorCode.OK, false],
      [ErrorCode.INVALID_KEY, false],
    ]);
    expect(core.batchUpsertEnd({ keys: ['a', 'b'], replica_type: MEMORY, checksums: [], failed_segments: [] }, 2).results.every((x) => x.status_code === ErrorCode.OK)).toBe(true);
  });
});

describe('cxl strategy', () => {
  it('refuses a cxl configuration without enableCxl', () => {
    expect(() => makeCore({ allocationStrategy: 'cxl' })).toThrow(/enableCxl/);
    expect(() => makeCore({ evictionRatio: 0 })).toThrow(/evictionRatio/);
  });

  it('places one replica on the preferred CXL segment, marked CXL', () => {
    const core = makeCore({ allocationStrategy: 'cxl', enableCxl: true });
    core.mountSegment(mountReq('dram', MiB, 'c', 0), 0);
    core.mountSegment({ ...mountReq('cxl0', MiB, 'c', 1 << 30), protocol: 'cxl' }, 0);
    const r = core.putStart(putReq('k', 100, { replica_num: 2, preferred_segment: 'cxl0' }), 0);
    expect(r.status_code).toBe(ErrorCode.OK);
    expect(r.replica_list).toHaveLength(1);
    expect(r.replica_list[0].handles[0]).toMatchObject({ segment_name: 'cxl0', memory_type: MemoryType.CXL });
    // no preference: the segments mounted with protocol cxl
    expect(core.putStart(putReq('j', 100), 0).replica_list[0].handles[0].segment_name).toBe('cxl0');
    // a preference the cxl strategy cannot use
    expect(core.putStart(putReq('m', 100, { preferred_segment: 'dram' }), 0).replica_list[0].handles[0].segment_name).toBe('dram');
  });
});

describe('heap near its limit (heap.full, set by master/heap-guard.ts)', () => {
  it('refuses new placements with NO_AVAILABLE_HANDLE, changing nothing, while reads, ends and removals go on', () => {
    const heap = { full: false };
    const core = new MasterCore(defaultMasterCoreConfig, undefined, undefined, heap);
    expect(core.mountSegment(mountReq('seg', 16 * MiB), 0).status_code).toBe(ErrorCode.OK);
    putObject(core, 'kept', 4096, 0);
    expect(core.putStart(putReq('open', 4096), 0).status_code).toBe(ErrorCode.OK);
    heap.full = true;
    const before = usage(core);
    expect(core.putStart(putReq('new', 4096), 1).status_code).toBe(ErrorCode.NO_AVAILABLE_HANDLE);
    expect(core.batchPutStart({ requests: [putReq('b1', 4096), putReq('b2', 4096)] }, 1).results.map((r) => r.status_code)).toEqual([
      ErrorCode.NO_AVAILABLE_HANDLE,
      ErrorCode.NO_AVAILABLE_HANDLE,
    ]);
    expect(core.upsertStart(putReq('new', 4096), 1).status_code).toBe(ErrorCode.NO_AVAILABLE_HANDLE);
    expect(core.upsertStart(putReq('kept', 8192), 1).status_code).toBe(ErrorCode.NO_AVAILABLE_HANDLE); // a new layout needs new space
    expect(usage(core)).toEqual(before);
    expect(core.getReplicaList({ key: 'kept' }, 1).status_code).toBe(ErrorCode.OK);
    expect(core.putEnd({ key: 'open', replica_type: MEMORY, slice_checksums: [] }, 1).status_code).toBe(ErrorCode.OK);
    expect(core.remove({ key: 'open', force: false }, 1).status_code).toBe(ErrorCode.OK);
    heap.full = false;
    expect(core.putStart(putReq('new', 4096), 2).status_code).toBe(ErrorCode.OK);
  });
});
