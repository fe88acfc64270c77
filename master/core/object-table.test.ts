import { ObjectMeta } from './object-meta.js';
import { keyHash, ObjectTable } from './object-table.js';

const meta = (key: string): ObjectMeta => ObjectMeta.create([], 1, 0, 0, 0, key);

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

  it('spreads the growth of its shards over a wide range of sizes (no burst of rehashes)', () => {
    const t = new ObjectTable();
    // for one doubling (to `cap` slots per shard): table size when the first shard reached it
    // and when the last one did
    const cap = 8192;
    let first = 0;
    let last = 0;
    for (let i = 1; i <= 300_000 && last === 0; i++) {
      const k = `model/layer/block-${i}`;
      t.set(k, meta(k));
      if ((i & 63) !== 0) continue;
      const grown = t.shardCapacities().filter((c) => c >= cap).length;
      if (grown > 0 && first === 0) first = i;
      if (grown === 32) last = i;
    }
    expect(first).toBeGreaterThan(0);
    expect(last).toBeGreaterThan(0);
    // one load limit for all shards put every growth within a few percent of the same size
    expect(last / first).toBeGreaterThan(1.4);
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

  it('stays a Map through deletes, re-inserts and growth (tombstones reused and cleared)', () => {
    const t = new ObjectTable(7);
    const ref = new Map<string, ObjectMeta>();
    let x = 12345;
    const next = (): number => (x = (Math.imul(x, 1103515245) + 12345) >>> 0);
    for (let step = 0; step < 60_000; step++) {
      const k = `key-${next() % 5000}`;
      const r = next() % 3;
      if (r === 0) {
        expect(t.delete(k)).toBe(ref.delete(k));
      } else {
        const m = meta(k);
        t.set(k, m);
        ref.set(k, m);
      }
      if (step % 997 === 0) expect(t.get(k)).toBe(ref.get(k));
    }
    expect(t.size).toBe(ref.size);
    for (const [k, m] of ref) expect(t.get(k)).toBe(m);
    expect(new Map([...t])).toEqual(ref);
    expect(t.get('key-absent')).toBeUndefined();
  });

  it('refuses an entry whose meta carries another key (lookups compare meta.key)', () => {
    const t = new ObjectTable();
    expect(() => t.set('a', meta('b'))).toThrow(/meta.key "b" is not the key "a"/);
    expect(t.size).toBe(0);
  });

  it('getMany answers as get() per key: present, absent, non-string, batches past the scratch size', () => {
    const t = new ObjectTable(3);
    for (let i = 0; i < 20_000; i += 2) t.set(`k${i}`, meta(`k${i}`));
    for (const n of [0, 1, 128, 5000]) {
      const keys: unknown[] = Array.from({ length: n }, (_, i) => (i % 97 === 5 ? 42 : `k${(i * 7) % 20_000}`));
      const out: (ObjectMeta | undefined)[] = [meta('stale')];
      t.getMany(keys, out);
      expect(out.slice(0, n)).toEqual(keys.map((k) => (typeof k === 'string' ? t.get(k) : undefined)));
      if (n > 0) expect(out.filter((m) => m !== undefined).length).toBeGreaterThan(0);
    }
  });

  it('tells apart two keys whose whole 32-bit hashes are equal (get, getMany, delete)', () => {
    const seed = 11;
    const seen = new Map<number, string>();
    let pair: [string, string] | undefined;
    for (let i = 0; pair === undefined; i++) {
      const k = `collide-${i}`;
      const h = keyHash(k, seed);
      const other = seen.get(h);
      if (other !== undefined) pair = [other, k];
      else seen.set(h, k);
    }
    const [a, b] = pair;
    const t = new ObjectTable(seed);
    const ma = meta(a);
    t.set(a, ma);
    expect(t.get(b)).toBeUndefined();
    const out: (ObjectMeta | undefined)[] = [];
    t.getMany([b, a], out);
    expect(out).toEqual([undefined, ma]);
    const mb = meta(b);
    t.set(b, mb);
    t.getMany([b, a], out);
    expect(out[0]).toBe(mb);
    expect(out[1]).toBe(ma);
    expect(t.delete(a)).toBe(true);
    expect(t.get(a)).toBeUndefined();
    expect(t.get(b)).toBe(mb);
    expect(t.size).toBe(1);
  });
});
