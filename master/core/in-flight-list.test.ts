import { InFlightList } from './in-flight-list.js';
import { LruList } from './lru-list.js';
import { ObjectMeta } from './object-meta.js';

const meta = (key: string): ObjectMeta => ObjectMeta.create([], 1, 0, 0, 0, key);
const keys = (l: InFlightList): string[] => [...l.values()].map((m) => m.key);

describe('InFlightList', () => {
  it('keeps writes in start order; delete unlinks from anywhere; a second add keeps the place', () => {
    const l = new InFlightList();
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map(meta);
    for (const m of [a, b, c, d]) l.add(m);
    l.add(b);
    expect(keys(l)).toEqual(['a', 'b', 'c', 'd']);
    expect(l.delete(c)).toBe(true);
    expect(l.delete(c)).toBe(false);
    expect(l.delete(a)).toBe(true);
    expect(l.delete(d)).toBe(true);
    expect(keys(l)).toEqual(['b']);
    expect(l.size).toBe(1);
    expect([a, b, c, d].map((m) => l.has(m))).toEqual([false, true, false, false]);
    l.add(a);
    expect(keys(l)).toEqual(['b', 'a']);
  });

  it('lets the write just visited be deleted while walking (zombie release)', () => {
    const l = new InFlightList();
    const all = Array.from({ length: 10 }, (_, i) => meta(`k${i}`));
    for (const m of all) l.add(m);
    const seen: string[] = [];
    for (const m of l.values()) {
      seen.push(m.key);
      if (Number(m.key.slice(1)) % 2 === 0) l.delete(m);
    }
    expect(seen).toHaveLength(10);
    expect(keys(l)).toEqual(['k1', 'k3', 'k5', 'k7', 'k9']);
  });

  it('never takes an object that is on an eviction list (the two share the links)', () => {
    const lru = new LruList();
    const m = meta('x');
    lru.append(m);
    const l = new InFlightList();
    expect(() => l.add(m)).toThrow(/eviction list/);
    expect(l.has(m)).toBe(false);
    expect(l.delete(m)).toBe(false);
    expect([...lru].map((o) => o.key)).toEqual(['x']);
  });
});
