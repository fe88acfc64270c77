// A count-min sketch of string keys: how often each key was seen, approximately (never under,
// sometimes over, by collisions), in fixed memory. The disk tier's promotion gate and the client's
// hot cache admission use it to tell a key read again from one read once. Counts are halved
// (aged) every `width * 10` increments, so a key that was hot long ago does not stay admitted.
// Hand-written: it is four rows of small counters and two string hashes, on the read path of the
// master (no allocation per call), which a general-purpose package would not give.

/** Counts saturate here (the rows are Uint16Array). */
const COUNT_MAX = 0xffff;
const ROWS = 4;

/** FNV-1a over the UTF-16 code units of `s`, seeded. */
function fnv1a(s: string, seed: number): number {
  let h = (0x811c9dc5 ^ seed) >>> 0;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export class CountMinSketch {
  private readonly rows: Uint16Array;
  private readonly mask: number;
  private added = 0;
  private readonly agePeriod: number;

  /** `width`: counters per row, rounded up to a power of two (memory: 4 rows x 2 bytes x width). */
  constructor(width = 1 << 16) {
    if (!Number.isSafeInteger(width) || width < 1) throw new RangeError(`CountMinSketch width must be a positive integer, got ${width}`);
    let w = 1;
    while (w < width) w <<= 1;
    this.mask = w - 1;
    this.rows = new Uint16Array(w * ROWS);
    this.agePeriod = w * 10;
  }

  /** Counts one sighting of `key`; returns its estimated count including this one. */
  add(key: string): number {
    const h1 = fnv1a(key, 0);
    const h2 = fnv1a(key, 0x9e3779b9) | 1;
    const w = this.mask + 1;
    let min = COUNT_MAX;
    for (let r = 0; r < ROWS; r++) {
      const i = r * w + (((h1 + Math.imul(r, h2)) >>> 0) & this.mask);
      const v = this.rows[i] < COUNT_MAX ? ++this.rows[i] : COUNT_MAX;
      if (v < min) min = v;
    }
    if (++this.added >= this.agePeriod) this.age();
    return min;
  }

  /** The estimated count of `key`, without counting. */
  estimate(key: string): number {
    const h1 = fnv1a(key, 0);
    const h2 = fnv1a(key, 0x9e3779b9) | 1;
    const w = this.mask + 1;
    let min = COUNT_MAX;
    for (let r = 0; r < ROWS; r++) {
      const v = this.rows[r * w + (((h1 + Math.imul(r, h2)) >>> 0) & this.mask)];
      if (v < min) min = v;
    }
    return min;
  }

  /** Halves every count (the sketch forgets old popularity). */
  age(): void {
    for (let i = 0; i < this.rows.length; i++) this.rows[i] >>>= 1;
    this.added = 0;
  }
}
