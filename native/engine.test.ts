// The TCP transfer engine between real processes: checksummed READ/WRITE of 1 byte .. 64 MiB,
// range checks (nothing moves), dead and frozen peers (batches fail, never hang, others fine),
// local memcpy, close(), and the listening port range.
import { createHash, randomFillSync } from 'node:crypto';
import { createServer } from 'node:net';
import { mapMemory, TransferEngine, TransferError, type MemoryRegion, type TransferOp } from './index.js';
import { ensureAddon } from './test-fixtures/ensure-addon.js';
import { rawConnect, requestHeader, REQUEST_MAGIC_V1 } from './test-fixtures/raw-wire.js';
import { startRegionPeer, type RegionPeer } from './test-fixtures/region-peer.js';

const MiB = 1024 * 1024;
const PEER_SIZE = 80 * MiB;
const LOCAL_SIZE = 80 * MiB;

let peer: RegionPeer;
let local: MemoryRegion;
let engine: TransferEngine;
const extraPeers: RegionPeer[] = [];

// TCP semantics are tested with the shm transport off; it has its own tests (engine-shm.test.ts).
const ports = { minPort: 20000, maxPort: 32000, shmTransport: false };

beforeAll(async () => {
  ensureAddon();
  peer = await startRegionPeer(PEER_SIZE, 1234);
  local = mapMemory({ size: LOCAL_SIZE });
  engine = new TransferEngine({ ...ports, env: {} });
  engine.start();
  engine.registerRegion(local.address, local.size);
});

afterAll(async () => {
  engine?.close();
  local?.release();
  await peer?.stop();
  for (const p of extraPeers) await p.stop();
});

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const localBytes = (offset: number, length: number) => new Uint8Array(local.buffer, offset, length);

async function expectTransferError(p: Promise<unknown>, codes: string[]): Promise<TransferError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(TransferError);
  expect(codes).toContain((err as TransferError).code);
  return err as TransferError;
}

const sizes = [1, 7, 4096, 65536 + 3, MiB, 4 * MiB + 1, 16 * MiB, 64 * MiB];

test.each(sizes)('READ of %d bytes arrives intact', async (size) => {
  const remoteOffset = 4093; // unaligned on purpose
  const localOffset = 8191;
  localBytes(localOffset, size).fill(0);
  await engine.transfer([{ op: 'read', endpoint: peer.endpoint, remoteAddress: peer.address + remoteOffset, localAddress: local.address + localOffset, length: size }]);
  expect(sha(localBytes(localOffset, size))).toBe(await peer.sha256(remoteOffset, size));
});

test.each(sizes)('WRITE of %d bytes lands intact', async (size) => {
  const remoteOffset = 12345;
  const src = localBytes(3, size);
  randomFillSync(src);
  await engine.transfer([{ op: 'write', endpoint: peer.endpoint, remoteAddress: peer.address + remoteOffset, localAddress: local.address + 3, length: size }]);
  expect(await peer.sha256(remoteOffset, size)).toBe(sha(src));
});

test('a batch mixes reads and writes over many ops, and concurrent batches do not interfere', async () => {
  const ops: TransferOp[] = [];
  for (let i = 0; i < 16; i++) {
    randomFillSync(localBytes(i * MiB, 256 * 1024));
    ops.push({ op: 'write', endpoint: peer.endpoint, remoteAddress: peer.address + i * MiB, localAddress: local.address + i * MiB, length: 256 * 1024 });
  }
  const reads: TransferOp[] = [];
  for (let i = 0; i < 16; i++) {
    reads.push({ op: 'read', endpoint: peer.endpoint, remoteAddress: peer.address + 40 * MiB + i * 4096, localAddress: local.address + 40 * MiB + i * 4096, length: 4096 });
  }
  await Promise.all([engine.transfer(ops), engine.transfer(reads), ...reads.map((r) => engine.transfer([r]))]);
  for (let i = 0; i < 16; i++) {
    expect(await peer.sha256(i * MiB, 256 * 1024)).toBe(sha(localBytes(i * MiB, 256 * 1024)));
  }
  expect(sha(localBytes(40 * MiB, 16 * 4096))).toBe(await peer.sha256(40 * MiB, 16 * 4096));
  expect(engine.pendingBatches).toBe(0);
});

