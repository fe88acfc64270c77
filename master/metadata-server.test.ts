import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { request } from 'node:http';
import { createMetadataServer, MetadataStore } from './metadata-server.js';

describe('MetadataStore', () => {
  it('holds at most maxBytes of keys and values; a refused put changes nothing', () => {
    const store = new MetadataStore({ maxBytes: 20 });
    expect(store.put('a', Buffer.alloc(9))).toBe('ok'); // 10 bytes
    expect(store.put('b', Buffer.alloc(9))).toBe('ok'); // 20
    expect(store.put('c', Buffer.alloc(1))).toBe('full');
    expect(store.get('c')).toBeUndefined();
    expect(store.bytes).toBe(20);
    // replacing a record counts the difference; a smaller one always fits
    expect(store.put('a', Buffer.alloc(10))).toBe('full');
    expect(store.get('a')!.length).toBe(9);
    expect(store.put('a', Buffer.alloc(3))).toBe('ok');
    expect(store.bytes).toBe(14);
    expect(store.delete('b')).toBe(true);
    expect(store.delete('b')).toBe(false);
    expect(store.bytes).toBe(4);
  });

  it("charges each writer for its records: one writer's quota of bytes or records leaves room for the others", () => {
    const store = new MetadataStore({ maxBytes: 1000, writerBytes: 100, writerRecords: 3 });
    expect(store.put('s1', Buffer.alloc(48), 'A')).toBe('ok'); // 50
    expect(store.put('s2', Buffer.alloc(48), 'A')).toBe('ok'); // 100
    expect(store.put('s3', Buffer.alloc(1), 'A')).toBe('writer_quota');
    expect(store.put('s1', Buffer.alloc(49), 'A')).toBe('writer_quota'); // grows A past its quota
    expect(store.put('s1', Buffer.alloc(10), 'A')).toBe('ok'); // shrinking always fits
    expect(store.usage('A')).toEqual({ bytes: 62, records: 2 });
    expect(store.put('t1', Buffer.alloc(98), 'B')).toBe('ok'); // B is not held back by A
    // Records count too, however small.
    expect(store.put('s3', Buffer.alloc(0), 'A')).toBe('ok');
    expect(store.put('s4', Buffer.alloc(0), 'A')).toBe('writer_quota');
    // A record stored by another writer moves to the last one that wrote it.
    expect(store.put('t1', Buffer.alloc(8), 'A')).toBe('writer_quota'); // A has 3 records already
    expect(store.delete('s3')).toBe(true);
    expect(store.put('t1', Buffer.alloc(8), 'A')).toBe('ok');
    expect(store.usage('B')).toEqual({ bytes: 0, records: 0 });
    expect(store.usage('A')).toEqual({ bytes: 62 + 10, records: 3 });
    expect(store.bytes).toBe(72);
  });
});

/** A PUT from a chosen local address (loopback has 127.0.0.0/8: each address is another writer). */
function put(base: string, key: string, body: string, localAddress: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}?key=${encodeURIComponent(key)}`, { method: 'PUT', localAddress }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('metadata server', () => {
  it('answers 507 when the store is full, keeping what it holds', async () => {
    const server = createMetadataServer(new MetadataStore({ maxBytes: 64 })).listen(0, '127.0.0.1');
    await once(server, 'listening');
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/metadata`;
    try {
      expect((await fetch(`${base}?key=k1`, { method: 'PUT', body: 'x'.repeat(40) })).status).toBe(200);
      const full = await fetch(`${base}?key=k2`, { method: 'PUT', body: 'y'.repeat(40) });
      expect(full.status).toBe(507);
      expect(await full.text()).toMatch(/metadata store full: 42 of 64 bytes held/);
      expect(await (await fetch(`${base}?key=k1`)).text()).toBe('x'.repeat(40));
      expect((await fetch(`${base}?key=k2`)).status).toBe(404);
    } finally {
      server.close();
    }
  });

  it('with the default limits, PUTs from one address cannot fill it: that writer gets 429, another still publishes (issue 14)', async () => {
    const store = new MetadataStore();
    const server = createMetadataServer(store).listen(0, '0.0.0.0');
    await once(server, 'listening');
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/metadata`;
    try {
      const big = 'z'.repeat(1024 * 1024 - 64); // under the per-value limit
      const statuses: number[] = [];
      let refusal = '';
      for (let i = 0; i < 33; i++) {
        const r = await put(base, `junk-${i}`, big, '127.0.0.2');
        statuses.push(r.status);
        if (r.status !== 200) refusal = r.text;
      }
      expect(statuses.filter((s) => s === 200).length).toBe(16); // its 16 MiB
      expect(statuses.slice(16).every((s) => s === 429)).toBe(true);
      expect(refusal).toMatch(/^metadata quota of 127\.0\.0\.2 reached: it holds 16 record\(s\), \d+ bytes \(at most 4096 records, 16777216 bytes per writer address\)/);
      expect(store.bytes).toBeLessThanOrEqual(16 * 1024 * 1024);
      // A store service on another host publishes its segment as usual.
      const segment = JSON.stringify({ te_endpoint: '127.0.0.3:12345', protocol: 'tcp', buffer: 4096, size: 1 << 30 });
      expect((await put(base, '127.0.0.3:12345', segment, '127.0.0.3')).status).toBe(200);
      expect(await (await fetch(`${base}?key=127.0.0.3:12345`)).text()).toBe(segment);
      // Too big for a record at all: 413 before anything is stored.
      expect((await put(base, 'huge', 'h'.repeat(1024 * 1024 + 1), '127.0.0.4')).status).toBe(413);
    } finally {
      server.close();
    }
  });
});
