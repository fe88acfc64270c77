// The injected random source of the master core, and a small seeded generator (mulberry32) so
// placement decisions replay exactly in tests. The shell may pass any Rng, e.g. one over Math.random.

/** A source of uniformly distributed numbers in [0, 1). */
export interface Rng {
  next(): number;
}

/** Deterministic 32-bit generator (mulberry32): same seed, same sequence. Not cryptographic. */
export class SeededRng implements Rng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
}

/** Uniform integer in [0, n). */
export function randomIndex(rng: Rng, n: number): number {
  const i = Math.floor(rng.next() * n);
  return i >= n ? n - 1 : i;
}

/** A version-4 UUID text drawn from rng (used for segment ids the client did not supply). */
export function randomUuid(rng: Rng): string {
  let hex = '';
  for (let i = 0; i < 32; i++) {
    let nibble = randomIndex(rng, 16);
    if (i === 12) nibble = 4;
    else if (i === 16) nibble = 8 | (nibble & 3);
    hex += nibble.toString(16);
  }
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(text: string): boolean {
  return UUID_RE.test(text);
}