test('an empty batch and zero-length ops resolve', async () => {
  await engine.transfer([]);
  await engine.transfer([{ op: 'read', endpoint: peer.endpoint, remoteAddress: peer.address, localAddress: local.address, length: 0 }]);
});

test('a remote range outside the registered region is refused and nothing is written', async () => {
  const before = await peer.sha256(0, PEER_SIZE);
  randomFillSync(localBytes(0, 8 * MiB));
  // Starts inside and runs past the end: several chunks, every one refused.
  await expectTransferError(
    engine.transfer([{ op: 'write', endpoint: peer.endpoint, remoteAddress: peer.address + PEER_SIZE - 3 * MiB, localAddress: local.address, length: 8 * MiB }]),
    ['ADDRESS_OUT_OF_RANGE'],
  );
  // Entirely outside, below the region.
  await expectTransferError(engine.transfer([{ op: 'write', endpoint: peer.endpoint, remoteAddress: peer.address - 4096, localAddress: local.address, length: 100 }]), [
    'ADDRESS_OUT_OF_RANGE',
  ]);
  expect(await peer.sha256(0, PEER_SIZE)).toBe(before);
  // The connection stays usable afterwards.
  await engine.transfer([{ op: 'write', endpoint: peer.endpoint, remoteAddress: peer.address, localAddress: local.address, length: 4096 }]);
  expect(await peer.sha256(0, 4096)).toBe(sha(localBytes(0, 4096)));
});

test('a READ outside the remote region is refused and the local buffer is untouched', async () => {
  localBytes(0, MiB).fill(0x11);
  const before = sha(localBytes(0, MiB));
  await expectTransferError(engine.transfer([{ op: 'read', endpoint: peer.endpoint, remoteAddress: peer.address + PEER_SIZE - 10, localAddress: local.address, length: MiB }]), [
    'ADDRESS_OUT_OF_RANGE',
  ]);
  expect(sha(localBytes(0, MiB))).toBe(before);
});

test('a local range outside registered regions rejects before any byte moves', async () => {
  const before = await peer.sha256(0, 4096);
  const stray = mapMemory({ size: MiB });
  try {
    await expectTransferError(
      engine.transfer([
        { op: 'write', endpoint: peer.endpoint, remoteAddress: peer.address + 4096, localAddress: local.address, length: 4096 },
        { op: 'write', endpoint: peer.endpoint, remoteAddress: peer.address, localAddress: stray.address, length: 4096 },
      ]),
      ['ADDRESS_OUT_OF_RANGE'],
    );
    await expectTransferError(
      engine.transfer([{ op: 'read', endpoint: peer.endpoint, remoteAddress: peer.address, localAddress: local.address + LOCAL_SIZE - 10, length: 4096 }]),
      ['ADDRESS_OUT_OF_RANGE'],
    );
  } finally {
    stray.release();
  }
  expect(await peer.sha256(0, 4096)).toBe(before);
});

test('bad ops are clear errors', async () => {
  await expectTransferError(engine.transfer([{ op: 'move' as 'read', endpoint: peer.endpoint, remoteAddress: peer.address, localAddress: local.address, length: 1 }]), [
    'INVALID_ARGUMENT',
  ]);
  await expectTransferError(engine.transfer([{ op: 'read', endpoint: 'no-port', remoteAddress: peer.address, localAddress: local.address, length: 1 }]), ['INVALID_ARGUMENT']);
  await expectTransferError(engine.transfer([{ op: 'read', endpoint: peer.endpoint, remoteAddress: -1, localAddress: local.address, length: 1 }]), ['INVALID_ARGUMENT']);
});

test('unregistering on the serving side refuses later transfers; registering again restores them', async () => {
  await peer.command('unregister');
  try {
    await expectTransferError(engine.transfer([{ op: 'read', endpoint: peer.endpoint, remoteAddress: peer.address, localAddress: local.address, length: 4096 }]), [
      'ADDRESS_OUT_OF_RANGE',
    ]);
  } finally {
    await peer.command('register');
  }
  await engine.transfer([{ op: 'read', endpoint: peer.endpoint, remoteAddress: peer.address, localAddress: local.address, length: 4096 }]);
  expect(sha(localBytes(0, 4096))).toBe(await peer.sha256(0, 4096));
});

