// Same-host shm transport (MC_STORE_SHM_TRANSPORT, default on): a peer process hands over the fd
// of its registered memfd region and bytes move by memcpy. Checked with checksums, with the peer
// frozen (only shared memory can answer then), range refusals, revocation on unregister, a dead
// peer, and the TCP fallback for memory that is not fd-backed.
import { createHash, randomFillSync } from 'node:crypto';
import { mapMemory, TransferEngine, type MemoryRegion } from './index.js';
import { rejection } from './test-fixtures/rejection.js';
import { ensureAddon } from './test-fixtures/ensure-addon.js';
import { startRegionPeer, type RegionPeer } from './test-fixtures/region-peer.js';

const MiB = 1024 * 1024;
const PEER_SIZE = 72 * MiB;
const ports = { minPort: 20000, maxPort: 32000 };

let local: MemoryRegion;
let engine: TransferEngine;
const peers: RegionPeer[] = [];

beforeAll(() => {
  ensureAddon();
  local = mapMemory({ size: 72 * MiB });
  engine = new TransferEngine({ ...ports, env: {} }); // shm transport on by default
  engine.start();
  engine.registerRegion(local.address, local.size);
});

afterAll(async () => {
  engine?.close();
  local?.release();
  for (const p of peers) await p.stop();
});

async function peer(seed: number, extra: object = {}): Promise<RegionPeer> {
  const p = await startRegionPeer(PEER_SIZE, seed, { shmTransport: true, ...extra });
  peers.push(p);
  return p;
}

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const localBytes = (offset: number, length: number) => new Uint8Array(local.buffer, offset, length);

test('READ and WRITE of 1 byte .. 64 MiB through the shared mapping are bit-exact', async () => {
  const p = await peer(11);
  for (const size of [1, 4096, 65536 + 5, 4 * MiB + 3, 64 * MiB]) {
    await engine.transfer([{ op: 'read', endpoint: p.endpoint, remoteAddress: p.address + 17, localAddress: local.address + 9, length: size }]);
    expect(sha(localBytes(9, size))).toBe(await p.sha256(17, size));
    randomFillSync(localBytes(0, size));
    await engine.transfer([{ op: 'write', endpoint: p.endpoint, remoteAddress: p.address + 4099, localAddress: local.address, length: size }]);
    expect(await p.sha256(4099, size)).toBe(sha(localBytes(0, size)));
  }
});

test('a frozen peer is still served: the bytes come from shared memory, not its sockets', async () => {
  const p = await peer(12);
  await engine.transfer([{ op: 'read', endpoint: p.endpoint, remoteAddress: p.address, localAddress: local.address, length: 1 }]);
  process.kill(p.pid, 'SIGSTOP');
  try {
    randomFillSync(localBytes(0, 8 * MiB));
    await engine.transfer([{ op: 'write', endpoint: p.endpoint, remoteAddress: p.address, localAddress: local.address, length: 8 * MiB }]);
  } finally {
    process.kill(p.pid, 'SIGCONT');
  }
  expect(await p.sha256(0, 8 * MiB)).toBe(sha(localBytes(0, 8 * MiB)));
});

test('ranges outside the peer region are refused and nothing is written', async () => {
  const p = await peer(13);
  const before = await p.sha256(0, PEER_SIZE);
  randomFillSync(localBytes(0, 4 * MiB));
  const err = await rejection(engine.transfer([{ op: 'write', endpoint: p.endpoint, remoteAddress: p.address + PEER_SIZE - MiB, localAddress: local.address, length: 4 * MiB }]));
  expect(err.code).toBe('ADDRESS_OUT_OF_RANGE');
  expect(await p.sha256(0, PEER_SIZE)).toBe(before);
});

test('unregistering on the peer revokes the grant: later transfers are refused', async () => {
  const p = await peer(14);
  await engine.transfer([{ op: 'read', endpoint: p.endpoint, remoteAddress: p.address, localAddress: local.address, length: 4096 }]);
  await p.command('unregister');
  const before = await p.sha256(0, MiB);
  const err = await rejection(engine.transfer([{ op: 'write', endpoint: p.endpoint, remoteAddress: p.address, localAddress: local.address, length: MiB }]));
  expect(err.code).toBe('ADDRESS_OUT_OF_RANGE');
  expect(await p.sha256(0, MiB)).toBe(before);
  await p.command('register');
  await engine.transfer([{ op: 'read', endpoint: p.endpoint, remoteAddress: p.address, localAddress: local.address, length: MiB }]);
  expect(sha(localBytes(0, MiB))).toBe(await p.sha256(0, MiB));
});

