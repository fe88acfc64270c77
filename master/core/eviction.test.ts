// Victim selection: LRU order, eligibility, soft pins last, bounded scan; zombie selection.
import { ReplicaStatus } from '../../proto/gen/store/ReplicaStatus.js';
import { EVICTION_MIN_SCAN, evictionTarget, selectVictims, selectZombies } from './eviction.js';
import { FLAG_HARD_PIN, FLAG_SOFT_PIN, ObjectMeta } from './object-meta.js';

const policy = { allowEvictSoftPinned: true, softPinTtlMs: 1000 };

function obj(flags = 0, leaseUntil = 0, lastAccess = 0, status: number = ReplicaStatus.COMPLETE): ObjectMeta {
  return new ObjectMeta([1, 0, 8], 1, status | flags, leaseUntil, lastAccess);
}

describe('selectVictims', () => {
  it('takes eligible objects in map (LRU) order, skipping leased, pinned and unfinished ones', () => {
    const objects = new Map([
      ['leased', obj(0, 500)],
      ['hard', obj(FLAG_HARD_PIN)],
      ['writing', obj(0, 0, 0, ReplicaStatus.INITIALIZED)],
      ['soft', obj(FLAG_SOFT_PIN, 0, 50)],
      ['x', obj()],
      ['y', obj()],
      ['z', obj()],
    ]);
    expect(selectVictims(objects, 100, 2, policy)).toEqual(['x', 'y']);
    expect(selectVictims(objects, 100, 5, policy)).toEqual(['x', 'y', 'z', 'soft']);
    expect(selectVictims(objects, 100, 5, { ...policy, allowEvictSoftPinned: false })).toEqual(['x', 'y', 'z']);
    // by t=1050 the lease has run out and the soft pin lapsed: ordinary candidates, in LRU order
    expect(selectVictims(objects, 1050, 3, policy)).toEqual(['leased', 'soft', 'x']);
    // the lease ran out at 500
    expect(selectVictims(objects, 600, 1, policy)).toEqual(['leased']);
  });

  it('looks at a bounded number of entries and then leaves soft-pinned objects alone', () => {
    const objects = new Map<string, ObjectMeta>();
    for (let i = 0; i < EVICTION_MIN_SCAN; i++) objects.set(`pinned-${i}`, obj(FLAG_HARD_PIN));
    objects.set('soft', obj(FLAG_SOFT_PIN, 0, 50));
    objects.set('late', obj());
    expect(selectVictims(objects, 100, 1, policy)).toEqual([]);
  });

  it('targets the eviction ratio of the objects, at least one', () => {
    expect(evictionTarget(1000, 0.05)).toBe(50);
    expect(evictionTarget(3, 0.05)).toBe(1);
    expect(evictionTarget(0, 0.05)).toBe(1);
  });
});

describe('selectZombies', () => {
  it('returns writes older than the release timeout, oldest first', () => {
    const inFlight = new Map([
      ['old', obj(0, 0, 0, ReplicaStatus.INITIALIZED)],
      ['older-too', obj(0, 0, 10, ReplicaStatus.INITIALIZED)],
      ['young', obj(0, 0, 500, ReplicaStatus.INITIALIZED)],
    ]);
    expect(selectZombies(inFlight, 400, 300)).toEqual(['old', 'older-too']);
    expect(selectZombies(inFlight, 300, 300)).toEqual([]);
  });
});
