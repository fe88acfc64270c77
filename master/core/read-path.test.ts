import fc from 'fast-check';
import { ErrorCode } from '../../common/error-code.js';
import { makeCore, mountReq, putObject, putReq } from './master-core-fixture.js';
import { MAX_KEY_LENGTH } from './write-validation.js';

const LEASE = 5000;

/** A core with objects a, b, c (complete, in that LRU order) and w (being written). */
function coreWithObjects() {
  const core = makeCore({ defaultKvLeaseTtlMs: LEASE });
  core.mountSegment(mountReq('seg', 1 << 20, 'client-a', 0x10000000, '10.0.0.1:7000'), 0);
  for (const k of ['a', 'b', 'c']) putObject(core, k, 64, 1);
  core.putStart(putReq('w', 64), 1);
  return core;
}

const TOO_LONG = 'k'.repeat(MAX_KEY_LENGTH + 1);

describe('batch reads', () => {
  it('answer every key as the single forms do, in request order', () => {
    const keys = ['c', 'missing', 'w', '', TOO_LONG, 'a', 'c'];
    const batch = coreWithObjects();
    const single = coreWithObjects();
    const got = batch.batchGetReplicaList({ keys }, 10);
    expect(got.status_code).toBe(ErrorCode.OK);
    expect(got.results).toEqual(keys.map((key) => single.getReplicaList({ key }, 10)));
    expect(got.results.map((r) => r.status_code)).toEqual([
      ErrorCode.OK,
      ErrorCode.OBJECT_NOT_FOUND,
      ErrorCode.REPLICA_IS_NOT_READY,
      ErrorCode.INVALID_KEY,
      ErrorCode.INVALID_KEY,
      ErrorCode.OK,
      ErrorCode.OK,
    ]);
    expect(got.results[0].replica_list[0].handles[0]).toMatchObject({ segment_name: 'seg', size: 64, te_endpoint: '10.0.0.1:7000' });
    expect(got.results[0].lease_ttl_ms).toBe(LEASE);

    const exists = batch.batchExistKey({ keys }, 11);
    expect(exists.results).toEqual(keys.map((key) => single.existKey({ key }, 11)));
    expect(exists.results.map((r) => r.exists)).toEqual([true, false, false, false, false, true, true]);
  });

  it('grant leases and refresh LRU order like single reads', () => {
    const batch = coreWithObjects();
    const single = coreWithObjects();
    batch.batchGetReplicaList({ keys: ['b', 'missing'] }, 20);
    batch.batchExistKey({ keys: ['a'] }, 30);
    single.getReplicaList({ key: 'b' }, 20);
    single.existKey({ key: 'a' }, 30);
    for (const core of [batch, single]) {
      expect(core.evictionOrder().plain).toEqual(['c', 'b', 'a']);
      expect(core.stats(30).activeLeases).toBe(2);
      // leased objects cannot be removed until the lease ends
      expect(core.remove({ key: 'b', force: false }, 20 + LEASE - 1).status_code).toBe(ErrorCode.OBJECT_HAS_LEASE);
      expect(core.stats(20 + LEASE).activeLeases).toBe(1);
      expect(core.remove({ key: 'b', force: false }, 20 + LEASE).status_code).toBe(ErrorCode.OK);
      expect(core.checkIndexes()).toEqual([]);
    }
  });

  it('refuse a request without a key list and change nothing', () => {
    const core = coreWithObjects();
    expect(core.batchGetReplicaList({ keys: null as unknown as string[] }, 5)).toEqual({ status_code: ErrorCode.INVALID_PARAMS, results: [] });
    expect(core.batchExistKey({ keys: 'a' as unknown as string[] }, 5)).toEqual({ status_code: ErrorCode.INVALID_PARAMS, results: [] });
    expect(core.stats(5).activeLeases).toBe(0);
    expect(core.evictionOrder().plain).toEqual(['a', 'b', 'c']);
  });

  it('replies shared between keys cannot be altered through one of them', () => {
    const core = coreWithObjects();
    const res = core.batchExistKey({ keys: ['a', 'b'] }, 5);
    expect(() => {
      (res.results[0] as { exists: boolean }).exists = false;
    }).toThrow(TypeError);
    expect(res.results[1].exists).toBe(true);
  });

  it('agree with the single forms on random key lists (property)', () => {
    const key = fc.constantFrom('a', 'b', 'c', 'w', 'x', '');
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.boolean(), fc.array(key, { maxLength: 8 })), { maxLength: 6 }), (calls) => {
        const batch = coreWithObjects();
        const single = coreWithObjects();
        let now = 2;
        for (const [exist, keys] of calls) {
          now += 1000;
          if (exist) expect(batch.batchExistKey({ keys }, now).results).toEqual(keys.map((k) => single.existKey({ key: k }, now)));
          else expect(batch.batchGetReplicaList({ keys }, now).results).toEqual(keys.map((k) => single.getReplicaList({ key: k }, now)));
          expect(batch.stats(now).activeLeases).toBe(single.stats(now).activeLeases);
          expect(batch.evictionOrder()).toEqual(single.evictionOrder());
        }
        expect(batch.checkIndexes()).toEqual([]);
      }),
      { numRuns: 100 },
    );
  });
});