test('garbage, oversized and old-format (v1) requests on the wire only drop that connection', async () => {
  const before = await peer.sha256(0, 4 * MiB);
  const badBefore = (await peer.stats()).badRequests;
  const sendAndAwaitClose = async (payload: Buffer) => {
    const c = await rawConnect(peer.endpoint);
    c.sock.write(payload);
    await c.closed;
  };
  await sendAndAwaitClose(Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(4)));
  // A well-formed WRITE header asking for 2 GiB: refused before reading any payload.
  await sendAndAwaitClose(requestHeader({ op: 'write', address: peer.address, length: 2 ** 31 }));
  // A version-1 header (48 bytes, magic "KVRQ") for a valid range: refused on its magic at once,
  // not left waiting for the 16 bytes a v2 header has more, and never read as one.
  const v1 = Buffer.alloc(48 + 4096, 0x5a);
  v1.writeUInt32LE(REQUEST_MAGIC_V1, 0);
  v1.writeUInt16LE(2, 4);
  v1.writeBigUInt64LE(1n, 8);
  v1.writeBigUInt64LE(BigInt(peer.address), 16);
  v1.writeBigUInt64LE(4096n, 24);
  v1.writeBigUInt64LE(BigInt(peer.address), 32);
  v1.writeBigUInt64LE(4096n, 40);
  await sendAndAwaitClose(v1.subarray(0, 48));
  await sendAndAwaitClose(v1);
  expect((await peer.stats()).badRequests).toBe(badBefore + 4);
  expect(await peer.sha256(0, 4 * MiB)).toBe(before);
  await engine.transfer([{ op: 'read', endpoint: peer.endpoint, remoteAddress: peer.address, localAddress: local.address, length: 4 * MiB }]);
  expect(sha(localBytes(0, 4 * MiB))).toBe(before);
});

test('a peer that is not listening fails with CONNECTION_FAILED', async () => {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  await expectTransferError(engine.transfer([{ op: 'read', endpoint: `127.0.0.1:${port}`, remoteAddress: 4096, localAddress: local.address, length: 10 }]), ['CONNECTION_FAILED']);
});

test('a peer killed mid-transfer fails that batch (no hang) while a batch to another peer succeeds', async () => {
  // Each peer is handed to afterAll as soon as it exists, so a failure starting the second still stops the first.
  const victim = await startRegionPeer(PEER_SIZE, 99);
  extraPeers.push(victim);
  const other = await startRegionPeer(16 * MiB, 7);
  extraPeers.push(other);
  const e = new TransferEngine({ ...ports, timeoutMs: 60_000, env: {} });
  try {
    e.registerRegion(local.address, local.size);
    // Frozen first, so the 64 MiB write cannot finish before the kill.
    process.kill(victim.pid, 'SIGSTOP');
    randomFillSync(localBytes(0, 64 * MiB));
    // The check is attached at once: the rejection lands whenever the kill does (possibly while
    // victim.stop() is still awaiting the exit event), and a rejection with no handler yet counts
    // as unhandled and fails the test even though it is the expected outcome.
    const doomed = expectTransferError(e.transfer([{ op: 'write', endpoint: victim.endpoint, remoteAddress: victim.address, localAddress: local.address, length: 64 * MiB }]), [
      'TRANSFER_FAILED',
      'CONNECTION_FAILED',
    ]);
    const fine = e.transfer([{ op: 'read', endpoint: other.endpoint, remoteAddress: other.address, localAddress: local.address + 70 * MiB, length: 8 * MiB }]);
    await fine;
    expect(sha(localBytes(70 * MiB, 8 * MiB))).toBe(await other.sha256(0, 8 * MiB));
    await victim.stop(); // SIGKILL
    await doomed;
    // The engine keeps working with the live peer.
    randomFillSync(localBytes(0, 4 * MiB));
    await e.transfer([{ op: 'write', endpoint: other.endpoint, remoteAddress: other.address, localAddress: local.address, length: 4 * MiB }]);
    expect(await other.sha256(0, 4 * MiB)).toBe(sha(localBytes(0, 4 * MiB)));
    expect(e.pendingBatches).toBe(0);
  } finally {
    e.close();
  }
});

