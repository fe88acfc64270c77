// Per-key exponential backoff for failed reconciles: base * 2^failures, capped, with jitter from
// an injected random source so many failing objects do not retry in lockstep.

export interface BackoffConfig {
  baseMs: number;
  maxMs: number;
  /** Fraction of the delay added at random (0..1). */
  jitter: number;
}
export const defaultBackoff: BackoffConfig = { baseMs: 1000, maxMs: 300_000, jitter: 0.2 };

export class Backoff {
  private failures = new Map<string, number>();
  constructor(
    private readonly config: BackoffConfig = defaultBackoff,
    private readonly random: () => number = Math.random,
  ) {}

  /** Records a failure of `key` and returns how long to wait before retrying it (ms). */
  fail(key: string): number {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    const delay = Math.min(this.config.maxMs, this.config.baseMs * 2 ** n);
    return Math.round(delay * (1 + this.config.jitter * this.random()));
  }

  succeed(key: string): void {
    this.failures.delete(key);
  }

  failuresOf(key: string): number {
    return this.failures.get(key) ?? 0;
  }
}
