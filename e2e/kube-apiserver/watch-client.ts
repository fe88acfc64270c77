// A minimal watch client for tests: opens `?watch=true` on a collection, parses the JSON-lines
// stream, and lets a test await the first event (or state) matching a predicate instead of
// sleeping. Used by the API server's own tests and the operator e2e tests.

import http from 'node:http';

export interface WatchEventLine {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: Record<string, any>;
}

export class WatchStream {
  readonly events: WatchEventLine[] = [];
  private waiters: Array<{ pred: (e: WatchEventLine) => boolean; resolve: (e: WatchEventLine) => void; reject: (e: Error) => void }> = [];
  private req: http.ClientRequest;
  private ended = false;
  readonly done: Promise<void>;

  /** `path` is a collection path with query, e.g. `/api/v1/namespaces/default/pods?resourceVersion=5`. */
  constructor(baseUrl: string, path: string) {
    const url = new URL(path.includes('watch=') ? path : `${path}${path.includes('?') ? '&' : '?'}watch=true`, baseUrl);
    let resolveDone!: () => void;
    this.done = new Promise((r) => (resolveDone = r));
    this.req = http.get(url, (res) => {
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buf += chunk;
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (line) this.push(JSON.parse(line));
        }
      });
      res.on('end', () => this.finish(resolveDone));
      res.on('error', () => this.finish(resolveDone));
    });
    this.req.on('error', () => this.finish(resolveDone));
  }

  private push(e: WatchEventLine): void {
    this.events.push(e);
    this.waiters = this.waiters.filter((w) => {
      if (!w.pred(e)) return true;
      w.resolve(e);
      return false;
    });
  }

  private finish(resolveDone: () => void): void {
    if (this.ended) return;
    this.ended = true;
    for (const w of this.waiters) w.reject(new Error('watch stream ended before the awaited event'));
    this.waiters = [];
    resolveDone();
  }

  /** Resolves with the first event (already received or future) matching `pred`. */
  next(pred: (e: WatchEventLine) => boolean = () => true, fromIndex = 0): Promise<WatchEventLine> {
    const seen = this.events.slice(fromIndex).find(pred);
    if (seen) return Promise.resolve(seen);
    if (this.ended) return Promise.reject(new Error('watch stream already ended'));
    return new Promise((resolve, reject) => this.waiters.push({ pred, resolve, reject }));
  }

  close(): void {
    this.req.destroy();
  }
}

/**
 * Awaits until an object of the watched collection satisfies `pred`: the watch starts without a
 * resourceVersion, so the current state arrives first as ADDED events, then changes.
 */
export async function waitForObject(
  baseUrl: string,
  collectionPath: string,
  pred: (obj: Record<string, any>, type: WatchEventLine['type']) => boolean,
): Promise<Record<string, any>> {
  const w = new WatchStream(baseUrl, collectionPath);
  try {
    const e = await w.next((ev) => ev.type !== 'BOOKMARK' && ev.type !== 'ERROR' && pred(ev.object, ev.type));
    return e.object;
  } finally {
    w.close();
  }
}
