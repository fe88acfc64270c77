// The file tier's index alone and inside the core: expected files, reports, the budget, reads,
// existence, removals, and the files doomed for the shell to delete.
import { ErrorCode } from '../../common/error-code.js';
import { keyFileName } from '../../common/file-tier-name.js';
import { MemoryType } from '../../proto/gen/store/MemoryType.js';
import { ReplicaType } from '../../proto/gen/store/ReplicaType.js';
import { EXPECTED_FILE_TIMEOUT_MS, FileIndex } from './file-index.js';
import { DISK, MEMORY, mountReq, putObject, putReq } from './master-core-fixture.js';
import { defaultMasterCoreConfig, MasterCore, SeededRng } from './master-core.js';

const ROOT = '/shared/kv/store_cluster';

function coreWithFiles(budget = 1 << 20): { core: MasterCore; files: FileIndex } {
  const files = new FileIndex(ROOT, budget);
  const core = new MasterCore({ ...defaultMasterCoreConfig }, new SeededRng(1), undefined, undefined, files);
  expect(core.mountSegment(mountReq('seg', 1 << 20), 0).status_code).toBe(ErrorCode.OK);
  return { core, files };
}

describe('FileIndex', () => {
  it('takes a reported file only after the memory write ended, with the same checksums, within the budget', () => {
    const idx = new FileIndex(ROOT, 100);
    expect(idx.complete('never-put', [1])).toBe(ErrorCode.OBJECT_NOT_FOUND);
    expect(idx.takeDoomed()).toEqual([{ name: keyFileName('never-put'), checksums: [1] }]);
    idx.expect('a', 60, [7], 0);
    // a stale value's file: doomed as that value only (the name may hold the current one), 'a' still expected
    expect(idx.complete('a', [8])).toBe(ErrorCode.INVALID_PARAMS);
    expect(idx.takeDoomed()).toEqual([{ name: 'a', checksums: [8] }]);
    expect(idx.complete('a', [7])).toBe(ErrorCode.OK);
    expect(idx.complete('a', [7])).toBe(ErrorCode.OK); // twice: no change
    expect(idx.complete('a', [9])).toBe(ErrorCode.INVALID_PARAMS); // a stale writer after the current one: refused, doomed as its value
    expect(idx.takeDoomed()).toEqual([{ name: 'a', checksums: [9] }]);
    expect(idx.get('a')?.checksums).toEqual([7]);
    idx.expect('b', 50, [], 0);
    expect(idx.complete('b', [9])).toBe(ErrorCode.NO_AVAILABLE_HANDLE); // 110 > 100
    expect(idx.get('a')).toEqual({ size: 60, checksums: [7], name: 'a' });
    expect(idx.get('b')).toBeUndefined();
    expect(idx.stats()).toEqual({ fileBudgetBytes: 100, fileUsedBytes: 60, fileObjects: 1, filesWritten: 1, filesRefused: 4, filesBad: 0 });
    expect(idx.takeDoomed()).toEqual([{ name: 'b', checksums: [9] }]);
  });

  it('removes entries and expected files, dooming the file; stops waiting for a writer that never reports', () => {
    const idx = new FileIndex(ROOT, 100);
    idx.expect('x/y', 10, [], 0);
    expect(idx.has('x/y')).toBe(true);
    expect(idx.remove('x/y')).toBe(false); // it had no file yet, but one may be on its way
    expect(idx.takeDoomed()).toEqual([{ name: keyFileName('x/y'), checksums: [] }]);
    expect(idx.complete('x/y', [])).toBe(ErrorCode.OBJECT_NOT_FOUND);
    idx.expect('late', 10, [], 0);
    expect(idx.expire(EXPECTED_FILE_TIMEOUT_MS - 1)).toBe(0);
    expect(idx.expire(EXPECTED_FILE_TIMEOUT_MS)).toBe(1);
    expect(idx.has('late')).toBe(false);
    const off = new FileIndex('', 100);
    off.expect('k', 1, [], 0);
    expect(off.has('k')).toBe(false);
    expect(off.complete('k', [])).toBe(ErrorCode.INVALID_PARAMS);
  });
});

