// BatchPutStart has the outcome of one PutStart after another: the same replies, placements,
// evictions and state, including keys listed twice, zombie writes taken over, and eviction
// in the middle of a batch (which removes objects the batch looked up before it began). The same
// for BatchPutEnd against one PutEnd after another, in start order or not.
import fc from 'fast-check';
import { ErrorCode } from '../../common/error-code.js';
import type { PutStartRequest__Output } from '../../proto/gen/store/PutStartRequest.js';
import type { PutStartResponse__Output } from '../../proto/gen/store/PutStartResponse.js';
import { BatchKeySet } from './batch-key-set.js';
import type { MasterCore, MasterCoreConfig } from './master-core.js';
import { makeCore, MEMORY, mountReq, putReq } from './master-core-fixture.js';

const KEYS = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];
const SEGS = ['s0', 's1', 's2'];

type Put = { key: number; slices: number[]; replicas: number; pin: 'none' | 'soft' | 'hard'; preferred: number; bad: 'none' | 'key' | 'length' | 'replicas' };
type Op =
  | { op: 'batch'; puts: Put[] }
  | { op: 'end'; keys: number[] }
  | { op: 'endLast'; reversed: boolean; drop: number }
  | { op: 'tick'; ms: number }
  | { op: 'get'; key: number }
  | { op: 'unmount'; seg: number };

const putArb: fc.Arbitrary<Put> = fc.record({
  key: fc.nat(KEYS.length - 1),
  slices: fc.array(fc.integer({ min: 1, max: 5000 }), { minLength: 1, maxLength: 3 }),
  replicas: fc.integer({ min: 0, max: 3 }),
  pin: fc.constantFrom('none' as const, 'none' as const, 'soft' as const, 'hard' as const),
  preferred: fc.integer({ min: -3, max: SEGS.length }), // < 0: none; SEGS.length: an unknown segment
  bad: fc.constantFrom('none' as const, 'none' as const, 'none' as const, 'none' as const, 'key' as const, 'length' as const, 'replicas' as const),
});

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ op: fc.constant('batch' as const), puts: fc.array(putArb, { minLength: 0, maxLength: 12 }) }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('end' as const), keys: fc.array(fc.nat(KEYS.length - 1), { maxLength: 8 }) }) },
  // the keys of the last batch, as a client ends them: in start order (or reversed), some left out
  { weight: 3, arbitrary: fc.record({ op: fc.constant('endLast' as const), reversed: fc.boolean(), drop: fc.nat(3) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('tick' as const), ms: fc.constantFrom(1, 1000, 40_000, 400_000) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('get' as const), key: fc.nat(KEYS.length - 1) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('unmount' as const), seg: fc.nat(SEGS.length - 1) }) },
);

function request(p: Put): PutStartRequest__Output {
  const preferred_segment = p.preferred < 0 ? '' : p.preferred < SEGS.length ? SEGS[p.preferred] : 'nowhere';
  const r = putReq(p.bad === 'key' ? '' : KEYS[p.key], p.slices, {
    replica_num: p.bad === 'replicas' ? 40 : p.replicas,
    with_soft_pin: p.pin === 'soft',
    with_hard_pin: p.pin === 'hard',
    preferred_segment,
  });
  if (p.bad === 'length') r.value_length += 1;
  return r;
}

function reply(r: PutStartResponse__Output): unknown {
  return { status_code: r.status_code, replica_list: r.replica_list };
}

function snapshot(core: MasterCore, now: number): unknown {
  return {
    stats: core.stats(now),
    segments: core.segmentsDetail(),
    order: core.evictionOrder(),
    objects: KEYS.map((k) => core.queryKey(k)),
  };
}

