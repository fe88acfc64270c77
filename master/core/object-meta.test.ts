import { ObjectMeta } from './object-meta.js';

describe('ObjectMeta times', () => {
  it('keep every value a monotonic clock can give, past 2^31 ms and fractional ones too', () => {
    const meta = ObjectMeta.create([1, 0, 64], 1, 0, 0, 0, 'k');
    for (const t of [0, -1, 1, 2 ** 30 - 1, 2 ** 30, 2 ** 31 - 1, 2 ** 31 + 5, 3 * 2 ** 30 + 7, 2 ** 40 + 123, 1.5, 2 ** 33 + 0.25]) {
      meta.leaseUntil = t;
      meta.lastAccess = t + 1;
      expect(meta.leaseUntil).toBe(t);
      expect(meta.lastAccess).toBe(t + 1);
    }
    expect(ObjectMeta.create([1, 0, 64], 1, 0, 2 ** 35 + 9, 2 ** 31, 'k')).toMatchObject({ leaseUntil: 2 ** 35 + 9, lastAccess: 2 ** 31 });
  });

  it('compare as the numbers they stand for across a period boundary', () => {
    const meta = ObjectMeta.create([1, 0, 64], 1, 0, 2 ** 30 + 10, 2 ** 30 - 10, 'k');
    expect(meta.leased(2 ** 30 + 9)).toBe(true);
    expect(meta.leased(2 ** 30 + 10)).toBe(false);
    expect(meta.lastAccess < 2 ** 30).toBe(true);
  });
});
