// The lease counter agrees with a brute-force count under any grant/forget/time sequence.
import fc from 'fast-check';
import { LeaseTracker } from './lease-tracker.js';
import { ObjectMeta } from './object-meta.js';

type Op = { kind: 'grant'; obj: number; dt: number; ttl?: number } | { kind: 'forget'; obj: number } | { kind: 'tick'; dt: number };

describe('LeaseTracker', () => {
  it('counts exactly the live objects whose lease has not expired', () => {
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ kind: fc.constant('grant' as const), obj: fc.nat(9), dt: fc.nat(3) }),
      fc.record({ kind: fc.constant('forget' as const), obj: fc.nat(9) }),
      fc.record({ kind: fc.constant('tick' as const), dt: fc.nat(7) }),
    );
    // some grants with a TTL of their own (shorter or longer than the usual one)
    const withTtl: fc.Arbitrary<Op> = fc.oneof(op, fc.record({ kind: fc.constant('grant' as const), obj: fc.nat(9), dt: fc.nat(3), ttl: fc.integer({ min: 1, max: 12 }) }));
    fc.assert(
      fc.property(
        fc.array(fc.boolean(), { minLength: 1, maxLength: 1 }).chain(([mixed]) => fc.array(mixed ? withTtl : op, { maxLength: 200 })),
        fc.integer({ min: 1, max: 10 }),
        (ops, ttl) => {
          const tracker = new LeaseTracker();
          const live = new Map<number, ObjectMeta>();
          let now = 0;
          for (const o of ops) {
            if (o.kind === 'tick') now += o.dt;
            else if (o.kind === 'grant') {
              now += o.dt;
              let meta = live.get(o.obj);
              if (meta === undefined) live.set(o.obj, (meta = ObjectMeta.create([], 1, 0, 0, now)));
              tracker.grant(meta, now + (o.ttl ?? ttl), now);
            } else {
              const meta = live.get(o.obj);
              if (meta !== undefined) {
                tracker.forget(meta);
                live.delete(o.obj);
              }
            }
            const expected = [...live.values()].filter((m) => m.leased(now)).length;
            expect(tracker.active(now)).toBe(expected);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