describe('MasterCore with the file tier', () => {
  it('serves an object evicted from memory from its file: GetReplicaList, batch, ExistKey; Ping names the directory', () => {
    const { core, files } = coreWithFiles();
    putObject(core, 'k/1', [100, 28], 1);
    expect(core.putEnd({ key: 'k/1', replica_type: DISK, slice_checksums: [] }, 2).status_code).toBe(ErrorCode.OK);
    expect(files.get('k/1')).toEqual({ size: 128, checksums: [], name: keyFileName('k/1') });
    // Memory first while it is there.
    expect(core.getReplicaList({ key: 'k/1' }, 3).replica_list[0].replica_type).toBe(ReplicaType.MEMORY);
    // Gone from memory (a replica clear stands in for eviction: both delete the memory object only).
    expect(core.batchReplicaClear({ object_keys: ['k/1'], client_id: 'client-a', segment_name: '' }, 10_000).cleared_keys).toEqual(['k/1']);
    const got = core.getReplicaList({ key: 'k/1' }, 10_001);
    expect(got.status_code).toBe(ErrorCode.OK);
    expect(got.replica_list).toEqual([{ handles: [], status: 3, replica_type: ReplicaType.DISK, file: { path: keyFileName('k/1'), size: 128 } }]);
    const batch = core.batchGetReplicaList({ keys: ['k/1', 'absent'] }, 10_002);
    expect(batch.results[0].replica_list[0].file).toEqual({ path: keyFileName('k/1'), size: 128 });
    expect(batch.results[1].status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
    expect(core.existKey({ key: 'k/1' }, 10_003).exists).toBe(true);
    expect(core.batchExistKey({ keys: ['k/1', 'absent'] }, 10_003).results.map((r) => r.exists)).toEqual([true, false]);
    // It exists: a Put of the key is refused until it is removed.
    expect(core.putStart(putReq('k/1', 5), 10_004).status_code).toBe(ErrorCode.OBJECT_ALREADY_EXISTS);
    expect(core.ping({ client_id: 'client-a', fence_acks: [], can_copy: false }, 10_005).file_tier_root).toBe(ROOT);
    expect(core.stats(10_006)).toMatchObject({ fileUsedBytes: 128, fileBudgetBytes: 1 << 20, fileObjects: 1, filesWritten: 1 });
    // The management views (/get_all_keys, /query_key) list it too.
    expect([...core.allKeys()]).toEqual(['k/1']);
    expect(core.queryKey('k/1')).toEqual([{ handles: [], status: 3, replica_type: ReplicaType.DISK, file: { path: keyFileName('k/1'), size: 128 } }]);
  });

  it('the file reported after the memory copy was evicted still joins the object (the write ended before)', () => {
    const { core, files } = coreWithFiles();
    putObject(core, 'early-evicted', 64, 1);
    core.batchReplicaClear({ object_keys: ['early-evicted'], client_id: 'client-a', segment_name: '' }, 10_000);
    expect(core.putStart(putReq('early-evicted', 5), 10_001).status_code).toBe(ErrorCode.OBJECT_ALREADY_EXISTS); // its file is on its way
    expect(core.putEnd({ key: 'early-evicted', replica_type: DISK, slice_checksums: [] }, 10_002).status_code).toBe(ErrorCode.OK);
    expect(files.get('early-evicted')?.size).toBe(64);
  });

  it("Remove, RemoveByRegex and RemoveAll delete files too; a removed object's late file is refused", () => {
    const { core, files } = coreWithFiles();
    for (const k of ['r/a', 'r/b', 'keep', 'mem-only']) putObject(core, k, 10, 1);
    for (const k of ['r/a', 'r/b', 'keep']) core.putEnd({ key: k, replica_type: DISK, slice_checksums: [] }, 2);
    core.batchReplicaClear({ object_keys: ['r/a', 'keep'], client_id: 'client-a', segment_name: '' }, 10_000); // r/a, keep: file only
    files.takeDoomed();
    expect(core.removeByRegex({ key_regex: '^r/' }, 10_001)).toEqual({ status_code: ErrorCode.OK, removed_count: 2 });
    expect(
      files
        .takeDoomed()
        .map((d) => d.name)
        .sort(),
    ).toEqual([keyFileName('r/a'), keyFileName('r/b')].sort());
    expect(core.existKey({ key: 'r/a' }, 10_002).exists).toBe(false);
    expect(core.remove({ key: 'keep', force: false }, 10_003).status_code).toBe(ErrorCode.OK);
    expect(core.remove({ key: 'keep', force: false }, 10_003).status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
    expect(files.takeDoomed().map((d) => d.name)).toEqual([keyFileName('keep')]);
    // mem-only's file was still being written when it was removed: its report is refused, the file doomed.
    expect(core.remove({ key: 'mem-only', force: false }, 10_004).status_code).toBe(ErrorCode.OK);
    expect(core.putEnd({ key: 'mem-only', replica_type: DISK, slice_checksums: [] }, 10_005).status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
    expect(files.takeDoomed().map((d) => d.name)).toContain(keyFileName('mem-only'));
    putObject(core, 'all-1', 10, 10_006);
    core.putEnd({ key: 'all-1', replica_type: DISK, slice_checksums: [] }, 10_006);
    core.batchReplicaClear({ object_keys: ['all-1'], client_id: 'client-a', segment_name: '' }, 20_000);
    expect(core.removeAll({}, 20_001)).toEqual({ status_code: ErrorCode.OK, removed_count: 1 });
    expect(core.stats(20_002)).toMatchObject({ fileUsedBytes: 0, fileObjects: 0 });
  });

  it('files are reported in batches: BatchPutEnd with replica_type DISK, per-key results', () => {
    const { core, files } = coreWithFiles();
    putObject(core, 'b1', 10, 1);
    putObject(core, 'b2', 20, 1);
    const res = core.batchPutEnd({ keys: ['b1', 'never', 'b2'], replica_type: DISK, checksums: [], failed_segments: [] }, 2);
    expect(res.results.map((r) => r.status_code)).toEqual([ErrorCode.OK, ErrorCode.OBJECT_NOT_FOUND, ErrorCode.OK]);
    expect([files.get('b1')?.size, files.get('b2')?.size]).toEqual([10, 20]);
  });

  it('a master that did not see the memory write end takes the file of a complete object it holds', () => {
    const { core, files } = coreWithFiles();
    putObject(core, 'restored', 10, 1);
    const state = core.exportState(2);
    const fresh = new FileIndex(ROOT, 1 << 20);
    const next = new MasterCore({ ...defaultMasterCoreConfig }, new SeededRng(2), undefined, undefined, fresh);
    next.importState(state, 3);
    expect(next.putEnd({ key: 'restored', replica_type: DISK, slice_checksums: [] }, 4).status_code).toBe(ErrorCode.OK);
    expect(fresh.get('restored')?.size).toBe(10);
    expect(files.get('restored')).toBeUndefined();
  });

  it("a stale writer's file (the key removed and put again meanwhile) is refused; the current value's is taken", () => {
    const { core, files } = coreWithFiles();
    const put = (sum: number, now: number) => {
      expect(core.putStart(putReq('re', 10), now).status_code).toBe(ErrorCode.OK);
      expect(core.putEnd({ key: 're', replica_type: MEMORY, slice_checksums: [sum] }, now).status_code).toBe(ErrorCode.OK);
    };
    put(111, 1);
    expect(core.remove({ key: 're', force: false }, 10_000).status_code).toBe(ErrorCode.OK);
    put(222, 10_001);
    files.takeDoomed();
    expect(core.putEnd({ key: 're', replica_type: DISK, slice_checksums: [111] }, 10_002).status_code).toBe(ErrorCode.INVALID_PARAMS);
    expect(files.takeDoomed()).toEqual([{ name: 're', checksums: [111] }]); // deleted only while the name holds that value
    expect(core.putEnd({ key: 're', replica_type: DISK, slice_checksums: [222] }, 10_003).status_code).toBe(ErrorCode.OK);
    expect(files.get('re')?.checksums).toEqual([222]);
  });

  it("an upsert's file replaces the old value's: the old one leaves the index when the upsert starts (doomed as the old value), the new one joins once reported", () => {
    const { core, files } = coreWithFiles();
    expect(core.putStart(putReq('u', 10), 1).status_code).toBe(ErrorCode.OK);
    expect(core.putEnd({ key: 'u', replica_type: MEMORY, slice_checksums: [111] }, 1).status_code).toBe(ErrorCode.OK);
    expect(core.putEnd({ key: 'u', replica_type: DISK, slice_checksums: [111] }, 2).status_code).toBe(ErrorCode.OK);
    files.takeDoomed();
    expect(core.upsertStart(putReq('u', 10), 10_000).status_code).toBe(ErrorCode.OK);
    expect(files.get('u')).toBeUndefined(); // the old value is never served again
    // deleted now, before the upsert's own file can exist, and only while the name holds the old value
    expect(files.takeDoomed()).toEqual([{ name: 'u', checksums: [111] }]);
    expect(core.upsertEnd({ key: 'u', replica_type: MEMORY, slice_checksums: [222] }, 10_001).status_code).toBe(ErrorCode.OK);
    // Out of memory before the new file is reported (its writer died, or is slow): not found, never the old value.
    core.batchReplicaClear({ object_keys: ['u'], client_id: 'client-a', segment_name: '' }, 20_000);
    expect(core.getReplicaList({ key: 'u' }, 20_001).status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
    // A stale writer's file (the old value) is refused; the upsert's joins.
    expect(core.putEnd({ key: 'u', replica_type: DISK, slice_checksums: [111] }, 20_002).status_code).toBe(ErrorCode.INVALID_PARAMS);
    expect(core.putEnd({ key: 'u', replica_type: DISK, slice_checksums: [222] }, 20_003).status_code).toBe(ErrorCode.OK);
    const got = core.getReplicaList({ key: 'u' }, 20_004);
    expect([got.replica_list[0].file?.path, got.slice_checksums]).toEqual(['u', [222]]);
    // An upsert of an object held only by its file: the same.
    files.takeDoomed();
    expect(core.upsertStart(putReq('u', 12), 30_000).status_code).toBe(ErrorCode.OK);
    expect(files.get('u')).toBeUndefined();
    expect(files.takeDoomed()).toEqual([{ name: 'u', checksums: [222] }]);
    expect(core.upsertEnd({ key: 'u', replica_type: MEMORY, slice_checksums: [333] }, 30_001).status_code).toBe(ErrorCode.OK);
    expect(core.putEnd({ key: 'u', replica_type: DISK, slice_checksums: [333] }, 30_002).status_code).toBe(ErrorCode.OK);
    expect(files.get('u')).toEqual({ size: 12, checksums: [333], name: 'u' });
    // An upsert that fails to start (the object is leased) leaves the file alone.
    core.getReplicaList({ key: 'u' }, 40_000);
    expect(core.upsertStart(putReq('u', 12), 40_001).status_code).toBe(ErrorCode.OBJECT_HAS_LEASE);
    expect(files.get('u')?.checksums).toEqual([333]);
  });

  it("an object leaving memory keeps its file only if the file holds its value (a rescan may have indexed an older value's)", () => {
    const { core } = coreWithFiles();
    expect(core.putStart(putReq('v', 10), 1).status_code).toBe(ErrorCode.OK);
    expect(core.putEnd({ key: 'v', replica_type: MEMORY, slice_checksums: [222] }, 1).status_code).toBe(ErrorCode.OK);
    // A new master (HA leader, restart with a snapshot) whose rescan found the file of an earlier value.
    const fresh = new FileIndex(ROOT, 1 << 20);
    const next = new MasterCore({ ...defaultMasterCoreConfig }, new SeededRng(2), undefined, undefined, fresh);
    next.importState(core.exportState(2), 3);
    fresh.load('v', { size: 10, checksums: [111], name: 'v' });
    fresh.load('w', { size: 10, checksums: [5], name: 'w' });
    next.batchReplicaClear({ object_keys: ['v'], client_id: 'client-a', segment_name: '' }, 20_000);
    expect(next.getReplicaList({ key: 'v' }, 20_001).status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
    expect(fresh.takeDoomed()).toEqual([{ name: 'v', checksums: [111] }]);
    expect(next.getReplicaList({ key: 'w' }, 20_001).status_code).toBe(ErrorCode.OK); // held only by its file: served
  });

  it('GetReplicaListByRegex lists every replica: memory, SSD (DISK with SSD handles) and the file (DISK with `file`), and objects held only by files', () => {
    const files = new FileIndex(ROOT, 1 << 20);
    const core = new MasterCore({ ...defaultMasterCoreConfig, enableOffload: true }, new SeededRng(1), undefined, undefined, files);
    core.mountSegment(mountReq('seg', 1 << 20, 'store', 0x1000_0000, '10.0.0.1:1', 5), 0);
    core.mountSegment({ ...mountReq('ssd', 1 << 20, 'store', 0x4000_0000, '10.0.0.1:1', 5), protocol: 'ssd' }, 0);
    for (const k of ['l/all', 'l/file-only', 'l/mem', 'other']) putObject(core, k, 10, 1);
    for (const k of ['l/all', 'l/file-only', 'other']) core.putEnd({ key: k, replica_type: DISK, slice_checksums: [] }, 2);
    for (const c of core.ping({ client_id: 'store', fence_acks: [], can_copy: true }, 3).copies) {
      if (c.key === 'l/all') core.replicaCopied({ client_id: 'store', copy_id: c.copy_id, ok: true, failed_segments: [] }, 3);
    }
    core.batchReplicaClear({ object_keys: ['l/file-only'], client_id: 'store', segment_name: '' }, 10_000);
    const map = core.getReplicaListByRegex({ key_regex: '^l/' }, 10_001).object_map;
    const shown = (key: string) =>
      map[key].replica_list.map((r) => [r.replica_type, r.file ? `file ${r.file.path} ${r.file.size}` : r.handles.map((h) => `${h.segment_name} ${h.memory_type}`).join()]);
    expect(Object.keys(map).sort()).toEqual(['l/all', 'l/file-only', 'l/mem']);
    expect(shown('l/all')).toEqual([
      [ReplicaType.MEMORY, `seg ${MemoryType.DRAM}`],
      [ReplicaType.DISK, `ssd ${MemoryType.SSD}`],
      [ReplicaType.DISK, `file ${keyFileName('l/all')} 10`],
    ]);
    expect(shown('l/file-only')).toEqual([[ReplicaType.DISK, `file ${keyFileName('l/file-only')} 10`]]);
    expect(shown('l/mem')).toEqual([[ReplicaType.MEMORY, `seg ${MemoryType.DRAM}`]]);
    expect(map['l/file-only'].replica_list[0]).toEqual({ handles: [], status: 3, replica_type: ReplicaType.DISK, file: { path: keyFileName('l/file-only'), size: 10 } });
  });

  it("while a new leader's rescan runs, a key it cannot tell about yet is answered UNAVAILABLE_IN_CURRENT_STATUS, never a false not found", () => {
    const { core, files } = coreWithFiles();
    putObject(core, 'in-memory', 10, 1);
    files.scanning = true; // the shell's rescan runs
    files.load('scanned', { size: 10, checksums: [], name: 'scanned' });
    const U = ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS;
    expect(core.getReplicaList({ key: 'not-scanned-yet' }, 2).status_code).toBe(U);
    expect(core.existKey({ key: 'not-scanned-yet' }, 2).status_code).toBe(U);
    expect(core.remove({ key: 'not-scanned-yet', force: false }, 2).status_code).toBe(U); // else its file would come back
    expect(core.getReplicaList({ key: 'scanned' }, 2).replica_list[0].file?.path).toBe('scanned');
    expect(core.getReplicaList({ key: 'in-memory' }, 2).status_code).toBe(ErrorCode.OK);
    expect(core.getReplicaList({ key: '' }, 2).status_code).toBe(ErrorCode.INVALID_KEY);
    expect(core.batchGetReplicaList({ keys: ['in-memory', 'scanned'] }, 2).results.map((r) => r.status_code)).toEqual([ErrorCode.OK, ErrorCode.OK]);
    expect(core.batchGetReplicaList({ keys: ['in-memory', 'not-scanned-yet'] }, 2)).toEqual({ status_code: U, results: [] });
    expect(core.batchExistKey({ keys: ['scanned', 'not-scanned-yet'] }, 2)).toEqual({ status_code: U, results: [] });
    files.scanning = false; // the scan ended: what it did not find does not exist
    expect(core.getReplicaList({ key: 'not-scanned-yet' }, 3).status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
    expect(core.batchExistKey({ keys: ['scanned', 'not-scanned-yet'] }, 3).results.map((r) => r.exists)).toEqual([true, false]);
  });

  it('without the tier, PutEnd with replica_type DISK stays refused and nothing changes', () => {
    const core = new MasterCore({ ...defaultMasterCoreConfig }, new SeededRng(1));
    core.mountSegment(mountReq('seg', 1 << 20), 0);
    putObject(core, 'k', 10, 1);
    expect(core.putEnd({ key: 'k', replica_type: DISK, slice_checksums: [] }, 2).status_code).toBe(ErrorCode.INVALID_PARAMS);
    expect(core.ping({ client_id: 'client-a', fence_acks: [], can_copy: false }, 3).file_tier_root).toBe('');
  });
});
