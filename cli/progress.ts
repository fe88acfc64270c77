// The progress bar of `store put`/`store get` on stderr: one line redrawn in place (carriage
// return), only when stderr is a terminal and the value is large; nothing at all on a pipe or a
// file, so scripts see clean output. Hand-written (about 40 lines) rather than a dependency: one
// line with a phase, a bar, bytes and a rate is all it does. renderBar is pure.
import { formatSize } from '../common/size.js';

/** Values from this size on get a bar. */
export const PROGRESS_MIN_BYTES = 8 * 1024 * 1024;
const REDRAW_MS = 100;

/** One line: `reading  [#########.........]  45%  450.00 MB / 1.00 GB  1.20 GB/s` (total 0: no bar). */
export function renderBar(phase: string, done: number, total: number, elapsedMs: number, width = 30): string {
  const speed = elapsedMs > 0 && done > 0 ? `  ${formatSize(Math.round((done * 1000) / elapsedMs))}/s` : '';
  // total 0: not known yet (stdin), bytes and rate only
  if (total <= 0) return `${phase.padEnd(8)} ${formatSize(done)}${speed}`;
  const frac = Math.min(1, done / total);
  const filled = Math.round(frac * width);
  const bar = '#'.repeat(filled) + '.'.repeat(width - filled);
  const pct = `${Math.floor(frac * 100)}%`.padStart(4);
  return `${phase.padEnd(8)} [${bar}] ${pct}  ${formatSize(done)} / ${formatSize(total)}${speed}`;
}

export interface ProgressSink {
  isTTY?: boolean;
  columns?: number;
  write(s: string): unknown;
}

export class Progress {
  private phase = '';
  private started = 0;
  private lastDraw = -Infinity;
  private shown = false;

  /** Draws only when `enabled` (not --quiet, a large value) and `out` is a terminal. */
  constructor(
    private readonly out: ProgressSink,
    private readonly enabled: boolean,
    private readonly now: () => number = () => performance.now(),
  ) {}

  get active(): boolean {
    return this.enabled && this.out.isTTY === true;
  }

  /** Starts a phase ("reading", "storing", "fetching", "writing"): its bytes count from 0; total 0 = unknown. */
  start(phase: string, total: number): void {
    this.phase = phase;
    this.started = this.now();
    this.lastDraw = -Infinity;
    if (total > 0) this.update(0, total); // an unknown total shows once bytes come
  }

  update(done: number, total: number): void {
    if (!this.active) return;
    const t = this.now();
    const end = total > 0 && done >= total; // always drawn
    if (!end && t - this.lastDraw < REDRAW_MS) return;
    this.lastDraw = t;
    const line = renderBar(this.phase, done, total, t - this.started);
    const cols = this.out.columns || 100; // 0 on a terminal of unknown width
    this.out.write(`\r${line.slice(0, Math.max(20, cols - 1))}\x1b[K`);
    this.shown = true;
  }

  /** Clears the line (before a result or an error is printed). */
  done(): void {
    if (this.shown) this.out.write('\r\x1b[K');
    this.shown = false;
  }
}
