// Duration parsing for flags and settings: "5000ms", "5s", "30m", "1h", "1.5s", or a bare number
// taken in the caller's unit (ms for the *_ttl flags, seconds for --client_ttl and *_sec flags).
// Results are whole milliseconds.

export type DurationUnit = 'ms' | 's';

const unitMs: Record<string, number> = {
  ms: 1,
  s: 1000,
  sec: 1000,
  m: 60_000,
  min: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

const pattern = /^([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)$/;

/**
 * Parses `text` into milliseconds. Throws an Error naming the accepted forms when it is malformed
 * or negative. `bareUnit` is the unit of a number given without a suffix.
 */
export function parseDuration(text: string, bareUnit: DurationUnit): number {
  const m = pattern.exec(text.trim().toLowerCase());
  if (!m) {
    throw new Error(`invalid duration "${text}": expected a non-negative number with an optional unit (ms, s, m, h, d), e.g. 5000ms, 5s, 30m, 1h`);
  }
  const unit = m[2] === '' ? bareUnit : m[2];
  const factor = unitMs[unit];
  if (factor === undefined) {
    throw new Error(`invalid duration "${text}": unknown unit "${m[2]}" (accepted: ms, s, m, h, d)`);
  }
  const ms = Number(m[1]) * factor;
  if (!Number.isFinite(ms) || ms > Number.MAX_SAFE_INTEGER) {
    throw new Error(`invalid duration "${text}": too large`);
  }
  return Math.round(ms);
}

/** "1500" -> "1.5s", "90000" -> "1.5m": for logs and docs. */
export function formatDuration(ms: number): string {
  if (ms % 3_600_000 === 0 && ms !== 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0 && ms !== 0) return `${ms / 60_000}m`;
  if (ms % 1000 === 0 && ms !== 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}
