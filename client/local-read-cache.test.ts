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
});
