// The management HTTP server's whole-table answers over a real loopback socket, with a core port
// whose table is a generator that checks, at every item the server takes, how much the server
// has queued for the client: a listing must follow the reader, never run ahead of it.
import { connect, type AddressInfo, type Socket } from 'node:net';
import type { Server, ServerResponse } from 'node:http';
import { createAdminServer } from './http-admin.js';
import type { MasterCorePort } from './core-port.js';
import type { MasterMetrics } from './master-metrics.js';
import { CHUNK_BYTES, MAX_PAGE_LIMIT } from './http-listing.js';

/** Bytes the server may hold for a slow reader: the response's buffer (16 KiB) and one chunk written past it, with room. */
const QUEUED_LIMIT = 4 * CHUNK_BYTES;

function keyOf(i: number): string {
  return `model-7b/layer-${i % 80}/block-${String(i).padStart(7, '0')}/${'x'.repeat(80)}`;
}

interface Fixture {
  server: Server;
  port: number;
  /** The response of the listing in progress (captured from the server's request event). */
  listing: () => ServerResponse | undefined;
  pulled: () => number;
  maxQueued: () => number;
}

async function start(keys: number, segments: string[] = []): Promise<Fixture> {
  let pulled = 0;
  let maxQueued = 0;
  let listing: ServerResponse | undefined;
  const queued = (): number => listing?.socket?.writableLength ?? 0;
  const core = {
    *allKeys() {
      for (let i = 0; i < keys; i++) {
        pulled++;
        maxQueued = Math.max(maxQueued, queued());
        yield keyOf(i);
      }
    },
    segmentNames: () => segments,
    segmentsDetail: () => [],
  } as unknown as MasterCorePort;
  const server = createAdminServer({ core, metrics: {} as MasterMetrics, now: () => 0, info: () => ({}) });
  server.on('request', (req, res) => {
    if (req.url?.startsWith('/get_all_keys')) listing = res;
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port, listing: () => listing, pulled: () => pulled, maxQueued: () => Math.max(maxQueued, queued()) };
}

/** A raw HTTP/1.1 GET whose reading the test controls; `body()` resolves with the de-chunked body once the server ends it. */
function rawGet(port: number, path: string): { socket: Socket; received: () => number; firstData: Promise<void>; done: Promise<{ head: string; body: string }> } {
  const socket = connect(port, '127.0.0.1', () => socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`));
  const parts: Buffer[] = [];
  let received = 0;
  const firstData = new Promise<void>((r) => socket.once('data', () => r()));
  socket.on('data', (d: Buffer) => {
    parts.push(d);
    received += d.length;
  });
  const done = new Promise<{ head: string; body: string }>((resolve, reject) => {
    socket.on('error', reject);
    socket.on('end', () => {
      const all = Buffer.concat(parts).toString('utf8');
      const at = all.indexOf('\r\n\r\n');
      const head = all.slice(0, at);
      let rest = all.slice(at + 4);
      if (!/transfer-encoding: chunked/i.test(head)) return resolve({ head, body: rest });
      let body = '';
      for (;;) {
        const eol = rest.indexOf('\r\n');
        const n = parseInt(rest.slice(0, eol), 16);
        if (n === 0) break;
        // chunk sizes count bytes; the keys here are ASCII
        body += rest.slice(eol + 2, eol + 2 + n);
        rest = rest.slice(eol + 2 + n + 2);
      }
      resolve({ head, body });
    });
  });
  return { socket, received: () => received, firstData, done };
}

async function health(port: number): Promise<string> {
  const r = await fetch(`http://127.0.0.1:${port}/health`);
  return r.text();
}

describe('whole-table HTTP answers', () => {
  const servers: Server[] = [];
  afterAll(async () => {
    for (const s of servers) await new Promise((r) => s.close(r));
  });

  it('/get_all_keys follows a slow reader: the server queues a bounded amount, other requests are served meanwhile, the listing is complete', async () => {
    const n = 150_000; // about 17 MB of listing
    const f = await start(n);
    servers.push(f.server);
    const get = rawGet(f.port, '/get_all_keys');
    await get.firstData;
    get.socket.pause();
    // while the reader sleeps, the server answers other requests, and the listing is still in progress
    for (let i = 0; i < 5; i++) expect(await health(f.port)).toBe('OK');
    expect(f.listing()!.writableEnded).toBe(false);
    expect(f.pulled()).toBeLessThan(n);
    expect(f.maxQueued()).toBeLessThanOrEqual(QUEUED_LIMIT);
    get.socket.resume();
    const { head, body } = await get.done;
    expect(head).toMatch(/^HTTP\/1.1 200/);
    expect(f.maxQueued()).toBeLessThanOrEqual(QUEUED_LIMIT);
    const lines = body.split('\n');
    expect(lines.pop()).toBe('');
    expect(lines).toHaveLength(n);
    for (let i = 0; i < n; i += 997) expect(lines[i]).toBe(keyOf(i));
    expect(lines[n - 1]).toBe(keyOf(n - 1));
  });

  it('pages with ?limit=N&after=KEY in key order, saying whether more follow', async () => {
    const n = 2500;
    const f = await start(n);
    servers.push(f.server);
    const all = Array.from({ length: n }, (_, i) => keyOf(i)).sort();
    const seen: string[] = [];
    let after = '';
    for (let page = 0; ; page++) {
      const r = await fetch(`http://127.0.0.1:${f.port}/get_all_keys?limit=1000${page ? `&after=${encodeURIComponent(after)}` : ''}`);
      expect(r.status).toBe(200);
      const items = (await r.text()).split('\n').filter((l) => l !== '');
      seen.push(...items);
      if (r.headers.get('x-has-more') !== 'true') break;
      after = items[items.length - 1]!;
    }
    expect(seen).toEqual(all);
    const bad = await fetch(`http://127.0.0.1:${f.port}/get_all_keys?limit=${MAX_PAGE_LIMIT + 1}`);
    expect(bad.status).toBe(400);
    expect(await bad.text()).toMatch(/limit must be an integer from 1 to 10000/);
    expect((await fetch(`http://127.0.0.1:${f.port}/get_all_keys?limit=abc`)).status).toBe(400);
    // `after` alone: pages of the default size
    const tail = await fetch(`http://127.0.0.1:${f.port}/get_all_keys?after=${encodeURIComponent(all[n - 3])}`);
    expect((await tail.text()).split('\n').filter((l) => l)).toEqual(all.slice(n - 2));
    expect(tail.headers.get('x-has-more')).toBe('false');
  });

  it('/get_all_segments streams and pages the same way; a HEAD gets no body', async () => {
    const f = await start(0, ['seg-b', 'seg-a', 'seg c,1']);
    servers.push(f.server);
    const all = await fetch(`http://127.0.0.1:${f.port}/get_all_segments`);
    expect(await all.text()).toBe('seg-b\nseg-a\nseg c,1\n');
    const page = await fetch(`http://127.0.0.1:${f.port}/get_all_segments?limit=2`);
    expect(await page.text()).toBe('seg c,1\nseg-a\n');
    expect(page.headers.get('x-has-more')).toBe('true');
    const head = await fetch(`http://127.0.0.1:${f.port}/get_all_keys`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe('');
    expect(f.pulled()).toBe(0);
  });

  it('stops walking the table when the client goes away', async () => {
    const n = 400_000;
    const f = await start(n);
    servers.push(f.server);
    const get = rawGet(f.port, '/get_all_keys');
    await get.firstData;
    const closed = new Promise((r) => f.listing()!.once('close', r));
    get.socket.destroy();
    await closed;
    for (let i = 0; i < 3; i++) expect(await health(f.port)).toBe('OK');
    expect(f.pulled()).toBeLessThan(n);
  });
});