test('a peer dropping memory that is not fd-backed (a Get result) keeps the grants it gave', async () => {
  const p = await peer(17);
  const e = new TransferEngine({ ...ports, env: {}, timeoutMs: 2000 });
  try {
    e.start();
    e.registerRegion(local.address, local.size);
    await e.transfer([{ op: 'read', endpoint: p.endpoint, remoteAddress: p.address, localAddress: local.address, length: 4096 }]);
    await p.command('scratch');
    // Frozen, the peer cannot answer a new grant request: the write succeeds only if the grant held.
    process.kill(p.pid, 'SIGSTOP');
    try {
      randomFillSync(localBytes(0, MiB));
      await e.transfer([{ op: 'write', endpoint: p.endpoint, remoteAddress: p.address, localAddress: local.address, length: MiB }]);
    } finally {
      process.kill(p.pid, 'SIGCONT');
    }
    expect(await p.sha256(0, MiB)).toBe(sha(localBytes(0, MiB)));
  } finally {
    e.close();
  }
});

test('a dead peer fails the next batch (no write into orphaned memory, no hang)', async () => {
  const p = await peer(15);
  await engine.transfer([{ op: 'read', endpoint: p.endpoint, remoteAddress: p.address, localAddress: local.address, length: 4096 }]);
  await p.stop();
  const err = await rejection(engine.transfer([{ op: 'write', endpoint: p.endpoint, remoteAddress: p.address, localAddress: local.address, length: 4096 }]));
  expect(['TRANSFER_FAILED', 'CONNECTION_FAILED']).toContain(err.code);
  // And again (the channel now tries TCP / a fresh control socket, which both fail fast).
  const again = await rejection(engine.transfer([{ op: 'write', endpoint: p.endpoint, remoteAddress: p.address, localAddress: local.address, length: 4096 }]));
  expect(['TRANSFER_FAILED', 'CONNECTION_FAILED']).toContain(again.code);
});

test('readInline reads a small range of a same-host peer into a plain buffer once a grant is cached, within it only', async () => {
  const p = await peer(18);
  const e = new TransferEngine({ ...ports, env: {} });
  try {
    e.registerRegion(local.address, local.size);
    const target = Buffer.alloc(4096);
    expect(e.readInline(p.endpoint, p.address, target)).toBe(false); // no channel yet: transfer() makes it
    await e.transfer([{ op: 'read', endpoint: p.endpoint, remoteAddress: p.address, localAddress: local.address, length: 1 }]);
    expect(e.readInline(p.endpoint, p.address + 4097, target)).toBe(true);
    expect(sha(target)).toBe(await p.sha256(4097, 4096));
    const small = Buffer.alloc(5);
    expect(e.readInline(p.endpoint, p.address + PEER_SIZE - 5, small)).toBe(true);
    expect(sha(small)).toBe(await p.sha256(PEER_SIZE - 5, 5));
    // Past the peer's region, or above the inline size: nothing copied, transfer() decides.
    const untouched = Buffer.alloc(4096, 7);
    expect(e.readInline(p.endpoint, p.address + PEER_SIZE - 100, untouched)).toBe(false);
    expect(untouched.every((x) => x === 7)).toBe(true);
    expect(e.readInline(p.endpoint, p.address, Buffer.alloc(64 * 1024 + 1))).toBe(false);
    // The peer unregistering revokes the grant for inline reads too.
    await p.command('unregister');
    expect(e.readInline(p.endpoint, p.address, untouched)).toBe(false);
    expect(untouched.every((x) => x === 7)).toBe(true);
  } finally {
    e.close();
  }
});

test('readInline stops on a dead peer without a transfer (the control socket hang-up is watched, no poll per read)', async () => {
  const p = await peer(19);
  const e = new TransferEngine({ ...ports, env: {} });
  try {
    e.registerRegion(local.address, local.size);
    await e.transfer([{ op: 'read', endpoint: p.endpoint, remoteAddress: p.address, localAddress: local.address, length: 1 }]);
    const target = Buffer.alloc(4096);
    expect(e.readInline(p.endpoint, p.address, target)).toBe(true);
    await p.stop(); // SIGKILL, exit awaited
    // The watcher thread sees the hang-up on its own; nothing in JS can await it, so yield until
    // it has (bounded: a watcher that never notices fails the test).
    let turns = 0;
    while (e.readInline(p.endpoint, p.address, target) && turns < 100_000) {
      turns++;
      await new Promise((r) => setImmediate(r));
    }
    expect(e.readInline(p.endpoint, p.address, target)).toBe(false);
    const err = await rejection(e.transfer([{ op: 'read', endpoint: p.endpoint, remoteAddress: p.address, localAddress: local.address, length: 4096 }]));
    expect(['TRANSFER_FAILED', 'CONNECTION_FAILED']).toContain(err.code);
    expect(e.readInline(p.endpoint, p.address, target)).toBe(false);
  } finally {
    e.close();
  }
});