test('a peer that stops answering fails the batch with TIMEOUT, and the engine recovers', async () => {
  const frozen = await startRegionPeer(8 * MiB, 5);
  extraPeers.push(frozen);
  const e = new TransferEngine({ ...ports, timeoutMs: 300, env: {} });
  try {
    e.registerRegion(local.address, local.size);
    await e.transfer([{ op: 'read', endpoint: frozen.endpoint, remoteAddress: frozen.address, localAddress: local.address, length: 4096 }]);
    process.kill(frozen.pid, 'SIGSTOP');
    await expectTransferError(e.transfer([{ op: 'read', endpoint: frozen.endpoint, remoteAddress: frozen.address, localAddress: local.address, length: 4 * MiB }]), ['TIMEOUT']);
    process.kill(frozen.pid, 'SIGCONT');
    await e.transfer([{ op: 'read', endpoint: frozen.endpoint, remoteAddress: frozen.address, localAddress: local.address, length: 4 * MiB }]);
    expect(sha(localBytes(0, 4 * MiB))).toBe(await frozen.sha256(0, 4 * MiB));
  } finally {
    e.close();
  }
});

test('unregistering a local buffer a batch still uses resolves only once that batch stopped, and never blocks', async () => {
  const frozen = await startRegionPeer(8 * MiB, 8);
  extraPeers.push(frozen);
  const e = new TransferEngine({ ...ports, timeoutMs: 1000, env: {} });
  const buf = mapMemory({ size: 4 * MiB });
  try {
    e.registerRegion(buf.address, buf.size, { serve: false });
    await e.transfer([{ op: 'read', endpoint: frozen.endpoint, remoteAddress: frozen.address, localAddress: buf.address, length: 1 }]);
    process.kill(frozen.pid, 'SIGSTOP');
    let transferDone = false;
    const stuck = e
      .transfer([{ op: 'read', endpoint: frozen.endpoint, remoteAddress: frozen.address, localAddress: buf.address, length: 4 * MiB }])
      .finally(() => (transferDone = true));
    let unregistered = false;
    const gone = e.unregisterRegion(buf.address).then((was) => {
      unregistered = true;
      return was;
    });
    // The buffer is out of the table at once: a new batch on it is refused.
    await expectTransferError(e.transfer([{ op: 'read', endpoint: frozen.endpoint, remoteAddress: frozen.address, localAddress: buf.address, length: 4096 }]), [
      'ADDRESS_OUT_OF_RANGE',
    ]);
    for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r)); // the event loop turns meanwhile
    expect(unregistered).toBe(false);
    expect(transferDone).toBe(false);
    expect(await gone).toBe(true); // after the stuck chunk timed out
    await expectTransferError(stuck, ['TIMEOUT']);
  } finally {
    process.kill(frozen.pid, 'SIGCONT');
    e.close();
    buf.release();
  }
});

test('close() rejects pending batches instead of leaving them hanging', async () => {
  const frozen = await startRegionPeer(8 * MiB, 6);
  extraPeers.push(frozen);
  const e = new TransferEngine({ ...ports, timeoutMs: 60_000, env: {} });
  e.registerRegion(local.address, local.size);
  await e.transfer([{ op: 'read', endpoint: frozen.endpoint, remoteAddress: frozen.address, localAddress: local.address, length: 1 }]);
  process.kill(frozen.pid, 'SIGSTOP');
  const pending = e.transfer([{ op: 'read', endpoint: frozen.endpoint, remoteAddress: frozen.address, localAddress: local.address, length: 4 * MiB }]);
  e.close();
  await expectTransferError(pending, ['TRANSFER_FAILED']);
  await expectTransferError(e.transfer([]), ['TRANSFER_FAILED']);
  process.kill(frozen.pid, 'SIGCONT');
});

