// Whole-table answers of the management HTTP endpoints (/get_all_keys, /get_all_segments,
// /get_segments_detail) in bounded steps. A listing is never built whole: at most STEP_ITEMS
// items are taken from the table per step and at most about CHUNK_BYTES are written per step;
// after each step the event loop runs other work (RPCs, heartbeats) before the next, and while
// the response's buffer is full (a slow reader) no step runs until it drains. A page
// (?limit=N&after=KEY) walks the table in the same steps, keeping only the page in memory.
//
// Consistency: the table changes while a listing runs. An item present for the whole listing is
// listed exactly once; one added or removed meanwhile may or may not be listed (like Redis SCAN).
import type { ServerResponse } from 'node:http';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { PageCollector } from './page-collector.js';

/** Items taken from the table per step. */
export const STEP_ITEMS = 4096;
/** Bytes of output gathered before they are written (then the step ends). */
export const CHUNK_BYTES = 64 * 1024;
/** Largest page a caller may ask for (the page is held in memory while the table is walked). */
export const MAX_PAGE_LIMIT = 10_000;
/** Page size when `after` is given without `limit`. */
export const DEFAULT_PAGE_LIMIT = 1000;

/** Resolves once `res` may take more data: at once, on 'drain', or when the connection is gone. */
function writable(res: ServerResponse): Promise<void> | undefined {
  if (!res.writableNeedDrain) return undefined;
  return new Promise((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

function gone(res: ServerResponse): boolean {
  return res.destroyed || res.writableEnded;
}

/**
 * Writes the `items` (each turned into text by `format`, joined by `separator`) between `head`
 * and `tail`, in bounded steps, and ends the response. Headers must be set by the caller; a HEAD
 * request gets none of the body. Stops early when the client goes away.
 */
export async function streamItems<T>(
  res: ServerResponse,
  items: Iterable<T>,
  format: (item: T) => string,
  opts: { head?: string; separator?: string; tail?: (count: number) => string } = {},
): Promise<void> {
  if (res.req?.method === 'HEAD') {
    res.end();
    return;
  }
  const separator = opts.separator ?? '';
  let count = 0;
  let out = opts.head ?? '';
  const it = items[Symbol.iterator]();
  try {
    for (;;) {
      let taken = 0;
      let done = false;
      while (taken < STEP_ITEMS && out.length < CHUNK_BYTES) {
        const r = it.next();
        if (r.done) {
          done = true;
          break;
        }
        taken++;
        out += (count++ === 0 ? '' : separator) + format(r.value);
      }
      if (done) {
        res.end(out + (opts.tail ? opts.tail(count) : ''));
        return;
      }
      if (out.length > 0) res.write(out);
      out = '';
      // a full buffer waits for the reader; otherwise other work runs before the next step
      await (writable(res) ?? nextTurn());
      if (gone(res)) return;
    }
  } finally {
    it.return?.();
  }
}

/**
 * The page of `items` after `after` (sorted, at most `limit`), found by walking them in bounded
 * steps; undefined when the client went away meanwhile.
 */
export async function collectPage(res: ServerResponse, items: Iterable<string>, after: string | undefined, limit: number): Promise<{ items: string[]; more: boolean } | undefined> {
  const page = new PageCollector(after, limit);
  const it = items[Symbol.iterator]();
  try {
    for (;;) {
      for (let taken = 0; taken < STEP_ITEMS; taken++) {
        const r = it.next();
        if (r.done) return page.result();
        page.offer(r.value);
      }
      await nextTurn();
      if (gone(res)) return undefined;
    }
  } finally {
    it.return?.();
  }
}

/** The paging parameters of a listing request: none (stream everything), a page, or a reason for a 400. */
export function pageParams(params: URLSearchParams): { page: false } | { page: true; after: string | undefined; limit: number } | { error: string } {
  const limitText = params.get('limit');
  const after = params.get('after') ?? undefined;
  if (limitText === null && after === undefined) return { page: false };
  let limit = DEFAULT_PAGE_LIMIT;
  if (limitText !== null) {
    limit = /^\d+$/.test(limitText) ? Number(limitText) : NaN;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_PAGE_LIMIT) return { error: `limit must be an integer from 1 to ${MAX_PAGE_LIMIT}, got "${limitText}"` };
  }
  return { page: true, after, limit };
}
