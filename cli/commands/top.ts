// `store top`: scrapes the master's /metrics every --interval (1 s) and shows top-frame.ts's view.
// On a terminal the frame is redrawn in place until q, Ctrl-C or SIGTERM; with --once or when
// stdout is not a terminal, one frame is printed: two scrapes one interval apart, so it has rates.
import { durationMs } from '../args.js';
import { write, type CliContext } from '../context.js';
import { masterHttp } from '../endpoints.js';
import { getText } from '../http.js';
import { jsonDoc } from '../output.js';
import { parsePromText } from '../../common/prom-text.js';
import { renderTop, topStats, type Scrape } from '../top-frame.js';

const CLEAR = '\x1b[H\x1b[2J';

function wait(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done(): void {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done);
  });
}

export async function top(ctx: CliContext): Promise<void> {
  const { inv } = ctx;
  const intervalMs = inv.options.interval === undefined ? 1000 : durationMs('--interval', inv.options.interval as string, 100);
  const base = await masterHttp(inv.global, ctx.env);
  const scrape = async (): Promise<Scrape> => {
    const text = await getText(`${base}/metrics`, { timeoutMs: inv.global.timeoutMs, peer: 'master' });
    return { samples: parsePromText(text), atMs: performance.now() };
  };
  const clock = (): string => new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const live = inv.options.once !== true && ctx.stdout.isTTY === true && !inv.global.json;

  if (!live) {
    const first = await scrape();
    await wait(intervalMs, new AbortController().signal);
    const st = topStats(await scrape(), first);
    return write(ctx.stdout, inv.global.json ? jsonDoc({ master_http: base, ...st }) : renderTop(st, base, clock()));
  }

  const stop = new AbortController();
  const onSignal = (): void => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const stdin = ctx.stdin;
  const onKey = (d: Buffer): void => {
    if (d.includes(0x71) || d.includes(0x03)) stop.abort(); // q or Ctrl-C in raw mode
  };
  const raw = stdin.isTTY === true && typeof (stdin as NodeJS.ReadStream).setRawMode === 'function';
  if (raw) {
    (stdin as NodeJS.ReadStream).setRawMode(true);
    stdin.on('data', onKey);
    stdin.resume();
  }
  try {
    let prev: Scrape | undefined;
    while (!stop.signal.aborted) {
      const cur = await scrape();
      await write(ctx.stdout, CLEAR + renderTop(topStats(cur, prev), base, clock()) + '\n(q to quit)\n');
      prev = cur;
      await wait(intervalMs, stop.signal);
    }
  } finally {
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
    if (raw) {
      stdin.removeListener('data', onKey);
      (stdin as NodeJS.ReadStream).setRawMode(false);
      stdin.pause();
    }
  }
}
