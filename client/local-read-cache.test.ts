import { LocalReadCache } from './local-read-cache.js';
import type { LocalReplica__Output } from '../proto/gen/store/LocalReplica.js';

function local(leaseLeftMs: number, lengths = [4096]): LocalReplica__Output {
  return {
    slices: lengths.map((length, i) => ({ te_endpoint: '127.0.0.1:7000', address: 1 << (20 + i), length, incarnation: 5, crc32c: i })),
    lease_left_us: leaseLeftMs * 1000,
    checksums: true,
  };
}

function cache(max = 10) {
  const clock = { t: 1000 };
  return { clock, c: new LocalReadCache(max, () => clock.t) };
}

describe('LocalReadCache', () => {
  it('reuses a location until send time + half the lease left, and bounds a copy by send time + all of it', () => {
    const { clock, c } = cache();
    const t = c.begin(); // sent at 1000
    clock.t = 1300; // the reply comes later: its lease time counts from our send time
    c.end('k', t, local(2000, [100, 28]));
    expect(c.lookup('k')).toMatchObject({ size: 128, reuseUntil: 2000, deadline: 3000, checksums: true });
    clock.t = 1999;
    expect(c.lookup('k')).toBeDefined();
    clock.t = 2000;
    expect(c.lookup('k')).toBeUndefined();
    expect(c.size).toBe(0);
  });

  it('keeps nothing from a reply without a location, with a lease already half gone, or malformed', () => {
    const { clock, c } = cache();
    c.end('none', c.begin(), null);
    c.end('zero', c.begin(), local(0));
    c.end('empty', c.begin(), local(1000, []));
    c.end('bad', c.begin(), local(1000, [4096, 0]));
    const late = c.begin();
    clock.t += 600;
    c.end('late', late, local(1000)); // half of it (500 ms) passed before the reply came
    expect(c.size).toBe(0);
  });

  it('a drop of the key while its read is in flight voids that read', () => {
    const { c } = cache();
    const before = c.begin();
    c.forget('k'); // our own write or removal of k
    const after = c.begin();
    c.end('k', before, local(1000));
    expect(c.lookup('k')).toBeUndefined();
    c.end('k', after, local(1000)); // sent after the drop: kept
    expect(c.lookup('k')).toBeDefined();
  });

  it('clear() drops every entry and voids every read in flight', () => {
    const { c } = cache();
    c.end('a', c.begin(), local(1000));
    const inFlight = c.begin();
    c.clear();
    c.end('b', inFlight, local(1000));
    expect(c.lookup('a')).toBeUndefined();
    expect(c.lookup('b')).toBeUndefined();
    c.end('b', c.begin(), local(1000));
    expect(c.lookup('b')).toBeDefined();
  });

  it('holds at most maxEntries, dropping the oldest; 0 keeps nothing', () => {
    const { c } = cache(2);
    for (const k of ['a', 'b', 'c']) c.end(k, c.begin(), local(1000));
    expect([c.lookup('a'), c.lookup('b'), c.lookup('c')].map((e) => e !== undefined)).toEqual([false, true, true]);
    const { c: none } = cache(0);
    none.end('a', none.begin(), local(1000));
    expect(none.size).toBe(0);
  });

  it('drops expired entries from the old end as new ones come, without waiting for the bound', () => {
    const { clock, c } = cache(1000);
    for (let i = 0; i < 64; i++) c.end(`old-${i}`, c.begin(), local(1000));
    clock.t += 600; // past their reuse (half of 1000 ms)
    for (let i = 0; i < 64; i++) c.end(`new-${i}`, c.begin(), local(1000));
    expect(c.size).toBe(64); // each 32 kept, up to 32 expired ones went
    expect(c.lookup('new-0')).toBeDefined();
  });

  it('keeps every field of many entries as it grows, entries of several slices included', () => {
    const { c } = cache(5000);
    const many = (i: number): LocalReplica__Output => ({
      slices: (i % 7 === 0 ? [100, 28] : [4096]).map((length, j) => ({
        te_endpoint: `127.0.0.1:${7000 + (i % 3)}`,
        address: i * 8192 + j * 100,
        length,
        incarnation: i,
        crc32c: i + j,
      })),
      lease_left_us: 1_000_000,
      checksums: i % 2 === 0,
    });
    for (let i = 0; i < 3000; i++) c.end(`k${i}`, c.begin(), many(i));
    expect(c.size).toBe(3000);
    for (const i of [0, 1, 255, 256, 257, 1023, 1024, 2999]) {
      const e = c.lookup(`k${i}`)!;
      const m = many(i).slices;
      expect(e).toMatchObject({
        endpoint: m[0].te_endpoint,
        address: m[0].address,
        length: m[0].length,
        incarnation: i,
        crc: i,
        checksums: i % 2 === 0,
        size: i % 7 === 0 ? 128 : 4096,
      });
      if (i % 7 === 0) {
        expect(e.slices).toEqual(m.map((s) => ({ endpoint: s.te_endpoint, address: s.address, length: s.length, incarnation: s.incarnation, crc: s.crc32c })));
      } else {
        expect(e.slices).toBeUndefined();
      }
    }
  });

  it('a key kept again counts as young: the bound drops the older keys first', () => {
    const { c } = cache(3);
    for (const k of ['a', 'b', 'a', 'c', 'd']) c.end(k, c.begin(), local(1000));
    expect(['a', 'b', 'c', 'd'].map((k) => c.lookup(k) !== undefined)).toEqual([true, false, true, true]);
    expect(c.size).toBe(3);
  });

  it('entries dropped by forget() or expiry free their places for new ones', () => {
    const { clock, c } = cache(4);
    for (const k of ['a', 'b', 'c', 'd']) c.end(k, c.begin(), local(1000));
    c.forget('b');
    c.end('e', c.begin(), local(1000));
    expect(['a', 'c', 'd', 'e'].map((k) => c.lookup(k) !== undefined)).toEqual([false, true, true, true]); // the bound took a, the oldest
    clock.t += 600;
    expect(c.lookup('c')).toBeUndefined();
    for (const k of ['f', 'g', 'h', 'i']) c.end(k, c.begin(), local(1000));
    expect(c.size).toBe(4);
    expect(['f', 'g', 'h', 'i'].every((k) => c.lookup(k) !== undefined)).toBe(true);
  });
});
