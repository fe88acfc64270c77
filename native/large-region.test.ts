// Regions past 4 GiB: a sparse 64 GiB memfd maps without touching its pages, JS reaches both ends
// through windows, a transfer engine moves bytes at both ends of a 4.5 GiB region, and a size the
// kernel refuses is a MemoryError (the process lives on). Node 20's TypedArrays span at most 4 GiB,
// so region.view(offset, length) is how JS touches such a region.
import { createHash, randomFillSync } from 'node:crypto';
import { mapMemory, MemoryError, TransferEngine } from './index.js';
import { ensureAddon } from './test-fixtures/ensure-addon.js';
import { residentKb } from './test-fixtures/resident.js';

beforeAll(() => ensureAddon());

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

test('a sparse 64 GiB memfd maps, both ends are reachable through windows, and nothing else is touched', () => {
  const r = mapMemory({ size: 64 * GiB });
  try {
    expect(r.size).toBe(64 * GiB);
    expect(r.buffer.byteLength).toBe(64 * GiB);
    const head = r.view(0, 4096);
    const tail = r.view(r.size - 4096, 4096);
    head.fill(0xa1);
    tail.fill(0xb2);
    expect(r.view(0, 4096).every((b) => b === 0xa1)).toBe(true);
    expect(r.view(r.size - 1, 1)[0]).toBe(0xb2);
    expect(residentKb(r.address)).toBeLessThanOrEqual(64); // two pages, not 64 GiB
    expect(() => r.view(r.size - 10, 11)).toThrow(MemoryError);
    expect(() => r.view(-1, 1)).toThrow(MemoryError);
  } finally {
    r.release();
  }
  expect(r.buffer.byteLength).toBe(0); // detached on release
  expect(() => r.view(0, 1)).toThrow(/released/);
});

test('a transfer engine reads and writes at both ends of a 4.5 GiB region', async () => {
  const big = mapMemory({ size: 4.5 * GiB });
  const local = mapMemory({ size: 8 * MiB });
  const server = new TransferEngine({ minPort: 20000, maxPort: 32000, shmTransport: false, env: {} });
  const client = new TransferEngine({ minPort: 20000, maxPort: 32000, shmTransport: false, env: {} });
  try {
    server.start();
    client.start();
    server.registerRegion(big.address, big.size);
    client.registerRegion(local.address, local.size);
    const src = local.view(0, 2 * MiB);
    randomFillSync(src);
    const ends = [0, big.size - 2 * MiB, 4 * GiB - MiB]; // first bytes, last bytes, across the 4 GiB line
    for (const off of ends) {
      await client.transfer([{ op: 'write', endpoint: server.endpoint, remoteAddress: big.address + off, localAddress: local.address, length: 2 * MiB }]);
      expect(sha(big.view(off, 2 * MiB))).toBe(sha(src));
      const back = local.view(4 * MiB, 2 * MiB);
      back.fill(0);
      await client.transfer([{ op: 'read', endpoint: server.endpoint, remoteAddress: big.address + off, localAddress: local.address + 4 * MiB, length: 2 * MiB }]);
      expect(sha(back)).toBe(sha(src));
    }
    // One byte past the end is refused, nothing moves.
    await expect(
      client.transfer([{ op: 'read', endpoint: server.endpoint, remoteAddress: big.address + big.size - MiB, localAddress: local.address, length: MiB + 1 }]),
    ).rejects.toMatchObject({ code: 'ADDRESS_OUT_OF_RANGE' });
  } finally {
    client.close();
    server.close();
    local.release();
    big.release();
  }
});

test('a size the kernel refuses is a MemoryError, not an abort', () => {
  // 2^52 bytes: past what memfd's ftruncate or mmap accepts on any machine (the address space is 2^47).
  expect(() => mapMemory({ size: 2 ** 52 })).toThrow(expect.objectContaining({ code: 'MAP_FAILED' }));
  expect(() => mapMemory({ kind: 'anonymous', size: 2 ** 52, env: {} })).toThrow(MemoryError);
  const after = mapMemory({ size: MiB }); // the process is fine
  after.view(0, 16).fill(1);
  after.release();
});
