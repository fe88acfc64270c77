// The count-min sketch (count-min-sketch.ts): never under-counts, forgets by halving.
import { CountMinSketch } from './count-min-sketch.js';

describe('count-min sketch', () => {
  it('never counts a key under its true count, and keys seen once stay low in a wide sketch', () => {
    const s = new CountMinSketch(1 << 12);
    for (let i = 0; i < 50; i++) s.add('hot');
    for (let i = 0; i < 1000; i++) s.add(`cold-${i}`);
    expect(s.estimate('hot')).toBeGreaterThanOrEqual(50);
    let over = 0;
    for (let i = 0; i < 1000; i++) if (s.estimate(`cold-${i}`) > 2) over++;
    expect(over).toBeLessThan(20);
    expect(s.estimate('never')).toBeLessThanOrEqual(2);
  });

  it('halves every count when aged (and on its own every width x 10 additions)', () => {
    const s = new CountMinSketch(16);
    for (let i = 0; i < 8; i++) s.add('k');
    s.age();
    expect(s.estimate('k')).toBe(4);
    for (let i = 0; i < 16 * 10; i++) s.add('k'); // crosses the aging period once
    expect(s.estimate('k')).toBeLessThan(4 + 160);
  });

  it('refuses a width that is not a positive integer', () => {
    expect(() => new CountMinSketch(0)).toThrow(RangeError);
  });
});
