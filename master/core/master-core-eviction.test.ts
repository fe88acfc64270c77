// MasterCore leases, pins, removal and eviction, with the clock advanced by hand.
import { ErrorCode } from '../../common/error-code.js';
import { EVICTION_MIN_SCAN } from './eviction.js';
import { defaultMasterCoreConfig, PUT_EVICTION_CAP, SWEEP_EVICTION_BATCH } from './master-core.js';
import type { MasterCore, MasterCoreConfig } from './master-core.js';
import { makeCore, MEMORY, mountReq, putObject, putReq, usage } from './master-core-fixture.js';

const LEASE = defaultMasterCoreConfig.defaultKvLeaseTtlMs;
const SOFT_TTL = defaultMasterCoreConfig.defaultKvSoftPinTtlMs;

/** One segment that holds exactly `slots` objects of 1 KiB. */
function coreWithSlots(slots: number, overrides: Partial<MasterCoreConfig> = {}): MasterCore {
  const core = makeCore(overrides);
  expect(core.mountSegment(mountReq('seg', slots * 1024), 0).status_code).toBe(ErrorCode.OK);
  return core;
}

const exists = (core: MasterCore, key: string): boolean => core.queryKey(key) !== undefined;

describe('leases', () => {
  it('GetReplicaList grants a lease that blocks Remove until it expires', () => {
    const core = coreWithSlots(4);
    putObject(core, 'k', 1024, 0);
    expect(core.remove({ key: 'k', force: false }, 1).status_code).toBe(ErrorCode.OK);
    putObject(core, 'k', 1024, 2);
    core.getReplicaList({ key: 'k' }, 100);
    expect(core.remove({ key: 'k', force: false }, 100 + LEASE - 1).status_code).toBe(ErrorCode.OBJECT_HAS_LEASE);
    expect(core.stats(100 + LEASE - 1).activeLeases).toBe(1);
    expect(core.remove({ key: 'k', force: false }, 100 + LEASE).status_code).toBe(ErrorCode.OK);
    expect(core.getReplicaList({ key: 'k' }, 100 + LEASE).status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
  });

  it('ExistKey grants a lease too, and each access extends it', () => {
    const core = coreWithSlots(4);
    putObject(core, 'k', 1024, 0);
    expect(core.existKey({ key: 'k' }, 10)).toEqual({ status_code: ErrorCode.OK, exists: true, lease_ttl_ms: LEASE });
    core.existKey({ key: 'k' }, 10 + LEASE - 1);
    expect(core.remove({ key: 'k', force: false }, 10 + LEASE + 1).status_code).toBe(ErrorCode.OBJECT_HAS_LEASE);
    expect(core.existKey({ key: 'missing' }, 10)).toEqual({ status_code: ErrorCode.OK, exists: false, lease_ttl_ms: 0 });
  });

  it('RemoveAll removes only unleased complete objects, hard-pinned ones included', () => {
    const core = coreWithSlots(8);
    putObject(core, 'a', 1024, 0);
    putObject(core, 'b', 1024, 0, { with_hard_pin: true });
    putObject(core, 'leased', 1024, 0);
    core.putStart(putReq('writing', 1024), 0);
    core.getReplicaList({ key: 'leased' }, 1);
    expect(core.removeAll({}, 2)).toEqual({ status_code: ErrorCode.OK, removed_count: 2 });
    expect(['a', 'b', 'leased', 'writing'].map((k) => exists(core, k))).toEqual([false, false, true, true]);
    expect(usage(core)['seg']).toBe(2048);
  });

  it('Remove of a missing or unfinished object fails without side effects', () => {
    const core = coreWithSlots(2);
    expect(core.remove({ key: 'nope', force: false }, 0).status_code).toBe(ErrorCode.OBJECT_NOT_FOUND);
    core.putStart(putReq('w', 1024), 0);
    expect(core.remove({ key: 'w', force: true }, 0).status_code).toBe(ErrorCode.REPLICA_IS_NOT_READY);
    expect(core.putEnd({ key: 'w', replica_type: MEMORY, slice_checksums: [] }, 0).status_code).toBe(ErrorCode.OK);
  });
});

describe('a PutStart that cannot fit even in empty segments', () => {
  it('gets NO_AVAILABLE_HANDLE and evicts nothing', () => {
    const core = coreWithSlots(8);
    for (let i = 0; i < 8; i++) putObject(core, `k${i}`, 1024, 0);
    const before = usage(core);
    for (const slices of [[16 * 1024], [9 * 1024], [6 * 1024, 6 * 1024], [1e15]]) {
      expect(core.putStart(putReq('big', slices), 1).status_code).toBe(ErrorCode.NO_AVAILABLE_HANDLE);
    }
    expect(usage(core)).toEqual(before);
    expect(core.stats(1)).toMatchObject({ objects: 8, evictionsTotal: 0 });
    // one that fits once others are gone still makes room for itself
    expect(core.putStart(putReq('fits', 2 * 1024), 2).status_code).toBe(ErrorCode.OK);
    expect(core.stats(2).evictionsTotal).toBeGreaterThan(0);
  });
});

describe('RemoveByRegex and GetReplicaListByRegex', () => {
  it('match keys by regular expression, skipping leased and hard-pinned objects on removal', () => {
    const core = coreWithSlots(8);
    for (const k of ['user/1', 'user/2', 'user/3', 'other']) putObject(core, k, 1024, 0);
    putObject(core, 'user/pinned', 1024, 0, { with_hard_pin: true });
    core.putStart(putReq('user/writing', 1024), 0);
    const listed = core.getReplicaListByRegex({ key_regex: '^user/' }, 1);
    expect(listed.status_code).toBe(ErrorCode.OK);
    expect(Object.keys(listed.object_map).sort()).toEqual(['user/1', 'user/2', 'user/3', 'user/pinned']);
    // a regex query grants no lease
    core.getReplicaList({ key: 'user/2' }, 1);
    expect(core.removeByRegex({ key_regex: '^user/\\d$' }, 2)).toEqual({ status_code: ErrorCode.OK, removed_count: 2 });
    expect(['user/1', 'user/2', 'user/3', 'other', 'user/pinned'].map((k) => exists(core, k))).toEqual([false, true, false, true, true]);
  });

  it('reject an invalid or empty regular expression with INVALID_PARAMS and remove nothing', () => {
    const core = coreWithSlots(2);
    putObject(core, 'a', 1024, 0);
    for (const key_regex of ['(', '[a-', '']) {
      expect(core.removeByRegex({ key_regex }, 1)).toEqual({ status_code: ErrorCode.INVALID_PARAMS, removed_count: 0 });
      expect(core.getReplicaListByRegex({ key_regex }, 1).status_code).toBe(ErrorCode.INVALID_PARAMS);
    }
    expect(exists(core, 'a')).toBe(true);
  });

  it('match in linear time, so a pattern that backtracks exponentially still answers', () => {
    const core = coreWithSlots(2);
    const key = `${'a'.repeat(60)}!`; // 2^60 backtracking steps for ^(a+)+$
    putObject(core, key, 1024, 0);
    expect(core.getReplicaListByRegex({ key_regex: '^(a+)+$' }, 1)).toEqual({ status_code: ErrorCode.OK, object_map: {} });
    expect(core.removeByRegex({ key_regex: '^(a+)+$' }, 1)).toEqual({ status_code: ErrorCode.OK, removed_count: 0 });
    expect(Object.keys(core.getReplicaListByRegex({ key_regex: '^(a+)+!$' }, 1).object_map)).toEqual([key]);
  });

  it('refuse backreferences and lookaround (no linear-time match) with INVALID_PARAMS', () => {
    const core = coreWithSlots(2);
    putObject(core, 'aa', 1024, 0);
    for (const key_regex of ['(a)\\1', 'a(?=a)', '(?<!b)a']) {
      expect(core.removeByRegex({ key_regex }, 1)).toEqual({ status_code: ErrorCode.INVALID_PARAMS, removed_count: 0 });
      expect(core.getReplicaListByRegex({ key_regex }, 1).status_code).toBe(ErrorCode.INVALID_PARAMS);
    }
    expect(exists(core, 'aa')).toBe(true);
  });
});

describe('hard pin', () => {
  it('refuses Remove without force, allows it with force, but never while leased', () => {
    const core = coreWithSlots(4);
    putObject(core, 'k', 1024, 0, { with_hard_pin: true });
    expect(core.remove({ key: 'k', force: false }, 1).status_code).toBe(ErrorCode.OBJECT_HARD_PINNED);
    core.getReplicaList({ key: 'k' }, 1);
    expect(core.remove({ key: 'k', force: true }, 2).status_code).toBe(ErrorCode.OBJECT_HAS_LEASE);
    expect(core.stats(2).hardPinned).toBe(1);
    expect(core.remove({ key: 'k', force: true }, 1 + LEASE).status_code).toBe(ErrorCode.OK);
  });

  it('is never evicted', () => {
    const core = coreWithSlots(4, { evictionRatio: 1 });
    for (const k of ['p1', 'p2', 'p3', 'p4']) putObject(core, k, 1024, 0, { with_hard_pin: true });
    expect(core.putStart(putReq('new', 1024), 1).status_code).toBe(ErrorCode.NO_AVAILABLE_HANDLE);
    expect(core.sweep(2).evictedObjects).toBe(0);
    expect(['p1', 'p2', 'p3', 'p4'].every((k) => exists(core, k))).toBe(true);
  });
});

describe('eviction', () => {
  it('runs when PutStart finds no space, least recently used first, skipping leased objects', () => {
    const core = coreWithSlots(4, { evictionRatio: 0.5 });
    for (const k of ['a', 'b', 'c', 'd']) putObject(core, k, 1024, 0);
    core.getReplicaList({ key: 'a' }, LEASE * 2); // a: most recently used, leased
    core.existKey({ key: 'b' }, LEASE * 3); // b: recently used, leased
    // LRU order now c, d, a, b; a and b leased
    const r = core.putStart(putReq('new', 1024), LEASE * 3 + 1);
    expect(r.status_code).toBe(ErrorCode.OK);
    // PutStart evicts only what it needs: c
    expect(['a', 'b', 'c', 'd'].map((k) => exists(core, k))).toEqual([true, true, false, true]);
    expect(core.stats(LEASE * 3 + 1).evictionsTotal).toBe(1);
    // the rest of the round's target (ceil(4 * 0.5) = 2) is paid by the next sweep
    core.ping({ client_id: 'client-a', fence_acks: [], can_copy: false }, LEASE * 3 + 2); // the segment's owner is alive
    expect(core.sweep(LEASE * 3 + 2).evictedObjects).toBe(1);
    expect(['a', 'b', 'c', 'd'].map((k) => exists(core, k))).toEqual([true, true, false, false]);
    expect(core.sweep(LEASE * 3 + 3).evictedObjects).toBe(0);
  });

  it('PutStart evicts more when what it freed does not make room, oldest first', () => {
    const core = coreWithSlots(4, { evictionRatio: 0.25 });
    for (const k of ['a', 'b', 'c', 'd']) putObject(core, k, 1024, 0);
    // 3 KiB needs three 1 KiB neighbours: a (1 KiB), then b and c (2 KiB more)
    const r = core.putStart(putReq('big', 3 * 1024), 1);
    expect(r.status_code).toBe(ErrorCode.OK);
    expect(['a', 'b', 'c', 'd'].map((k) => exists(core, k))).toEqual([false, false, false, true]);
    expect(core.stats(1).evictionsTotal).toBe(3);
    expect(core.checkIndexes()).toEqual([]);
  });

  it('pays a large eviction round in bounded sweeps', () => {
    const n = 3 * SWEEP_EVICTION_BATCH;
    const core = coreWithSlots(n, { evictionRatio: 1 });
    for (let i = 0; i < n; i++) putObject(core, `k${i}`, 1024, i);
    // one PutStart evicts one object, the remaining target of n - 1 objects becomes a debt
    expect(core.putStart(putReq('new', 1024), n).status_code).toBe(ErrorCode.OK);
    expect(core.stats(n).evictionsTotal).toBe(1);
    const evicted = [1, 2, 3, 4].map((t) => core.sweep(n + t).evictedObjects);
    expect(evicted).toEqual([SWEEP_EVICTION_BATCH, SWEEP_EVICTION_BATCH, SWEEP_EVICTION_BATCH - 1, 0]);
    // least recently used first: the last of the old objects went last; 'new' is still being written
    expect(core.stats(n + 5).objects).toBe(1);
    expect(exists(core, 'new')).toBe(true);
  });

  it('finds candidates behind any number of hard-pinned objects (they are not on the eviction lists)', () => {
    const pinned = EVICTION_MIN_SCAN + 10;
    const core = coreWithSlots(pinned + 1, { evictionRatio: 0.0001 });
    for (let i = 0; i < pinned; i++) putObject(core, `pinned-${i}`, 1024, 0, { with_hard_pin: true });
    putObject(core, 'plain', 1024, 1);
    expect(core.putStart(putReq('new', 1024), 2).status_code).toBe(ErrorCode.OK);
    expect([exists(core, 'plain'), core.stats(2).hardPinned]).toEqual([false, pinned]);
  });

  it('caps what one PutStart may evict', () => {
    const core = coreWithSlots(PUT_EVICTION_CAP + 8, { evictionRatio: 0.01 });
    const many = PUT_EVICTION_CAP + 8;
    for (let i = 0; i < many; i++) putObject(core, `k${i}`, 1024, 0);
    // room for a whole-segment object would take every object; one PutStart stops at the cap
    const r = core.putStart(putReq('huge', many * 1024), 1);
    expect(r.status_code).toBe(ErrorCode.NO_AVAILABLE_HANDLE);
    expect(core.stats(1).evictionsTotal).toBe(PUT_EVICTION_CAP);
    expect(core.stats(1).objects).toBe(8);
  });

  it('runs from sweep when usage reaches the high watermark, evicting evictionRatio of the objects', () => {
    const core = coreWithSlots(20, { evictionRatio: 0.1, evictionHighWatermarkRatio: 0.9 });
    for (let i = 0; i < 17; i++) putObject(core, `k${i}`, 1024, i);
    expect(core.sweep(100).evictedObjects).toBe(0); // 85% < 90%
    putObject(core, 'k17', 1024, 17);
    const report = core.sweep(101); // 90%: evict ceil(18 * 0.1) = 2 objects, the oldest
    expect(report.evictedObjects).toBe(2);
    expect(exists(core, 'k0') || exists(core, 'k1')).toBe(false);
    expect(exists(core, 'k2')).toBe(true);
    expect(core.sweep(102).evictedObjects).toBe(0);
  });

  it('evicts soft-pinned objects only when no unpinned candidate is left', () => {
    const core = coreWithSlots(3, { evictionRatio: 0.5 });
    putObject(core, 'soft1', 1024, 0, { with_soft_pin: true });
    putObject(core, 'soft2', 1024, 0, { with_soft_pin: true });
    putObject(core, 'plain', 1024, 0);
    expect(core.stats(1).softPinned).toBe(2);
    // PutStart needs one slot: the unpinned object goes
    expect(core.putStart(putReq('new', 1024), 1).status_code).toBe(ErrorCode.OK);
    expect(['soft1', 'soft2', 'plain'].map((k) => exists(core, k))).toEqual([true, true, false]);
    // the round's target is ceil(3 * 0.5) = 2: the sweep takes the least recently used soft-pinned one
    expect(core.sweep(2).evictedObjects).toBe(1);
    expect(['soft1', 'soft2'].map((k) => exists(core, k))).toEqual([false, true]);
  });

  it('treats a soft pin that lapsed as no pin, in last-access order with unpinned objects', () => {
    const core = coreWithSlots(3, { evictionRatio: 0.3 });
    putObject(core, 'soft', 1024, 0, { with_soft_pin: true });
    putObject(core, 'plain', 1024, 10);
    putObject(core, 'pinned', 1024, SOFT_TTL, { with_soft_pin: true });
    // at SOFT_TTL + 5 'soft' lapsed (last access 0) and is older than 'plain'
    expect(core.putStart(putReq('new', 1024), SOFT_TTL + 5).status_code).toBe(ErrorCode.OK);
    expect(['soft', 'plain', 'pinned'].map((k) => exists(core, k))).toEqual([false, true, true]);
  });

  it('never evicts soft-pinned objects when that is not allowed', () => {
    const core = coreWithSlots(2, { allowEvictSoftPinnedObjects: false, evictionRatio: 1 });
    putObject(core, 's1', 1024, 0, { with_soft_pin: true });
    putObject(core, 's2', 1024, 0, { with_soft_pin: true });
    expect(core.putStart(putReq('new', 1024), 1).status_code).toBe(ErrorCode.NO_AVAILABLE_HANDLE);
    expect(exists(core, 's1') && exists(core, 's2')).toBe(true);
  });

  it('drops a soft pin after its TTL without access and restores it on the next access', () => {
    const core = coreWithSlots(3, { allowEvictSoftPinnedObjects: false, evictionRatio: 0.3 });
    putObject(core, 's', 1024, 0, { with_soft_pin: true });
    putObject(core, 't', 1024, 0, { with_soft_pin: true });
    putObject(core, 'u', 1024, 0, { with_soft_pin: true });
    // Before the TTL all three are pinned and eviction may not touch them.
    expect(core.putStart(putReq('early', 1024), SOFT_TTL - 1).status_code).toBe(ErrorCode.NO_AVAILABLE_HANDLE);
    core.getReplicaList({ key: 's' }, SOFT_TTL + 10); // s pinned again
    // t is the least recently used unpinned object now
    expect(core.putStart(putReq('new', 1024), SOFT_TTL + 10 + LEASE).status_code).toBe(ErrorCode.OK);
    expect(['s', 't', 'u'].map((k) => exists(core, k))).toEqual([true, false, true]);
  });

  it('releases zombie PutStarts older than the release timeout first', () => {
    const release = defaultMasterCoreConfig.putStartReleaseTimeoutMs;
    const core = coreWithSlots(4, { evictionRatio: 0.25 });
    core.putStart(putReq('zombie', 1024), 0);
    putObject(core, 'a', 1024, 1);
    putObject(core, 'b', 1024, 2);
    core.putStart(putReq('young', 1024), release);
    // full; at release + 1 only 'zombie' is older than the release timeout
    const r = core.putStart(putReq('new', 1024), release + 1);
    expect(r.status_code).toBe(ErrorCode.OK);
    expect(['zombie', 'a', 'b', 'young'].map((k) => exists(core, k))).toEqual([false, true, true, true]);
    expect(core.stats(release + 1).evictionsTotal).toBe(0);
    // a zombie is not released before the timeout: the full segment evicts an object instead
    const core2 = coreWithSlots(2, { evictionRatio: 0.5 });
    core2.putStart(putReq('writing', 1024), 0);
    putObject(core2, 'a', 1024, 0);
    expect(core2.putStart(putReq('new', 1024), release).status_code).toBe(ErrorCode.OK);
    expect([exists(core2, 'writing'), exists(core2, 'a')]).toEqual([true, false]);
  });

  it('reports zombies released by a watermark sweep', () => {
    const release = defaultMasterCoreConfig.putStartReleaseTimeoutMs;
    const core = coreWithSlots(2, { evictionRatio: 0.5 });
    core.putStart(putReq('z1', 1024), 0);
    core.putStart(putReq('z2', 1024), 0);
    core.ping({ client_id: 'client-a', fence_acks: [], can_copy: false }, release); // the segment's owner is alive
    expect(core.sweep(release + 1)).toEqual({ droppedClients: [], unmountedSegments: [], evictedObjects: 0, releasedZombies: 2, underReplicated: 0 });
    expect(usage(core)['seg']).toBe(0);
  });
});
