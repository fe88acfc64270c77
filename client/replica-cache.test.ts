import { ReplicaCache } from './replica-cache.js';

const res = { status_code: 0, replica_list: [], lease_ttl_ms: 1000, slice_checksums: [], version: 0 };

describe('ReplicaCache', () => {
  it('a key kept again counts as young: the bound drops the older keys first', () => {
    const c = new ReplicaCache(3);
    for (const k of ['a', 'b', 'a', 'c', 'd']) c.remember(k, res, 0);
    expect(['a', 'b', 'c', 'd'].map((k) => c.lookup(k, 1) !== undefined)).toEqual([true, false, true, true]);
    expect(c.size).toBe(3);
  });

  it('expired lists leave from the old end as new ones come, below the bound', () => {
    const c = new ReplicaCache(1000);
    for (let i = 0; i < 100; i++) c.remember(`old-${i}`, res, 0);
    // reused until half the lease (500 ms); 25 lists kept later take up to 4 expired ones each
    for (let i = 0; i < 25; i++) c.remember(`new-${i}`, res, 600);
    expect(c.size).toBe(25);
    expect(c.lookup('new-0', 601)).toBeDefined();
  });

  it('a forgotten key leaves no trace that drops a newer list of it', () => {
    const c = new ReplicaCache(2);
    c.remember('a', res, 0);
    c.forget('a');
    c.remember('b', res, 0);
    c.remember('a', res, 0);
    expect([c.lookup('a', 1), c.lookup('b', 1)].map((e) => e !== undefined)).toEqual([true, true]);
    c.clear();
    expect(c.size).toBe(0);
  });
});
