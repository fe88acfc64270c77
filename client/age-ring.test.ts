import { AgeRing } from './age-ring.js';

describe('AgeRing', () => {
  it('gives pairs back oldest first across growth and wrap-around', () => {
    const r = new AgeRing<number>();
    const seen: [string, number][] = [];
    let next = 0;
    // interleave pushes and shifts so the head wraps before the ring grows
    for (let round = 0; round < 50; round++) {
      for (let i = 0; i < 7; i++) r.push(`k${next}`, next++);
      for (let i = 0; i < 5; i++) {
        seen.push([r.oldestKey!, r.oldestValue!]);
        r.shift();
      }
    }
    while (r.size > 0) {
      seen.push([r.oldestKey!, r.oldestValue!]);
      r.shift();
    }
    expect(seen).toEqual(Array.from({ length: next }, (_, i) => [`k${i}`, i]));
    expect(r.oldestKey).toBeUndefined();
    r.shift(); // nothing to remove: no effect
    expect(r.size).toBe(0);
  });

  it('clear() empties it', () => {
    const r = new AgeRing<string>();
    for (let i = 0; i < 40; i++) r.push(`k${i}`, 'v');
    r.clear();
    expect(r.size).toBe(0);
    r.push('a', 'x');
    expect([r.oldestKey, r.oldestValue]).toEqual(['a', 'x']);
  });
});
