import { ObjectMeta } from './object-meta.js';
import { ObjectTable } from './object-table.js';

const meta = (key: string): ObjectMeta => new ObjectMeta([], 1, 0, 0, 0, key);

describe('ObjectTable', () => {
  it('behaves as a Map of keys to objects', () => {
    const t = new ObjectTable();
    const ref = new Map<string, ObjectMeta>();
    const keys = Array.from({ length: 3000 }, (_, i) => (i % 3 === 0 ? `model/${'x'.repeat(100)}/block-${i}` : `k${i}`));
    for (const k of keys) {
      const m = meta(k);
      t.set(k, m);
      ref.set(k, m);
    }
    t.set('k1', ref.get('k1')!); // overwriting does not count twice
    expect(t.size).toBe(3000);
    for (const k of keys) expect(t.get(k)).toBe(ref.get(k));
    expect(t.get('absent')).toBeUndefined();
    expect(t.has('k2')).toBe(true);
    expect(t.delete('k2')).toBe(true);
    expect(t.delete('k2')).toBe(false);
    expect(t.has('k2')).toBe(false);
    expect(t.size).toBe(2999);
    const seen = new Map([...t]);
    ref.delete('k2');
    expect(seen).toEqual(ref);
  });

  it('lets the entry just visited be deleted while iterating', () => {
    const t = new ObjectTable();
    for (let i = 0; i < 500; i++) t.set(`k${i}`, meta(`k${i}`));
    let visited = 0;
    for (const [key, m] of t) {
      expect(m.key).toBe(key);
      visited++;
      if (key.endsWith('0')) t.delete(key);
    }
    expect(visited).toBe(500);
    expect(t.size).toBe(450);
    expect([...t].every(([k]) => !k.endsWith('0'))).toBe(true);
  });
});