test('transfers to this engine itself work over TCP, and with memcpyLocal by memcpy; both range-checked', async () => {
  for (const memcpyLocal of [false, true]) {
    const e = new TransferEngine({ ...ports, memcpyLocal, env: {} });
    const a = mapMemory({ size: 8 * MiB });
    const b = mapMemory({ size: 8 * MiB });
    try {
      const ep = e.start();
      e.registerRegion(a.address, a.size);
      e.registerRegion(b.address, b.size);
      randomFillSync(new Uint8Array(a.buffer));
      await e.transfer([{ op: 'write', endpoint: ep, remoteAddress: b.address + 100, localAddress: a.address, length: 6 * MiB }]);
      expect(sha(new Uint8Array(b.buffer, 100, 6 * MiB))).toBe(sha(new Uint8Array(a.buffer, 0, 6 * MiB)));
      new Uint8Array(a.buffer).fill(0);
      await e.transfer([{ op: 'read', endpoint: ep, remoteAddress: b.address + 100, localAddress: a.address, length: 6 * MiB }]);
      expect(sha(new Uint8Array(a.buffer, 0, 6 * MiB))).toBe(sha(new Uint8Array(b.buffer, 100, 6 * MiB)));
      const before = sha(new Uint8Array(b.buffer));
      await expectTransferError(e.transfer([{ op: 'write', endpoint: ep, remoteAddress: b.address + 7 * MiB, localAddress: a.address, length: 2 * MiB }]), [
        'ADDRESS_OUT_OF_RANGE',
      ]);
      expect(sha(new Uint8Array(b.buffer))).toBe(before);
      // After unregistering, the region is no longer reachable.
      expect(await e.unregisterRegion(b.address)).toBe(true);
      await expectTransferError(e.transfer([{ op: 'read', endpoint: ep, remoteAddress: b.address, localAddress: a.address, length: 10 }]), ['ADDRESS_OUT_OF_RANGE']);
    } finally {
      e.close();
      a.release();
      b.release();
    }
  }
});

describe('listening port', () => {
  test('start() binds inside MC_STORE_CLIENT_MIN_PORT..MAX_PORT and reports host:port', () => {
    const e = new TransferEngine({ env: { MC_STORE_CLIENT_MIN_PORT: '23000', MC_STORE_CLIENT_MAX_PORT: '23999' } });
    try {
      const ep = e.start();
      expect(e.endpoint).toBe(ep);
      const port = Number(ep.split(':')[1]);
      expect(ep.startsWith('127.0.0.1:')).toBe(true);
      expect(port).toBeGreaterThanOrEqual(23000);
      expect(port).toBeLessThanOrEqual(23999);
      expect(e.start()).toBe(ep); // idempotent
    } finally {
      e.close();
    }
  });

  test('a busy single-port range fails with CONNECTION_FAILED naming the range', () => {
    const first = new TransferEngine({ ...ports, env: {} });
    try {
      const port = Number(first.start().split(':')[1]);
      const second = new TransferEngine({ minPort: port, maxPort: port, shmTransport: false, env: {} });
      let err: unknown;
      try {
        second.start();
      } catch (e) {
        err = e;
      }
      second.close();
      expect(err).toBeInstanceOf(TransferError);
      expect((err as TransferError).code).toBe('CONNECTION_FAILED');
      expect((err as Error).message).toMatch(new RegExp(`no free port in ${port}\\.\\.${port}`));
    } finally {
      first.close();
    }
  });

  test('an inverted explicit range is refused', () => {
    expect(() => new TransferEngine({ minPort: 20010, maxPort: 20000 })).toThrow(TransferError);
  });
});

test("readInline serves this engine's own regions under memcpyLocal (range-checked), into any buffer", async () => {
  const e = new TransferEngine({ ...ports, memcpyLocal: true, env: {} });
  const b = mapMemory({ size: 1 * MiB });
  try {
    const ep = e.start();
    e.registerRegion(b.address, b.size);
    randomFillSync(new Uint8Array(b.buffer));
    const target = Buffer.alloc(4096); // plain JS memory: no registration needed for an inline read
    expect(e.readInline(ep, b.address + 333, target)).toBe(true);
    expect(sha(target)).toBe(sha(new Uint8Array(b.buffer, 333, 4096)));
    // Outside the registered region: refused, nothing copied (transfer() reports the error).
    const untouched = Buffer.alloc(4096, 9);
    expect(e.readInline(ep, b.address + b.size - 100, untouched)).toBe(false);
    expect(untouched.every((x) => x === 9)).toBe(true);
    // Over the inline size: left to transfer().
    expect(e.readInline(ep, b.address, Buffer.alloc(64 * 1024 + 1))).toBe(false);
    expect(() => e.readInline(ep, -1, target)).toThrow(TransferError);
    await e.unregisterRegion(b.address);
    expect(e.readInline(ep, b.address, target)).toBe(false);
    e.close();
    expect(e.readInline(ep, b.address, target)).toBe(false);
  } finally {
    e.close();
    b.release();
  }
});
