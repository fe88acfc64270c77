// The same-host shm transport fills in page tables of a peer's mapping only where transfers go
// (native/src/shm_peer.cc, GrantMapping::PopulateWindows): once per 2 MiB window a chunk lands
// in, never for the peer's whole segment when the grant comes. Populating all of it made the
// first transfer to every peer wait ~0.15 ms per MiB the peer held (a 1.5 GiB segment: over
// 200 ms; the bench:sidecar "4 KiB Put in B" outlier). Measured here as this process's resident
// shared memory (RssShmem), which grows by the peer pages mapped in its page tables.
import { readFileSync } from 'node:fs';
import { createHash, randomFillSync } from 'node:crypto';
import { mapMemory, TransferEngine, type MemoryRegion } from './index.js';
import { ensureAddon } from './test-fixtures/ensure-addon.js';
import { startRegionPeer, type RegionPeer } from './test-fixtures/region-peer.js';

const MiB = 1024 * 1024;
const PEER_SIZE = 256 * MiB;
const ports = { minPort: 20000, maxPort: 32000 };

let local: MemoryRegion;
let engine: TransferEngine;
let peer: RegionPeer | undefined;

const rssShmemKb = (): number => Number(/RssShmem:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))![1]);
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

beforeAll(async () => {
  ensureAddon();
  local = mapMemory({ size: 8 * MiB });
  randomFillSync(new Uint8Array(local.buffer)); // every local page resident before measuring
  engine = new TransferEngine({ ...ports, env: {} });
  engine.start();
  engine.registerRegion(local.address, local.size);
  peer = await startRegionPeer(PEER_SIZE, 7, { shmTransport: true }); // its whole segment resident (a filled pattern)
});

afterAll(async () => {
  engine?.close();
  local?.release();
  await peer?.stop();
});

test('first transfers to a peer map the windows they touch, not the peer segment of 256 MiB', async () => {
  const p = peer!;
  const before = rssShmemKb();
  // a small WRITE (the grant is asked for now), then a 1 MiB READ elsewhere (an I/O-thread chunk)
  await engine.transfer([{ op: 'write', endpoint: p.endpoint, remoteAddress: p.address + 100 * MiB + 12, localAddress: local.address, length: 4096 }]);
  await engine.transfer([{ op: 'read', endpoint: p.endpoint, remoteAddress: p.address + 200 * MiB, localAddress: local.address + MiB, length: MiB }]);
  const grownKb = rssShmemKb() - before;
  expect(await p.sha256(100 * MiB + 12, 4096)).toBe(sha(new Uint8Array(local.buffer, 0, 4096)));
  expect(sha(new Uint8Array(local.buffer, MiB, MiB))).toBe(await p.sha256(200 * MiB, MiB));
  // two 2 MiB windows and change; populating the whole grant maps all 256 MiB here
  expect(grownKb).toBeLessThan(16 * 1024);
});
