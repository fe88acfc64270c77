// The SSD tier in MasterCore (disk-tier.ts): offload copies to SSD segments that join only when
// reported, memory eviction that keeps the DISK replica, promotion past the admission threshold,
// the disk quota, offload at eviction time.
import { ErrorCode } from '../../common/error-code.js';
import { MemoryType } from '../../proto/gen/store/MemoryType.js';
import type { ReplicaCopy__Output } from '../../proto/gen/store/ReplicaCopy.js';
import { ReplicaType } from '../../proto/gen/store/ReplicaType.js';
import type { MasterCore, MasterCoreConfig } from './master-core.js';
import { PUT_EVICTION_CAP, scanLimitFor } from './eviction.js';
import { DIRECTED_BYTES_PER_PING, DIRECTED_PER_PING, OFFLOAD_ATTEMPTS } from './disk-tier.js';
import { makeCore, MEMORY, mountReq, putReq } from './master-core-fixture.js';

const KB = 1024;

/** Memory segment `mem` (64 KiB) and SSD segment `ssd` (1 MiB), both of client `store`. */
function setup(over: Partial<MasterCoreConfig> = {}, diskSize = 1 << 20): MasterCore {
  const core = makeCore({ enableOffload: true, defaultKvLeaseTtlMs: 10, clientTtlMs: 1e9, ...over });
  expect(core.mountSegment(mountReq('mem', 64 * KB, 'store', 0x1000_0000, '10.0.0.1:1', 5), 0).status_code).toBe(ErrorCode.OK);
  expect(core.mountSegment({ ...mountReq('ssd', diskSize, 'store', 0x4000_0000, '10.0.0.1:1', 5), protocol: 'ssd' }, 0).status_code).toBe(ErrorCode.OK);
  return core;
}

function put(core: MasterCore, key: string, bytes: number, now: number, memory = ['mem']): number {
  const start = core.putStart(putReq(key, bytes), now);
  if (start.status_code !== ErrorCode.OK) return start.status_code;
  for (const r of start.replica_list) for (const h of r.handles) expect(memory).toContain(h.segment_name); // never on SSD
  return core.putEnd({ key, replica_type: MEMORY, slice_checksums: [7] }, now).status_code;
}

const copiesFor = (core: MasterCore, now: number): ReplicaCopy__Output[] => core.ping({ client_id: 'store', fence_acks: [], can_copy: true }, now).copies;
const report = (core: MasterCore, c: ReplicaCopy__Output, ok = true) => core.replicaCopied({ client_id: 'store', copy_id: c.copy_id, ok, failed_segments: [] }, 0).status_code;
const tiers = (core: MasterCore, key: string, now: number) =>
  core.getReplicaList({ key }, now).replica_list.map((r) => [r.replica_type, r.handles.map((h) => [h.segment_name, h.memory_type])]);

/** The segment of each replica's first handle. */
const placed = (core: MasterCore, key: string, now: number) => core.getReplicaList({ key }, now).replica_list.map((r) => r.handles[0].segment_name);

/** Fills `mem` (64 KiB) with 16 objects of 4 KiB, each offloaded, then 16 more: the first ones end up on SSD only. */
function overfill(core: MasterCore): void {
  let now = 1;
  for (let i = 0; i < 32; i++) {
    now += 100; // leases (10 ms) long over
    let code = put(core, `k${i}`, 4 * KB, now);
    for (let tries = 0; code === ErrorCode.NO_AVAILABLE_HANDLE && tries < 5; tries++) {
      for (const c of copiesFor(core, now)) report(core, c);
      core.sweep(now);
      code = put(core, `k${i}`, 4 * KB, now);
    }
    expect(code).toBe(ErrorCode.OK);
    for (const c of copiesFor(core, now)) report(core, c);
  }
}