test('a peer region that is not fd-backed (anonymous) is served over TCP instead', async () => {
  const p = await peer(16, { regionKind: 'anonymous' });
  process.kill(p.pid, 'SIGSTOP'); // over TCP a frozen peer cannot answer: proves the fallback path
  const e = new TransferEngine({ ...ports, timeoutMs: 300, env: {} });
  try {
    e.registerRegion(local.address, local.size);
    const err = await rejection(e.transfer([{ op: 'read', endpoint: p.endpoint, remoteAddress: p.address, localAddress: local.address, length: MiB }]));
    expect(err.code).toBe('TIMEOUT');
  } finally {
    process.kill(p.pid, 'SIGCONT');
    e.close();
  }
  await engine.transfer([{ op: 'read', endpoint: p.endpoint, remoteAddress: p.address + 5, localAddress: local.address, length: 3 * MiB }]);
  expect(sha(localBytes(0, 3 * MiB))).toBe(await p.sha256(5, 3 * MiB));
});

test('MC_STORE_SHM_TRANSPORT=0 keeps same-host peers on TCP', async () => {
  const p = await peer(17);
  const e = new TransferEngine({ ...ports, timeoutMs: 300, env: { MC_STORE_SHM_TRANSPORT: '0' } });
  try {
    e.registerRegion(local.address, local.size);
    await e.transfer([{ op: 'read', endpoint: p.endpoint, remoteAddress: p.address, localAddress: local.address, length: 1 }]);
    process.kill(p.pid, 'SIGSTOP');
    const err = await rejection(e.transfer([{ op: 'read', endpoint: p.endpoint, remoteAddress: p.address, localAddress: local.address, length: MiB }]));
    expect(err.code).toBe('TIMEOUT');
  } finally {
    process.kill(p.pid, 'SIGCONT');
    e.close();
  }
});

test('shmOnly: an engine that serves nothing reads through grants only, and fails at once where there is none (never TCP)', async () => {
  const shared = await peer(18);
  const anonymous = await peer(19, { regionKind: 'anonymous' }); // not fd-backed: no grant
  const e = new TransferEngine({ shmOnly: true, timeoutMs: 5000, env: {} }); // never started: no listener
  try {
    expect(e.endpoint).toBe('');
    e.registerRegion(local.address, local.size, { serve: false });
    await e.transfer([{ op: 'read', endpoint: shared.endpoint, remoteAddress: shared.address + 3, localAddress: local.address, length: 2 * MiB }]);
    expect(sha(localBytes(0, 2 * MiB))).toBe(await shared.sha256(3, 2 * MiB));
    const small = Buffer.alloc(4096);
    expect(e.readInlineCrc(shared.endpoint, shared.address + 8, small)).toBe(await shared.crc32c(8, 4096));
    // anything else fails with TRANSFER_FAILED instead of a TCP connection
    const err = await rejection(e.transfer([{ op: 'read', endpoint: anonymous.endpoint, remoteAddress: anonymous.address, localAddress: local.address, length: MiB }]));
    expect(err.code).toBe('TRANSFER_FAILED');
    expect(err.message).toMatch(/not reachable through same-host shared memory .*shmOnly/);
    expect(err.endpoints).toEqual([anonymous.endpoint]);
    const tcpOnly = await peer(20, { shmTransport: false }); // no control socket at all
    const err2 = await rejection(e.transfer([{ op: 'read', endpoint: tcpOnly.endpoint, remoteAddress: tcpOnly.address, localAddress: local.address, length: 4096 }]));
    expect(err2.code).toBe('TRANSFER_FAILED');
    // what reached them: the control socket of the one that has one (it said "not shareable"), no TCP connection
    expect((await anonymous.stats()).accepted).toBe(1);
    expect((await tcpOnly.stats()).accepted).toBe(0);
  } finally {
    e.close();
  }
});
