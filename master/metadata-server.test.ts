import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { createMetadataServer, MetadataStore } from './metadata-server.js';

describe('MetadataStore', () => {
  it('holds at most maxBytes of keys and values; a refused put changes nothing', () => {
    const store = new MetadataStore(20);
    expect(store.put('a', Buffer.alloc(9))).toBe(true); // 10 bytes
    expect(store.put('b', Buffer.alloc(9))).toBe(true); // 20
    expect(store.put('c', Buffer.alloc(1))).toBe(false);
    expect(store.get('c')).toBeUndefined();
    expect(store.bytes).toBe(20);
    // replacing a record counts the difference; a smaller one always fits
    expect(store.put('a', Buffer.alloc(10))).toBe(false);
    expect(store.get('a')!.length).toBe(9);
    expect(store.put('a', Buffer.alloc(3))).toBe(true);
    expect(store.bytes).toBe(14);
    expect(store.delete('b')).toBe(true);
    expect(store.delete('b')).toBe(false);
    expect(store.bytes).toBe(4);
  });
});

describe('metadata server', () => {
  it('answers 507 when the store is full, keeping what it holds', async () => {
    const server = createMetadataServer(new MetadataStore(64)).listen(0, '127.0.0.1');
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
});