describe('SSD tier in the core', () => {
  it('offloads a completed write to an SSD segment; the DISK replica joins only once reported', () => {
    const core = setup();
    expect(put(core, 'k', 4 * KB, 1)).toBe(ErrorCode.OK);
    expect(core.stats(1)).toMatchObject({ offloadsQueued: 1, diskUsedBytes: 0 });
    const [copy] = copiesFor(core, 2);
    expect(copy.key).toBe('k');
    expect(copy.source!.handles[0].segment_name).toBe('mem');
    expect(copy.target!.replica_type).toBe(ReplicaType.DISK);
    expect(copy.target!.handles[0]).toMatchObject({ segment_name: 'ssd', memory_type: MemoryType.SSD });
    expect(copy.slice_checksums).toEqual([7]);
    expect(tiers(core, 'k', 3)).toEqual([[ReplicaType.MEMORY, [['mem', MemoryType.DRAM]]]]); // not yet
    expect(report(core, copy)).toBe(ErrorCode.OK);
    expect(tiers(core, 'k', 4)).toEqual([
      [ReplicaType.MEMORY, [['mem', MemoryType.DRAM]]],
      [ReplicaType.DISK, [['ssd', MemoryType.SSD]]],
    ]);
    expect(core.stats(4)).toMatchObject({ offloadsDone: 1, diskUsedBytes: 4 * KB, usedBytes: 4 * KB, capacityBytes: 64 * KB, diskCapacityBytes: 1 << 20 });
    expect(core.checkIndexes()).toEqual([]);
  });

  it('no allocation strategy places a put on an SSD segment, even when it is named as preferred', () => {
    for (const strategy of ['random', 'free_ratio_first', 'cxl'] as const) {
      const core = makeCore({ allocationStrategy: strategy, enableCxl: true });
      core.mountSegment({ ...mountReq('ssd', 1 << 20, 'store', 0x4000_0000, '10.0.0.1:1', 5), protocol: 'ssd' }, 0);
      expect(core.putStart(putReq('k', 4 * KB, { preferred_segment: 'ssd' }), 1).status_code).toBe(ErrorCode.NO_AVAILABLE_HANDLE);
      expect(core.stats(1)).toMatchObject({ capacityBytes: 0, diskCapacityBytes: 1 << 20 });
    }
  });

  it('--offload_force_evict: an object picked again while its copy is on the way is evicted without one (counted)', () => {
    const core = setup({ offloadOnEvict: true, offloadForceEvict: true });
    put(core, 'k', 4 * KB, 1);
    expect(core.evict(100, 10).evicted).toBe(0); // first pick: queued for a copy
    expect(core.evict(200, 10).evicted).toBe(1); // picked again, no copy yet: gone
    expect(core.stats(200)).toMatchObject({ objects: 0, forcedEvictions: 1, usedBytes: 0 });
    expect(copiesFor(core, 201)).toEqual([]);
  });

  it('a failed or stale copy never joins: an object rewritten meanwhile keeps no old DISK replica', () => {
    const core = setup();
    put(core, 'a', 4 * KB, 1);
    put(core, 'b', 4 * KB, 1);
    const [ca, cb] = copiesFor(core, 2);
    expect(core.remove({ key: 'b', force: false }, 100).status_code).toBe(ErrorCode.OK);
    expect(put(core, 'b', 4 * KB, 101)).toBe(ErrorCode.OK);
    expect(report(core, cb)).toBe(ErrorCode.OK); // stale: b was removed and written again
    expect(report(core, ca, false)).toBe(ErrorCode.OK);
    expect(tiers(core, 'a', 102)).toEqual([[ReplicaType.MEMORY, [['mem', MemoryType.DRAM]]]]);
    expect(tiers(core, 'b', 102)).toEqual([[ReplicaType.MEMORY, [['mem', MemoryType.DRAM]]]]);
    expect(core.stats(102)).toMatchObject({ offloadsFailed: 2, offloadsDone: 0 });
  });

  it('memory eviction frees only the memory replica of an offloaded object: it stays readable from disk', () => {
    const core = setup();
    overfill(core);
    const s = core.stats(10_000);
    expect(s.objects).toBe(32);
    expect(s.usedBytes).toBeLessThanOrEqual(64 * KB);
    expect(s.diskUsedBytes).toBe(32 * 4 * KB);
    expect(s.forcedEvictions).toBe(0);
    expect(tiers(core, 'k0', 10_000)).toEqual([[ReplicaType.DISK, [['ssd', MemoryType.SSD]]]]);
    expect(core.checkIndexes()).toEqual([]);
  });

  it('promotes an SSD-only object after --promotion_admission_threshold reads', () => {
    const core = setup({ promotionOnHit: true, promotionAdmissionThreshold: 3 });
    overfill(core); // memory full: the promotion's placement makes room as a PutStart does
    expect(tiers(core, 'k0', 20_001)).toEqual([[ReplicaType.DISK, [['ssd', MemoryType.SSD]]]]);
    expect(copiesFor(core, 20_002)).toEqual([]); // one read: below the threshold
    tiers(core, 'k0', 20_003);
    tiers(core, 'k0', 20_004);
    const [copy] = copiesFor(core, 20_005);
    expect(copy.key).toBe('k0');
    expect(copy.source!.handles[0].segment_name).toBe('ssd');
    expect(copy.target!.handles[0].segment_name).toBe('mem');
    report(core, copy);
    expect(tiers(core, 'k0', 20_006).map((r) => r[0])).toEqual([ReplicaType.DISK, ReplicaType.MEMORY]);
    expect(core.stats(20_006)).toMatchObject({ promotionsDone: 1 });
    expect(core.checkIndexes()).toEqual([]);
  });

  it('--offload_on_evict copies nothing at PutEnd; the eviction pick is copied, then its memory freed', () => {
    const core = setup({ offloadOnEvict: true });
    put(core, 'k', 4 * KB, 1);
    expect(copiesFor(core, 2)).toEqual([]);
    expect(core.evict(100, 10).evicted).toBe(0); // picked: queued, memory kept until the copy is in
    expect(core.stats(100)).toMatchObject({ objects: 1, usedBytes: 4 * KB, offloadsQueued: 1 });
    const [copy] = copiesFor(core, 101);
    report(core, copy);
    core.sweep(200);
    expect(core.stats(200)).toMatchObject({ objects: 1, usedBytes: 0, diskUsedBytes: 4 * KB });
    expect(tiers(core, 'k', 201)).toEqual([[ReplicaType.DISK, [['ssd', MemoryType.SSD]]]]);
  });

  it('evicts SSD-only objects least recently used first past --quota_bytes', () => {
    const core = setup({ quotaBytes: 80 * KB });
    overfill(core);
    core.sweep(50_000);
    const s = core.stats(50_000);
    expect(s.diskUsedBytes).toBeLessThanOrEqual(80 * KB);
    expect(s.diskEvictions).toBeGreaterThan(0);
    expect(core.getReplicaList({ key: 'k0' }, 50_001).status_code).toBe(ErrorCode.OBJECT_NOT_FOUND); // the oldest went
    expect(core.getReplicaList({ key: 'k31' }, 50_001).status_code).toBe(ErrorCode.OK);
    expect(core.checkIndexes()).toEqual([]);
  });

  it('eviction passes over an object awaiting its offload copy once: later PutStarts reach the objects behind it', () => {
    // More objects awaiting copies than one PutStart's eviction may pass over, and
    // behind them (most recently read) one whose copy is in: the first PutStart gives up, the
    // second finds it. Walking the waiting objects again on every PutStart, none ever would.
    const n = scanLimitFor(PUT_EVICTION_CAP) + 64;
    const core = setup({}, (n + 64) * 4 * KB);
    core.mountSegment(mountReq('mem2', n * 4 * KB, 'store', 0x2000_0000, '10.0.0.1:1', 5), 0);
    const mem = ['mem', 'mem2'];
    let now = 1;
    expect(put(core, 'z', 4 * KB, now, mem)).toBe(ErrorCode.OK);
    const [copy] = copiesFor(core, now);
    expect(report(core, copy)).toBe(ErrorCode.OK);
    for (let i = 0; i < n; i++) expect(put(core, `a${i}`, 4 * KB, ++now, mem)).toBe(ErrorCode.OK); // room for all: no eviction yet
    expect(tiers(core, 'z', ++now).map((r) => r[0])).toEqual([ReplicaType.MEMORY, ReplicaType.DISK]); // read: behind every a
    now += 100; // its lease (10 ms) over
    let filled = 0;
    while (put(core, `b${filled}`, 4 * KB, now, mem) === ErrorCode.OK) filled++; // the put that fails passes over most a's
    expect(filled).toBeGreaterThan(0);
    expect(core.putStart(putReq('new', 4 * KB), now + 1).status_code).toBe(ErrorCode.OK);
    expect(tiers(core, 'z', now + 2)).toEqual([[ReplicaType.DISK, [['ssd', MemoryType.SSD]]]]);
    expect(core.checkIndexes()).toEqual([]);
  });

  it('objects awaiting offload copies go first once the copies are in, and are evicted without one when no SSD segment is left', () => {
    const core = setup();
    let now = 1;
    for (let i = 0; i < 16; i++) expect(put(core, `k${i}`, 4 * KB, now++)).toBe(ErrorCode.OK); // memory full
    now += 100;
    expect(core.putStart(putReq('x', 4 * KB), now).status_code).toBe(ErrorCode.NO_AVAILABLE_HANDLE); // all await their copies
    expect(core.checkIndexes()).toEqual([]);
    const [first] = copiesFor(core, now);
    expect(first.key).toBe('k0');
    expect(report(core, first)).toBe(ErrorCode.OK);
    expect(core.putStart(putReq('x', 4 * KB), now + 1).status_code).toBe(ErrorCode.OK); // k0's memory went
    expect(tiers(core, 'k0', now + 2)).toEqual([[ReplicaType.DISK, [['ssd', MemoryType.SSD]]]]);
    // the SSD segment goes: the copies will never come, and eviction deletes what waited for them
    expect(core.unmountSegment({ segment_name: 'ssd', client_id: 'store', grace_period_seconds: 0 }, now + 3).status_code).toBe(ErrorCode.OK);
    core.sweep(now + 4);
    expect(core.putStart(putReq('y', 4 * KB), now + 5).status_code).toBe(ErrorCode.OK);
    expect(core.stats(now + 5).forcedEvictions).toBeGreaterThan(0);
    expect(core.checkIndexes()).toEqual([]);
  });

  it('an eviction round aims at --eviction_ratio of the objects in memory, SSD-only objects not counted', () => {
    const core = setup();
    let now = 1;
    // 16 objects fill `mem`; 200 in all, each offloaded: 184 held only on SSD
    for (let i = 0; i < 200; i++) {
      now += 100;
      let code = put(core, `k${i}`, 4 * KB, now);
      for (let tries = 0; code === ErrorCode.NO_AVAILABLE_HANDLE && tries < 5; tries++) {
        for (const c of copiesFor(core, now)) report(core, c);
        code = put(core, `k${i}`, 4 * KB, now);
      }
      expect(code).toBe(ErrorCode.OK);
      for (const c of copiesFor(core, now)) report(core, c);
    }
    expect(core.stats(now)).toMatchObject({ objects: 200, usedBytes: 64 * KB, diskUsedBytes: 200 * 4 * KB });
    const before = core.stats(now).evictionsTotal;
    core.sweep(now + 100); // memory at the high watermark: a round of ceil(0.05 x 16) = 1, not ceil(0.05 x 200) = 10
    expect(core.stats(now + 100).evictionsTotal - before).toBe(1);
    expect(core.stats(now + 100).usedBytes).toBe(60 * KB);
    expect(core.checkIndexes()).toEqual([]);
  });

  it('without disk eviction, offload stops placing when the quota is reached (counted) and memory eviction deletes', () => {
    const core = setup({ quotaBytes: 8 * KB, enableDiskEviction: false });
    overfill(core);
    const s = core.stats(50_000);
    expect(s.diskUsedBytes).toBeLessThanOrEqual(8 * KB);
    expect(s.offloadsSkippedFull).toBeGreaterThan(0);
    expect(s.forcedEvictions).toBeGreaterThan(0);
    expect(core.checkIndexes()).toEqual([]);
  });
});

