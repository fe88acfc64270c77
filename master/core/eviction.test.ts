// Eviction order: LRU per list, eligibility, lapsed soft pins merged by last access, soft pins
// last, bounded skipping; zombie selection.
import { ReplicaStatus } from '../../proto/gen/store/ReplicaStatus.js';
import { EVICTION_MIN_SCAN, EvictionOrder, evictionTarget, selectZombies } from './eviction.js';
import { LruList } from './lru-list.js';
import { FLAG_HARD_PIN, FLAG_SOFT_PIN, ObjectMeta } from './object-meta.js';

const policy = { allowEvictSoftPinned: true, softPinTtlMs: 1000 };

function obj(key: string, flags = 0, leaseUntil = 0, lastAccess = 0, status: number = ReplicaStatus.COMPLETE): ObjectMeta {
  return ObjectMeta.create([1, 0, 8], 1, status | flags, leaseUntil, lastAccess, key);
}

/** Keys the cursor yields, in order, without deleting anything. */
function drain(order: EvictionOrder, now: number, p = policy, scanLimit = EVICTION_MIN_SCAN): string[] {
  const c = order.cursor(now, p, scanLimit);
  const out: string[] = [];
  for (let m = c.next(); m !== null; m = c.next()) out.push(m.key);
  return out;
}

describe('LruList', () => {
  it('appends at the tail, moves touched entries to the tail and unlinks from anywhere', () => {
    const list = new LruList();
    const [a, b, c] = [obj('a'), obj('b'), obj('c')];
    for (const m of [a, b, c]) list.append(m);
    list.moveToTail(a);
    expect([...list].map((m) => m.key)).toEqual(['b', 'c', 'a']);
    list.remove(c);
    expect([...list].map((m) => m.key)).toEqual(['b', 'a']);
    expect([list.size, c.listed, a.listed]).toEqual([2, false, true]);
    expect(() => list.append(a)).toThrow(/already on an eviction list/);
  });
});

describe('EvictionOrder', () => {
  it('yields unpinned candidates least recently used first, skipping leased and unfinished ones; hard pins are never listed', () => {
    const order = new EvictionOrder();
    const writing = obj('writing', 0, 0, 0, ReplicaStatus.PROCESSING);
    for (const m of [obj('leased', 0, 500), obj('hard', FLAG_HARD_PIN), writing, obj('soft', FLAG_SOFT_PIN, 0, 50), obj('x'), obj('y'), obj('z')]) order.add(m);
    expect(order.size).toBe(6); // 'hard' was refused
    expect(drain(order, 100)).toEqual(['x', 'y', 'z', 'soft']);
    expect(drain(order, 100, { ...policy, allowEvictSoftPinned: false })).toEqual(['x', 'y', 'z']);
    // by t=1050 the lease has run out and the soft pin lapsed: ordinary candidates, merged by last access
    expect(drain(order, 1050)).toEqual(['leased', 'x', 'y', 'z', 'soft']);
  });

  it('an access moves an object behind every other candidate of its list', () => {
    const order = new EvictionOrder();
    const [a, b, c] = [obj('a', 0, 0, 1), obj('b', 0, 0, 2), obj('c', 0, 0, 3)];
    for (const m of [a, b, c]) order.add(m);
    a.lastAccess = 10;
    order.touch(a);
    expect(drain(order, 20)).toEqual(['b', 'c', 'a']);
    order.remove(b);
    order.remove(b); // not listed any more: no-op
    expect(drain(order, 20)).toEqual(['c', 'a']);
  });

  it('a parked object (awaiting its offload copy) is on no list and not listed again until unparked, then at the head', () => {
    const order = new EvictionOrder();
    const [a, b, c] = [obj('a', 0, 0, 1), obj('b', 0, 0, 2), obj('c', 0, 0, 3)];
    for (const m of [a, b, c]) order.add(m);
    order.park(b);
    expect([drain(order, 20), order.size, b.listed]).toEqual([['a', 'c'], 2, false]);
    order.add(b); // e.g. an upsert's end: still waiting for the copy
    order.touch(b);
    expect(drain(order, 20)).toEqual(['a', 'c']);
    order.unpark(b); // the copy ended: the next to go, before older candidates
    expect(drain(order, 20)).toEqual(['b', 'a', 'c']);
    order.unpark(b); // not parked: no-op
    expect(order.size).toBe(3);
  });

  it('lets the caller delete each victim before asking for the next', () => {
    const order = new EvictionOrder();
    for (const k of ['a', 'b', 'c']) order.add(obj(k));
    const c = order.cursor(5, policy, 10);
    const seen: string[] = [];
    for (let m = c.next(); m !== null; m = c.next()) {
      seen.push(m.key);
      order.remove(m);
    }
    expect(seen).toEqual(['a', 'b', 'c']);
    expect(order.size).toBe(0);
  });

  it('skips a bounded number of entries, and then leaves soft-pinned objects alone', () => {
    const order = new EvictionOrder();
    for (let i = 0; i < 20; i++) order.add(obj(`leased-${i}`, 0, 1000));
    order.add(obj('soft', FLAG_SOFT_PIN, 0, 50));
    order.add(obj('late'));
    const capped = order.cursor(100, policy, 5);
    expect(capped.next()).toBeNull();
    expect(capped.capped).toBe(true);
    expect(drain(order, 100, policy, 25)).toEqual(['late', 'soft']);
  });

  it('targets the eviction ratio of the objects, at least one', () => {
    expect(evictionTarget(1000, 0.05)).toBe(50);
    expect(evictionTarget(3, 0.05)).toBe(1);
    expect(evictionTarget(0, 0.05)).toBe(1);
  });
});

describe('selectZombies', () => {
  it('returns writes older than the release timeout, oldest first, at most `limit`', () => {
    const inFlight = new Map([
      ['old', obj('old', 0, 0, 0, ReplicaStatus.INITIALIZED)],
      ['older-too', obj('older-too', 0, 0, 10, ReplicaStatus.INITIALIZED)],
      ['young', obj('young', 0, 0, 500, ReplicaStatus.INITIALIZED)],
    ]);
    expect(selectZombies(inFlight, 400, 300).map((m) => m.key)).toEqual(['old', 'older-too']);
    expect(selectZombies(inFlight, 400, 300, 1).map((m) => m.key)).toEqual(['old']);
    expect(selectZombies(inFlight, 300, 300)).toEqual([]);
  });
});