describe.each(['random', 'free_ratio_first'] as const)('BatchPutStart (%s strategy)', (strategy) => {
  it('has the outcome of one PutStart after another', () => {
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 1, maxLength: 30 }), fc.nat(), (ops, seed) => {
        // small segments: puts evict, and big ones fail
        const config: Partial<MasterCoreConfig> = { allocationStrategy: strategy, clientTtlMs: 1e12, putStartDiscardTimeoutMs: 30_000, putStartReleaseTimeoutMs: 300_000 };
        const batched = makeCore(config, seed);
        const single = makeCore(config, seed);
        let now = 0;
        let last: string[] = [];
        /** A batch end on `batched`, and the same keys ended one PutEnd at a time on `single`. */
        const end = (keys: string[]) =>
          expect(batched.batchPutEnd({ keys, replica_type: MEMORY, checksums: [], failed_segments: [] }, now)).toEqual({
            status_code: ErrorCode.OK,
            results: keys.map((key) => ({ key, status_code: single.putEnd({ key, replica_type: MEMORY, slice_checksums: [] }, now).status_code })),
          });
        for (const core of [batched, single]) SEGS.forEach((name, i) => core.mountSegment(mountReq(name, 12 * 1024, 'c', (i + 1) * 2 ** 32, `h${i}:1`), now));
        for (const o of ops) {
          switch (o.op) {
            case 'batch': {
              last = o.puts.map((p) => request(p).key);
              const got = batched.batchPutStart({ requests: o.puts.map(request) }, now);
              const want = o.puts.map((p) => single.putStart(request(p), now));
              expect(got.results.map(reply)).toEqual(want.map(reply));
              break;
            }
            case 'end':
              end(o.keys.map((k) => KEYS[k]));
              break;
            case 'endLast': {
              const keys = last.filter((_, i) => o.drop === 0 || i % (o.drop + 1) !== 0);
              end(o.reversed ? keys.reverse() : keys);
              break;
            }
            case 'tick':
              now += o.ms;
              expect(batched.sweep(now)).toEqual(single.sweep(now));
              break;
            case 'get':
              expect(reply(batched.getReplicaList({ key: KEYS[o.key] }, now))).toEqual(reply(single.getReplicaList({ key: KEYS[o.key] }, now)));
              break;
            case 'unmount':
              for (const core of [batched, single]) core.unmountSegment({ segment_name: SEGS[o.seg], client_id: 'c', grace_period_seconds: 0 }, now);
              for (const core of [batched, single]) core.mountSegment(mountReq(SEGS[o.seg], 12 * 1024, 'c', (o.seg + 1) * 2 ** 32, `h${o.seg}:1`), now);
              break;
          }
          expect(snapshot(batched, now)).toEqual(snapshot(single, now));
          expect(batched.checkIndexes()).toEqual([]);
        }
      }),
      { numRuns: 150 },
    );
  });
});

describe('BatchPutStart', () => {
  it('refused for room with nothing left to evict: later requests of the same shape get what PutStart after PutStart gives, placements drawn alike', () => {
    for (let seed = 1; seed <= 20; seed++) {
      const cores = [makeCore({}, seed), makeCore({}, seed)];
      for (const core of cores) {
        SEGS.forEach((name, i) => core.mountSegment(mountReq(name, 12 * 1024, 'c', (i + 1) * 2 ** 32, `h${i}:1`), 0));
        for (let i = 0; i < 9; i++) {
          expect(core.putStart(putReq(`pinned-${i}`, 4096, { with_hard_pin: true }), 0).status_code).toBe(ErrorCode.OK); // never evicted
          core.putEnd({ key: `pinned-${i}`, replica_type: MEMORY, slice_checksums: [] }, 0);
        }
      }
      const [batched, single] = cores;
      const full = ['x0', 'x1', 'x2', 'x3', 'x4', 'x5'].map((k) => putReq(k, 4096));
      const got = batched.batchPutStart({ requests: full }, 1).results.map(reply);
      expect(got).toEqual(full.map((r) => reply(single.putStart(r, 1))));
      expect(got.every((r) => (r as PutStartResponse__Output).status_code === ErrorCode.NO_AVAILABLE_HANDLE)).toBe(true);
      // room again: the placements of both come from the same draws of their rng
      for (const core of cores) for (let i = 0; i < 6; i += 2) core.remove({ key: `pinned-${i}`, force: true }, 2);
      const more = ['y0', 'y1', 'y2'].map((k) => putReq(k, 4096));
      expect(batched.batchPutStart({ requests: more }, 3).results.map(reply)).toEqual(more.map((r) => reply(single.putStart(r, 3))));
      expect(snapshot(batched, 3)).toEqual(snapshot(single, 3));
    }
  });

  it('answers a key listed twice in one batch as PutStart would: the second finds the first', () => {
    const core = makeCore();
    core.mountSegment(mountReq('s0', 1 << 20), 0);
    const r = core.batchPutStart({ requests: [putReq('k', 100), putReq('j', 100), putReq('k', 200)] }, 0);
    expect(r.results.map((x) => x.status_code)).toEqual([ErrorCode.OK, ErrorCode.OK, ErrorCode.OBJECT_ALREADY_EXISTS]);
    expect(core.stats(0).usedBytes).toBe(208);
  });
});