describe('DISK replicas lost with their SSD segment', () => {
  /** setup() plus SSD segment `ssd2` of client `other` (a second store service with an SSD). */
  function twoDisks(over: Partial<MasterCoreConfig> = {}): MasterCore {
    const core = setup(over);
    expect(core.mountSegment({ ...mountReq('ssd2', 1 << 20, 'other', 0x6000_0000, '10.0.0.4:1', 5), protocol: 'ssd' }, 0).status_code).toBe(ErrorCode.OK);
    return core;
  }
  const unmount = (core: MasterCore, name: string, client: string, now: number) =>
    expect(core.unmountSegment({ segment_name: name, client_id: client, grace_period_seconds: 0 }, now).status_code).toBe(ErrorCode.OK);

  it('an object that keeps its memory replica is offloaded again, through the same queue and copies', () => {
    const core = twoDisks();
    put(core, 'k', 4 * KB, 1);
    const [first] = copiesFor(core, 2);
    expect(first.target!.handles[0].segment_name).toBe('ssd'); // the owner's SSD first
    report(core, first);
    unmount(core, 'ssd', 'store', 3); // its store service unmounts it (or dies: the same drain)
    expect(tiers(core, 'k', 4)).toEqual([[ReplicaType.MEMORY, [['mem', MemoryType.DRAM]]]]);
    expect(core.stats(4)).toMatchObject({ offloadsQueued: 1, offloadsRequeued: 1 });
    const [again] = copiesFor(core, 5);
    expect(again.key).toBe('k');
    expect(again.source!.handles[0].segment_name).toBe('mem');
    expect(again.target!.handles[0].segment_name).toBe('ssd2');
    report(core, again);
    expect(tiers(core, 'k', 6)).toEqual([
      [ReplicaType.MEMORY, [['mem', MemoryType.DRAM]]],
      [ReplicaType.DISK, [['ssd2', MemoryType.SSD]]],
    ]);
    expect(core.stats(6)).toMatchObject({ offloadsQueued: 0, offloadsDone: 2 });
    expect(core.checkIndexes()).toEqual([]);
  });

  it('a copy that fails (its target SSD died meanwhile, or the copier failed) is tried again elsewhere, OFFLOAD_ATTEMPTS times at most', () => {
    const core = twoDisks();
    put(core, 'k', 4 * KB, 1);
    const [first] = copiesFor(core, 2);
    expect(first.target!.handles[0].segment_name).toBe('ssd');
    // the copier could not reach the target: it is suspect for a while, so the next try goes elsewhere
    expect(core.replicaCopied({ client_id: 'store', copy_id: first.copy_id, ok: false, failed_segments: ['ssd'] }, 3).status_code).toBe(ErrorCode.OK);
    expect(core.stats(3)).toMatchObject({ offloadsFailed: 1, offloadsQueued: 1 });
    const [second] = copiesFor(core, 4);
    expect(second.target!.handles[0].segment_name).toBe('ssd2');
    report(core, second);
    expect(tiers(core, 'k', 5).map(([t]) => t)).toEqual([ReplicaType.MEMORY, ReplicaType.DISK]);
    // an object whose copies keep failing is left without a DISK replica after OFFLOAD_ATTEMPTS
    put(core, 'bad', 4 * KB, 10);
    let attempts = 0;
    for (let now = 11; now < 100; now++) {
      const copies = copiesFor(core, now);
      if (copies.length === 0) break;
      for (const c of copies) report(core, c, false);
      attempts += copies.length;
    }
    expect(attempts).toBe(OFFLOAD_ATTEMPTS);
    expect(core.stats(100)).toMatchObject({ offloadsQueued: 0, offloadsInFlight: 0 });
  });

  it('an SSD-only object that lost its only replica is gone; nothing is queued for it', () => {
    const core = twoDisks();
    overfill(core); // k0 .. k15 on SSD only (on `ssd`, the owner's), the rest in memory and on SSD
    expect(tiers(core, 'k0', 10_000)).toEqual([[ReplicaType.DISK, [['ssd', MemoryType.SSD]]]]);
    const inMemory = core.stats(10_000).objects - 16;
    unmount(core, 'ssd', 'store', 10_001);
    expect(core.getReplicaList({ key: 'k0' }, 10_002).status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
    expect(core.stats(10_002)).toMatchObject({ objects: inMemory, offloadsRequeued: inMemory, offloadsQueued: inMemory });
    for (const c of copiesFor(core, 10_003)) {
      expect(c.target!.handles[0].segment_name).toBe('ssd2');
      report(core, c);
    }
    expect(core.stats(10_004)).toMatchObject({ offloadsQueued: 0, diskUsedBytes: inMemory * 4 * KB });
    expect(core.checkIndexes()).toEqual([]);
  });

  it('with --offload_on_evict (or offload off) a lost DISK replica is left to eviction: nothing is queued', () => {
    for (const over of [{ offloadOnEvict: true }, { enableOffload: false }]) {
      const core = twoDisks(over);
      put(core, 'k', 4 * KB, 1);
      expect(core.createCopyTask({ key: 'k', targets: ['ssd'] }, 1).status_code).toBe(ErrorCode.OK); // a DISK replica by a task
      copiesFor(core, 2).forEach((c) => report(core, c));
      core.sweep(3);
      expect(tiers(core, 'k', 4).map(([t]) => t)).toEqual([ReplicaType.MEMORY, ReplicaType.DISK]);
      unmount(core, 'ssd', 'store', 5);
      expect(core.stats(5)).toMatchObject({ offloadsQueued: 0, offloadsRequeued: 0 });
    }
  });

  it('a store service that dies with a memory and a DISK replica: re-replication restores the memory replicas it had, offload the DISK one', () => {
    const core = makeCore({ enableOffload: true, defaultKvLeaseTtlMs: 10, clientTtlMs: 1000 });
    for (const [name, client, base] of [
      ['mem-a', 'a', 0x1000_0000],
      ['mem-b', 'b', 0x2000_0000],
      ['mem-c', 'c', 0x3000_0000],
    ] as const)
      core.mountSegment(mountReq(name, 64 * KB, client, base, `10.0.0.${base >>> 28}:1`, 5), 0);
    core.mountSegment({ ...mountReq('ssd-a', 1 << 20, 'a', 0x4000_0000, '10.0.0.1:1', 5), protocol: 'ssd' }, 0);
    core.mountSegment({ ...mountReq('ssd-b', 1 << 20, 'b', 0x5000_0000, '10.0.0.2:1', 5), protocol: 'ssd' }, 0);
    expect(core.putStart(putReq('k', 4 * KB, { replica_num: 2, preferred_segment: 'mem-a' }), 1).status_code).toBe(ErrorCode.OK);
    expect(core.putEnd({ key: 'k', replica_type: MEMORY, slice_checksums: [7] }, 1).status_code).toBe(ErrorCode.OK);
    const copier = (client: string, now: number) => core.ping({ client_id: client, fence_acks: [], can_copy: true }, now).copies;
    const [offload] = copier('a', 2);
    expect(offload.target!.handles[0].segment_name).toBe('ssd-a');
    core.replicaCopied({ client_id: 'a', copy_id: offload.copy_id, ok: true, failed_segments: [] }, 2);
    expect(placed(core, 'k', 3)).toEqual(['mem-a', 'mem-b', 'ssd-a']);
    // a goes silent: its memory and SSD segments go
    for (const client of ['b', 'c']) core.ping({ client_id: client, fence_acks: [], can_copy: false }, 1050);
    expect(core.sweep(1100).droppedClients).toEqual(['a']);
    expect(core.stats(1100)).toMatchObject({ underReplicated: 1, offloadsQueued: 1 });
    const made: string[] = [];
    for (let now = 1102, round = 0; round < 4; round++, now++) {
      for (const c of copier('b', now)) {
        made.push(c.target!.handles[0].segment_name);
        core.replicaCopied({ client_id: 'b', copy_id: c.copy_id, ok: true, failed_segments: [] }, now);
      }
    }
    expect(made.sort()).toEqual(['mem-c', 'ssd-b']); // one memory replica (it had two), one DISK replica
    expect(placed(core, 'k', 2000)).toEqual(['mem-b', 'mem-c', 'ssd-b']);
    expect(core.stats(2000)).toMatchObject({ underReplicated: 0, offloadsQueued: 0 });
    expect(core.checkIndexes()).toEqual([]);
  });

  it('a DISK replica elsewhere does not stand in for a lost memory replica: re-replication counts memory replicas', () => {
    const core = makeCore({ enableOffload: true, defaultKvLeaseTtlMs: 10, clientTtlMs: 1000 });
    core.mountSegment(mountReq('mem-a', 64 * KB, 'a', 0x1000_0000, '10.0.0.1:1', 5), 0);
    core.mountSegment(mountReq('mem-b', 64 * KB, 'b', 0x2000_0000, '10.0.0.2:1', 5), 0);
    core.mountSegment({ ...mountReq('ssd-b', 1 << 20, 'b', 0x5000_0000, '10.0.0.2:1', 5), protocol: 'ssd' }, 0);
    core.putStart(putReq('k', 4 * KB, { replica_num: 2, preferred_segment: 'mem-b' }), 1);
    core.putEnd({ key: 'k', replica_type: MEMORY, slice_checksums: [7] }, 1);
    core.mountSegment(mountReq('mem-c', 64 * KB, 'c', 0x3000_0000, '10.0.0.3:1', 5), 1); // after: k is on a and b
    const [offload] = core.ping({ client_id: 'b', fence_acks: [], can_copy: true }, 2).copies;
    core.replicaCopied({ client_id: 'b', copy_id: offload.copy_id, ok: true, failed_segments: [] }, 2);
    for (const client of ['b', 'c']) core.ping({ client_id: client, fence_acks: [], can_copy: false }, 1050);
    expect(core.sweep(1100).droppedClients).toEqual(['a']);
    const [restore, ...more] = core.ping({ client_id: 'b', fence_acks: [], can_copy: true }, 1101).copies;
    expect(more).toEqual([]);
    expect(restore.target!.handles[0].segment_name).toBe('mem-c');
    core.replicaCopied({ client_id: 'b', copy_id: restore.copy_id, ok: true, failed_segments: [] }, 1101);
    expect(placed(core, 'k', 1102)).toEqual(['mem-b', 'ssd-b', 'mem-c']);
    expect(core.stats(1102)).toMatchObject({ underReplicated: 0, copied: 1 });
  });
});

describe('copy notices (the push: copier-roster.ts)', () => {
  /** A core whose copy notices are recorded, with copier `store` known (it offered in a Ping). */
  function told(over: Partial<MasterCoreConfig> = {}, diskSize?: number): { core: MasterCore; notices: string[] } {
    const core = setup(over, diskSize);
    const notices: string[] = [];
    core.setCopierNotify((clientId) => notices.push(clientId));
    expect(copiesFor(core, 0)).toEqual([]);
    return { core, notices };
  }

  it('a queued offload tells its copier at once, once until the copier takes work again; Ping replies say notices are sent', () => {
    const { core, notices } = told();
    expect(core.ping({ client_id: 'store', fence_acks: [], can_copy: true }, 0).copy_push).toBe(true);
    put(core, 'a', 4 * KB, 1);
    expect(notices).toEqual(['store']);
    put(core, 'b', 4 * KB, 1);
    put(core, 'c', 4 * KB, 1);
    expect(notices).toEqual(['store']); // told already: a burst sends one notice
    // a Ping of a busy copier (no can_copy) takes nothing: no new notice for what it did not take
    core.ping({ client_id: 'store', fence_acks: [], can_copy: false }, 2);
    put(core, 'd', 4 * KB, 2);
    expect(notices).toEqual(['store']);
    expect(copiesFor(core, 3).map((c) => c.key)).toEqual(['a', 'b', 'c', 'd']);
    put(core, 'e', 4 * KB, 4);
    expect(notices).toEqual(['store', 'store']); // it took work since: told again
  });

  it('a Ping reply says whether copies wait beyond the ones it hands out (the copier then asks again when done)', () => {
    const { core } = told({}, 4 << 20);
    core.mountSegment(mountReq('mem-big', 4 << 20, 'store', 0x2000_0000, '10.0.0.1:1', 5), 0);
    for (let i = 0; i < DIRECTED_PER_PING + 6; i++) expect(put(core, `k${i}`, 4 * KB, 1, ['mem', 'mem-big'])).toBe(ErrorCode.OK);
    const first = core.ping({ client_id: 'store', fence_acks: [], can_copy: true }, 2);
    expect(first.copies).toHaveLength(DIRECTED_PER_PING);
    expect(DIRECTED_PER_PING).toBe(128); // one Ping and one report per 128 offloads of KV pages (docs/tiers.md)
    expect(first.more_copies).toBe(true);
    const busy = core.ping({ client_id: 'store', fence_acks: [], can_copy: false }, 3); // still making them: takes nothing
    expect([busy.copies.length, busy.more_copies]).toEqual([0, true]);
    const second = core.ping({ client_id: 'store', fence_acks: [], can_copy: true }, 4);
    expect([second.copies.length, second.more_copies]).toEqual([6, false]); // told when new ones come
  });

  it('a Ping reply hands out copies of at most DIRECTED_BYTES_PER_PING (at least one), so a batch of large objects is written and reported soon', () => {
    const MB = 1 << 20;
    const { core } = told({}, 1 << 30);
    core.mountSegment(mountReq('mem-big', 256 * MB, 'store', 0x2000_0000, '10.0.0.1:1', 5), 0);
    for (let i = 0; i < 40; i++) expect(put(core, `big${i}`, MB, 1, ['mem', 'mem-big'])).toBe(ErrorCode.OK);
    const first = core.ping({ client_id: 'store', fence_acks: [], can_copy: true }, 2);
    expect([first.copies.length, first.more_copies]).toEqual([DIRECTED_BYTES_PER_PING / MB, true]);
    expect(DIRECTED_BYTES_PER_PING).toBe(32 * MB);
    const second = core.ping({ client_id: 'store', fence_acks: [], can_copy: true }, 3);
    expect([second.copies.length, second.more_copies]).toEqual([40 - DIRECTED_BYTES_PER_PING / MB, false]);
    // one object larger than the bound still goes, alone
    expect(put(core, 'huge', 40 * MB, 4, ['mem', 'mem-big'])).toBe(ErrorCode.OK);
    expect(put(core, 'after', MB, 4, ['mem', 'mem-big'])).toBe(ErrorCode.OK);
    expect(core.ping({ client_id: 'store', fence_acks: [], can_copy: true }, 5).copies.map((c) => c.key)).toEqual(['huge']);
  });

  it('without a shell that sends them, Ping replies say so (clients then poll)', () => {
    const core = setup();
    expect(core.ping({ client_id: 'store', fence_acks: [], can_copy: true }, 0).copy_push).toBe(false);
  });

  it('an object whose owner is no copier tells every copier', () => {
    const { core, notices } = told();
    // another copier (a store service with an SSD segment only)
    core.mountSegment({ ...mountReq('ssd-other', 1 << 20, 'other', 0x6000_0000, '10.0.0.4:1', 5), protocol: 'ssd' }, 0);
    core.ping({ client_id: 'other', fence_acks: [], can_copy: true }, 0);
    core.mountSegment(mountReq('mem2', 64 * KB, 'writer', 0x2000_0000, '10.0.0.2:1', 5), 0); // its owner never offers to copy
    const start = core.putStart(putReq('w', 4 * KB, { preferred_segment: 'mem2' }), 1);
    expect(start.replica_list[0].handles[0].segment_name).toBe('mem2');
    core.putEnd({ key: 'w', replica_type: MEMORY, slice_checksums: [7] }, 1);
    expect(notices.sort()).toEqual(['other', 'store']);
  });

  it('a promotion tells the owner of the SSD replica', () => {
    const { core, notices } = told({ promotionOnHit: true, promotionAdmissionThreshold: 1 });
    overfill(core);
    expect(copiesFor(core, 20_000)).toEqual([]); // nothing waits: it may be told again
    notices.length = 0;
    expect(tiers(core, 'k0', 20_001)).toEqual([[ReplicaType.DISK, [['ssd', MemoryType.SSD]]]]);
    expect(notices).toEqual(['store']);
  });

  it('re-replication and copy tasks tell every copier', () => {
    const { core, notices } = told();
    const t = core.createCopyTask({ key: 'nothing', targets: ['ssd'] }, 1);
    expect(t.status_code).toBe(ErrorCode.OBJECT_NOT_FOUND); // refused: nothing asked, nobody told
    expect(notices).toEqual([]);
    core.mountSegment(mountReq('mem2', 64 * KB, 'store', 0x2000_0000, '10.0.0.1:1', 5), 0);
    put(core, 'k', 4 * KB, 1);
    copiesFor(core, 2).forEach((c) => report(core, c));
    notices.length = 0;
    expect(core.createCopyTask({ key: 'k', targets: ['mem2'] }, 3).status_code).toBe(ErrorCode.OK);
    expect(notices).toEqual(['store']);
  });

  it('a client dropped as silent is told nothing more', () => {
    const { core, notices } = told({ clientTtlMs: 100 });
    core.sweep(1000); // store went silent: dropped, its segments with it
    expect(core.mountSegment(mountReq('mem3', 64 * KB, 'writer', 0x3000_0000, '10.0.0.3:1', 5), 1000).status_code).toBe(ErrorCode.OK);
    expect(core.mountSegment({ ...mountReq('ssd3', 1 << 20, 'writer', 0x5000_0000, '10.0.0.3:1', 5), protocol: 'ssd' }, 1000).status_code).toBe(ErrorCode.OK);
    expect(core.putStart(putReq('k', 4 * KB), 1001).status_code).toBe(ErrorCode.OK);
    expect(core.putEnd({ key: 'k', replica_type: MEMORY, slice_checksums: [7] }, 1001).status_code).toBe(ErrorCode.OK);
    expect(core.stats(1001).offloadsQueued).toBe(1);
    expect(notices).toEqual([]);
  });
});

describe('BatchReplicaCopied', () => {
  it('judges each outcome as ReplicaCopied would, in order: joined, failed (quarantined), unknown', () => {
    const core = setup();
    put(core, 'a', 4 * KB, 1);
    put(core, 'b', 4 * KB, 1);
    const [ca, cb] = copiesFor(core, 2);
    const res = core.batchReplicaCopied(
      {
        client_id: 'store',
        outcomes: [
          { copy_id: ca.copy_id, ok: true, failed_segments: [] },
          { copy_id: cb.copy_id, ok: false, failed_segments: [] },
          { copy_id: 987654, ok: true, failed_segments: [] },
        ],
      },
      3,
    );
    expect(res).toEqual({ status_code: ErrorCode.OK, results: [ErrorCode.OK, ErrorCode.OK, ErrorCode.OBJECT_NOT_FOUND] });
    expect(tiers(core, 'a', 4).map(([t]) => t)).toEqual([ReplicaType.MEMORY, ReplicaType.DISK]);
    expect(tiers(core, 'b', 4).map(([t]) => t)).toEqual([ReplicaType.MEMORY]);
    expect(core.stats(4)).toMatchObject({ offloadsDone: 1, offloadsFailed: 1, diskUsedBytes: 8 * KB }); // b's target quarantined until fenced
    // reported twice: known no more
    expect(core.batchReplicaCopied({ client_id: 'store', outcomes: [{ copy_id: ca.copy_id, ok: true, failed_segments: [] }] }, 5).results).toEqual([ErrorCode.OBJECT_NOT_FOUND]);
    expect(core.checkIndexes()).toEqual([]);
  });

  it("refuses a report without a client id, and another client's copies", () => {
    const core = setup();
    put(core, 'a', 4 * KB, 1);
    const [ca] = copiesFor(core, 2);
    expect(core.batchReplicaCopied({ client_id: '', outcomes: [{ copy_id: ca.copy_id, ok: true, failed_segments: [] }] }, 3).status_code).toBe(ErrorCode.INVALID_PARAMS);
    expect(core.batchReplicaCopied({ client_id: 'intruder', outcomes: [{ copy_id: ca.copy_id, ok: true, failed_segments: [] }] }, 3).results).toEqual([ErrorCode.INVALID_PARAMS]);
    expect(tiers(core, 'a', 4).map(([t]) => t)).toEqual([ReplicaType.MEMORY]);
  });
});