describe('value versions in read replies', () => {
  const version = (core: ReturnType<typeof makeCore>, key: string, now: number): number => Number(core.getReplicaList({ key }, now).version);

  it('a new one for every rewrite of the key (upsert in place or moved, put after a removal), the same for every read of a value', () => {
    const core = makeCore({ defaultKvLeaseTtlMs: 10 });
    core.mountSegment(mountReq('seg', 1 << 20, 'client-a', 0x10000000, '10.0.0.1:7000'), 0);
    putObject(core, 'k', 64, 1);
    const v1 = version(core, 'k', 2);
    expect(v1).toBeGreaterThan(0);
    expect(version(core, 'k', 3)).toBe(v1);
    expect(core.batchGetReplicaList({ keys: ['k'] }, 4).results[0].version).toBe(v1);
    const seen = new Set([v1]);
    const upsert = (len: number, now: number) => {
      const start = core.upsertStart(putReq('k', len), now);
      expect(start.status_code).toBe(ErrorCode.OK);
      expect(core.upsertEnd({ key: 'k', replica_type: 0, slice_checksums: [] }, now).status_code).toBe(ErrorCode.OK);
      return start;
    };
    // in place: the same place and (here) no checksums, so only the version tells the values apart
    const before = core.getReplicaList({ key: 'k' }, 100).replica_list[0].handles[0].buffer;
    expect(upsert(64, 200).reused).toBe(true);
    expect(core.getReplicaList({ key: 'k' }, 201).replica_list[0].handles[0].buffer).toBe(before);
    seen.add(version(core, 'k', 201));
    expect(upsert(128, 300).reused).toBe(false);
    seen.add(version(core, 'k', 301));
    expect(core.remove({ key: 'k', force: false }, 400).status_code).toBe(ErrorCode.OK);
    putObject(core, 'k', 64, 400); // the same ms as the removal
    seen.add(version(core, 'k', 401));
    expect(seen.size).toBe(4);
    // another master (a restart, an HA leader) gives the objects it imports versions of its own
    const next = makeCore({ defaultKvLeaseTtlMs: 10, viewVersion: 1_700_000_000_000 });
    next.importState(core.exportState(500), 500);
    expect(next.mountSegment(mountReq('seg', 1 << 20, 'client-a', 0x10000000, '10.0.0.1:7000'), 501).status_code).toBe(ErrorCode.OK); // its owner is back
    const imported = version(next, 'k', 502);
    expect(imported).toBeGreaterThan(0);
    expect(seen.has(imported)).toBe(false);
  });
});
