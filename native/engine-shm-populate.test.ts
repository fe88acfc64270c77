// The same-host shm transport fills in the page tables of a peer's mapping (native/src/shm_peer.cc,
// PopulateResident) off the transfers' path: a thread started with the grant goes through it in
// 2 MiB windows, and a chunk landing in a window it has not reached fills in that window only.
// Populating the whole mapping before the grant was used made the first transfer to every peer
// wait ~0.15 ms per MiB the peer held (a 1.5 GiB segment: over 200 ms; the bench:sidecar "4 KiB
// Put in B" outlier). Here the region-peer process is the one transferring (to a 256 MiB region
// served by this process), its populator thread held at its start until the transfers are done
// (KVSTORE_TEST_POPULATE_HOLD, a FIFO); what it mapped shows as its resident shared memory
// (RssShmem), which grows by the pages of our region entered in its page tables.
import { execFileSync } from 'node:child_process';
import { closeSync, constants, mkdtempSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash, randomFillSync } from 'node:crypto';
import { mapMemory, TransferEngine, type MemoryRegion } from './index.js';
import { ensureAddon } from './test-fixtures/ensure-addon.js';
import { startRegionPeer, type RegionPeer } from './test-fixtures/region-peer.js';

const MiB = 1024 * 1024;
const SERVED = 256 * MiB;
const ports = { minPort: 20000, maxPort: 32000 };

let served: MemoryRegion;
let engine: TransferEngine;
let endpoint = '';
let peer: RegionPeer | undefined;
let dir = '';
let fifo = '';

const rssShmemKb = (pid: number): number => Number(/RssShmem:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const until = async (cond: () => boolean): Promise<void> => {
  while (!cond()) await new Promise((r) => setTimeout(r, 10)); // no event says so: poll (bounded by the test's timeout)
};

/** Lets the peer's populator thread start: it is blocked opening the FIFO for reading (ENXIO until then). */
async function release(): Promise<void> {
  let fd = -1;
  await until(() => {
    try {
      fd = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
      return true;
    } catch {
      return false;
    }
  });
  writeSync(fd, Buffer.from([1]));
  closeSync(fd);
}

beforeAll(async () => {
  ensureAddon();
  dir = mkdtempSync(join(tmpdir(), 'populate-'));
  fifo = join(dir, 'hold');
  execFileSync('mkfifo', [fifo]);
  served = mapMemory({ size: SERVED });
  randomFillSync(new Uint8Array(served.buffer)); // every page resident: a peer's grant may map them all
  engine = new TransferEngine({ ...ports, env: {} });
  endpoint = engine.start();
  engine.registerRegion(served.address, served.size);
  peer = await startRegionPeer(8 * MiB, 7, { shmTransport: true }, { env: { KVSTORE_TEST_POPULATE_HOLD: fifo } });
});

afterAll(async () => {
  engine?.close();
  served?.release();
  await peer?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('first transfers to a 256 MiB region do not wait for its page tables; a thread fills them in after', async () => {
  const p = peer!;
  const before = rssShmemKb(p.pid);
  // a small WRITE (the grant is asked for now), then a 1 MiB READ elsewhere (an I/O-thread chunk)
  expect(await p.transfer({ op: 'write', endpoint, remoteAddress: served.address + 100 * MiB + 12, offset: 0, length: 4096 })).toEqual({ ok: true });
  expect(await p.transfer({ op: 'read', endpoint, remoteAddress: served.address + 200 * MiB, offset: MiB, length: MiB })).toEqual({ ok: true });
  const grownKb = rssShmemKb(p.pid) - before;
  expect(sha(new Uint8Array(served.buffer, 100 * MiB + 12, 4096))).toBe(await p.sha256(0, 4096));
  expect(await p.sha256(MiB, MiB)).toBe(sha(new Uint8Array(served.buffer, 200 * MiB, MiB)));
  // the windows those chunks touched and change; populating the whole grant first maps all 256 MiB
  expect(grownKb).toBeLessThan(16 * 1024);

  await release();
  await until(() => rssShmemKb(p.pid) - before >= 240 * 1024); // the populator went through the rest
});