describe('BatchKeySet', () => {
  it('holds the keys added since the last clear, across growth and many clears', () => {
    const set = new BatchKeySet();
    for (let round = 0; round < 3; round++) {
      const keys = Array.from({ length: 100 + round * 50 }, (_, i) => `model/layer/block-${round}-${i}`);
      for (const k of keys) expect(set.has(k)).toBe(false);
      keys.forEach((k, i) => {
        expect(set.add(k)).toBe(true);
        if (i % 2 === 0) expect(set.add(`${k}`)).toBe(false); // adding twice keeps one entry
      });
      expect(set.size).toBe(keys.length);
      for (const k of keys) expect(set.has(`${k}`)).toBe(true);
      // a key differing only between the sampled ends (same hash) is still a different key
      const k0 = keys[0];
      expect(set.has(k0.slice(0, 8) + k0.slice(8, 13).toUpperCase() + k0.slice(13))).toBe(false);
      set.clear();
      expect(set.size).toBe(0);
      for (const k of keys) expect(set.has(k)).toBe(false);
    }
  });
});

describe("reuse of deleted objects' metadata", () => {
  it('keeps lease counts exact when a leased object is dropped and others are put at the same instant', () => {
    const core = makeCore({ defaultKvLeaseTtlMs: 100 });
    core.mountSegment(mountReq('s0', 1 << 20, 'c', 2 ** 32), 0);
    for (const key of ['a', 'b']) {
      expect(core.putStart(putReq(key, 64), 0).status_code).toBe(ErrorCode.OK);
      expect(core.putEnd({ key, replica_type: MEMORY, slice_checksums: [] }, 0).status_code).toBe(ErrorCode.OK);
    }
    expect(core.getReplicaList({ key: 'a' }, 10).status_code).toBe(ErrorCode.OK); // leased until 110
    // the segment goes at once, taking the leased object with it
    expect(core.unmountSegment({ segment_name: 's0', client_id: 'c', grace_period_seconds: 0 }, 10).status_code).toBe(ErrorCode.OK);
    core.mountSegment(mountReq('s0', 1 << 20, 'c', 2 ** 32), 10);
    for (const key of ['c', 'd']) {
      expect(core.putStart(putReq(key, 64), 10).status_code).toBe(ErrorCode.OK);
      expect(core.putEnd({ key, replica_type: MEMORY, slice_checksums: [] }, 10).status_code).toBe(ErrorCode.OK);
      expect(core.getReplicaList({ key }, 10).status_code).toBe(ErrorCode.OK); // leased until 110 too
    }
    expect(core.stats(50).activeLeases).toBe(2);
    expect(core.stats(200).activeLeases).toBe(0);
    expect(core.checkIndexes()).toEqual([]);
  });

  it('gives a put after removals objects of their own: earlier objects and replies are unaffected', () => {
    const core = makeCore();
    core.mountSegment(mountReq('s0', 1 << 20, 'c', 2 ** 32), 0);
    const first = core.batchPutStart({ requests: ['a', 'b', 'c'].map((k) => putReq(k, 64)) }, 0);
    core.batchPutEnd({ keys: ['a', 'b', 'c'], replica_type: MEMORY, checksums: [], failed_segments: [] }, 0);
    const before = first.results.map((r) => r.replica_list);
    for (const key of ['a', 'b']) expect(core.remove({ key, force: false }, 1).status_code).toBe(ErrorCode.OK);
    const again = core.batchPutStart({ requests: ['x', 'y', 'z'].map((k) => putReq(k, [32, 32])) }, 2);
    expect(again.results.map((r) => r.status_code)).toEqual([ErrorCode.OK, ErrorCode.OK, ErrorCode.OK]);
    expect(first.results.map((r) => r.replica_list)).toEqual(before);
    expect(core.queryKey('a')).toBeUndefined();
    expect(core.queryKey('c')).toHaveLength(1);
    for (const key of ['x', 'y', 'z']) expect(core.queryKey(key)).toEqual([]); // being written
    expect(core.checkIndexes()).toEqual([]);
  });
});
