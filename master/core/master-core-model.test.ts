// Random operation sequences against MasterCore: replicas never overlap, the derived indexes
// (eviction lists, in-flight list, pin counts) stay exact, and once every write is revoked and
// every object removed, every segment is empty again (no leaked space).
import fc from 'fast-check';
import { ErrorCode } from '../../common/error-code.js';
import { makeCore, MEMORY, mountReq, putReq } from './master-core-fixture.js';

const KEYS = ['a', 'b', 'c', 'd', 'e', 'f'];
const SEGS = ['s0', 's1', 's2'];

type Op =
  | { op: 'put' | 'upsert'; key: number; slices: number[]; replicas: number; pin: 'none' | 'soft' | 'hard' }
  | { op: 'end' | 'revoke' | 'upsertEnd' | 'upsertRevoke' | 'get' | 'remove'; key: number }
  | { op: 'unmount'; seg: number; grace: number }
  | { op: 'mount'; seg: number }
  | { op: 'tick'; ms: number }
  | { op: 'clear'; seg: number }
  | { op: 'clearAll' };

const keyOp = (...names: ('end' | 'revoke' | 'upsertEnd' | 'upsertRevoke' | 'get' | 'remove')[]) => fc.record({ op: fc.constantFrom(...names), key: fc.nat(KEYS.length - 1) });

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      op: fc.constantFrom('put' as const, 'upsert' as const),
      key: fc.nat(KEYS.length - 1),
      slices: fc.array(fc.integer({ min: 1, max: 3000 }), { minLength: 1, maxLength: 3 }),
      replicas: fc.integer({ min: 1, max: 3 }),
      pin: fc.constantFrom('none' as const, 'none' as const, 'soft' as const, 'hard' as const),
    }),
  },
  { weight: 6, arbitrary: keyOp('end', 'upsertEnd') },
  { weight: 2, arbitrary: keyOp('revoke', 'upsertRevoke') },
  { weight: 3, arbitrary: keyOp('get', 'remove') },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('unmount' as const), seg: fc.nat(SEGS.length - 1), grace: fc.constantFrom(0, 2) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('mount' as const), seg: fc.nat(SEGS.length - 1) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('tick' as const), ms: fc.constantFrom(1, 1000, 6000, 40_000, 400_000) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('clear' as const), seg: fc.nat(SEGS.length - 1) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('clearAll' as const) }) },
);

describe('MasterCore under random operations', () => {
  it('keeps replicas disjoint and leaks no space', () => {
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 10, maxLength: 60, size: 'max' }), fc.nat(), (ops, seed) => {
        const core = makeCore({ clientTtlMs: 1e12 }, seed);
        let now = 0;
        const mount = (i: number) => core.mountSegment(mountReq(SEGS[i], 16 * 1024, 'c', (i + 1) * 2 ** 32, `h${i}:1`), now);
        SEGS.forEach((_, i) => mount(i));
        for (const o of ops) {
          const key = 'key' in o ? KEYS[o.key] : '';
          switch (o.op) {
            case 'put':
              core.putStart(putReq(key, o.slices, { replica_num: o.replicas, with_soft_pin: o.pin === 'soft', with_hard_pin: o.pin === 'hard' }), now);
              break;
            case 'upsert':
              core.upsertStart(putReq(key, o.slices, { replica_num: o.replicas, with_soft_pin: o.pin === 'soft' }), now);
              break;
            case 'end':
              core.putEnd({ key, replica_type: MEMORY, slice_checksums: [] }, now);
              break;
            case 'upsertEnd':
              core.upsertEnd({ key, replica_type: MEMORY, slice_checksums: [] }, now);
              break;
            case 'revoke':
              core.putRevoke({ key, replica_type: MEMORY, failed_segments: [] }, now);
              break;
            case 'upsertRevoke':
              core.upsertRevoke({ key, replica_type: MEMORY, failed_segments: [] }, now);
              break;
            case 'get':
              core.getReplicaList({ key }, now);
              break;
            case 'remove':
              core.remove({ key, force: true }, now);
              break;
            case 'unmount':
              core.unmountSegment({ segment_name: SEGS[o.seg], client_id: 'c', grace_period_seconds: o.grace }, now);
              break;
            case 'mount':
              mount(o.seg);
              break;
            case 'clear':
              core.batchReplicaClear({ object_keys: KEYS, client_id: 'c', segment_name: SEGS[o.seg] }, now);
              break;
            case 'clearAll':
              core.batchReplicaClear({ object_keys: KEYS, client_id: 'c', segment_name: '' }, now);
              break;
            case 'tick':
              now += o.ms;
              core.sweep(now);
              break;
          }
          // Complete replicas never share bytes, and each slice's replicas are on distinct segments.
          const spans: [number, number][] = [];
          for (const key of core.allKeys()) {
            const replicas = core.queryKey(key)!;
            for (let j = 0; j < replicas[0].handles.length; j++) {
              const segs = replicas.map((r) => r.handles[j].segment_name);
              expect(new Set(segs).size).toBe(segs.length);
            }
            for (const r of replicas) for (const h of r.handles) spans.push([h.buffer, h.buffer + h.size]);
          }
          spans.sort((x, y) => x[0] - y[0]);
          for (let i = 1; i < spans.length; i++) expect(spans[i][0]).toBeGreaterThanOrEqual(spans[i - 1][1]);
          // The eviction lists, the in-flight list and the pin counts agree with the objects.
          expect(core.checkIndexes()).toEqual([]);
        }
        now += 1e7;
        expect(core.batchUpsertRevoke({ keys: KEYS, replica_type: MEMORY, checksums: [], failed_segments: [] }, now).status_code).toBe(ErrorCode.OK);
        core.removeAll({}, now);
        expect(core.stats(now).objects).toBe(0);
        expect(core.checkIndexes()).toEqual([]);
        for (const s of core.segmentsDetail()) expect(s.allocator_used_bytes).toBe(0);
      }),
      { numRuns: 120 },
    );
  });
});
