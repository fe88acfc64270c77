// Incarnations, write fences and local regions (wire format v2), each rule against a real peer
// process over TCP and over the same-host shm transport: a request naming another incarnation is
// refused (STALE_REGION), a WRITE whose generation the region's fence refuses writes nothing
// (FENCED), setFence waits for a refused WRITE still moving bytes, and regions registered with
// serve: false are unreachable by peers.
import { createHash, randomFillSync } from 'node:crypto';
import { mapMemory, TransferEngine, TransferError, type TransferOp } from './index.js';
import { engineHarness } from './test-fixtures/engine-harness.js';
import { rawConnect, requestHeader, WireStatus } from './test-fixtures/raw-wire.js';
import { startRegionPeer, type RegionPeer } from './test-fixtures/region-peer.js';

const MiB = 1024 * 1024;
const PEER_SIZE = 8 * MiB;
const ports = { minPort: 20000, maxPort: 32000 };

const h = engineHarness(8 * MiB);
const { engines, peers } = h;

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const localBytes = (offset: number, length: number) => new Uint8Array(h.local.buffer, offset, length);

async function code(p: Promise<unknown>): Promise<string> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (err === undefined) return 'OK';
  expect(err).toBeInstanceOf(TransferError);
  return (err as TransferError).code;
}

// Both transports: with shm the peer's memfd region is mapped here and the checks run on this side.
describe.each([
  ['TCP', false],
  ['shm', true],
])('over %s', (_name, shmTransport) => {
  let engine: TransferEngine;
  const peer = async (extra: object = {}) => {
    const p = await startRegionPeer(PEER_SIZE, 77, { ...ports, shmTransport, ...extra });
    peers.push(p);
    return p;
  };

  beforeAll(() => {
    engine = new TransferEngine({ ...ports, shmTransport, env: {} });
    engines.push(engine);
    engine.start();
    // A local buffer: this engine's transfers use it, peers never reach it.
    engine.registerRegion(h.local.address, h.local.size, { serve: false });
  });

  const op = (p: RegionPeer, kind: 'read' | 'write', offset: number, length: number, extra: Partial<TransferOp> = {}): TransferOp => ({
    op: kind,
    endpoint: p.endpoint,
    remoteAddress: p.address + offset,
    localAddress: h.local.address,
    length,
    ...extra,
  });

  // 4 KiB runs inline on the calling thread over shm, 2 MiB on the I/O threads in chunks.
  test.each([4096, 2 * MiB])('a stale incarnation is refused for READ and WRITE (%d bytes) and nothing moves', async (size) => {
    const p = await peer();
    const first = p.incarnation;
    expect(Number.isSafeInteger(first) && first > 0).toBe(true);
    await engine.transfer([op(p, 'read', 0, 1, { incarnation: first })]); // a channel (and shm grant) first
    const before = await p.sha256(0, PEER_SIZE);
    randomFillSync(localBytes(0, size));
    expect(await code(engine.transfer([op(p, 'write', 0, size, { incarnation: first + 1 })]))).toBe('STALE_REGION');
    localBytes(0, size).fill(3);
    expect(await code(engine.transfer([op(p, 'read', 0, size, { incarnation: first + 1 })]))).toBe('STALE_REGION');
    expect(localBytes(0, size).every((b) => b === 3)).toBe(true);
    expect(await p.sha256(0, PEER_SIZE)).toBe(before);
    // Registered again (as after a remount): a new incarnation; the old one is stale now.
    await p.command('register');
    expect(p.incarnation).not.toBe(first);
    randomFillSync(localBytes(0, size));
    expect(await code(engine.transfer([op(p, 'write', 0, size, { incarnation: first })]))).toBe('STALE_REGION');
    expect(await code(engine.transfer([op(p, 'read', 0, size, { incarnation: first })]))).toBe('STALE_REGION');
    expect(await p.sha256(0, PEER_SIZE)).toBe(before);
    // The current incarnation, and no incarnation at all, work.
    await engine.transfer([op(p, 'write', 0, size, { incarnation: p.incarnation })]);
    expect(await p.sha256(0, size)).toBe(sha(localBytes(0, size)));
    await engine.transfer([op(p, 'read', size, size, { incarnation: p.incarnation })]);
    expect(sha(localBytes(0, size))).toBe(await p.sha256(size, size));
    await engine.transfer([op(p, 'read', 0, size)]);
    if (!shmTransport) expect((await p.stats()).staleRefused).toBeGreaterThanOrEqual(4);
  });

  test.each([4096, 2 * MiB])('the write fence refuses old and revoked generations, accepts newer ones, and only moves forward (%d bytes)', async (size) => {
    const p = await peer();
    const inc = p.incarnation;
    await engine.transfer([op(p, 'write', 0, size, { incarnation: inc, generation: 1 })]); // no fence yet: any generation
    const fence = await p.setFence(10, [12]);
    expect(fence.settledAtOnce).toBe(true); // no write in flight
    const write = (gen: number) => code(engine.transfer([op(p, 'write', 0, size, { incarnation: inc, generation: gen })]));
    const before = await p.sha256(0, size);
    for (const gen of [0, 5, 9, 12]) {
      randomFillSync(localBytes(0, size));
      expect([gen, await write(gen)]).toEqual([gen, 'FENCED']);
    }
    expect(await p.sha256(0, size)).toBe(before);
    for (const gen of [10, 11, 13]) {
      randomFillSync(localBytes(0, size));
      expect([gen, await write(gen)]).toEqual([gen, 'OK']);
      expect(await p.sha256(0, size)).toBe(sha(localBytes(0, size)));
    }
    // READs are not fenced.
    expect(await code(engine.transfer([op(p, 'read', 0, size, { incarnation: inc, generation: 1 })]))).toBe('OK');
    // A lower `below` is ignored; `revoked` is replaced.
    await (
      await p.setFence(3, [])
    ).settled;
    expect(await write(5)).toBe('FENCED');
    expect(await write(12)).toBe('OK');
    if (!shmTransport) {
      // Counted per chunk; a batch's later chunks are skipped once one failed, so 1..chunks per refused op.
      const fenced = (await p.stats()).fencedRefused;
      expect(fenced).toBeGreaterThanOrEqual(5);
      expect(fenced).toBeLessThanOrEqual(5 * Math.ceil(size / MiB));
    }
  });

  // A new leader's write generations come from its own clock and may be far below the old
  // leader's: the owner's new registration (a remount) must not carry the old registration's fence.
  test("a region registered again starts with no fence: old fences do not refuse the new registration's writes", async () => {
    const p = await peer();
    await (
      await p.setFence(1_000_000_000, [5])
    ).settled;
    const write = (gen: number) => code(engine.transfer([op(p, 'write', 0, 4096, { incarnation: p.incarnation, generation: gen })]));
    expect(await write(5)).toBe('FENCED');
    expect(await write(7)).toBe('FENCED');
    await p.command('register');
    randomFillSync(localBytes(0, 4096));
    expect(await write(5)).toBe('OK');
    expect(await write(7)).toBe('OK');
    expect(await p.sha256(0, 4096)).toBe(sha(localBytes(0, 4096)));
  });

  test('regions a peer registered with serve: false are unreachable, READ and WRITE', async () => {
    const p = await peer();
    const other = await p.mapLocal(MiB);
    await engine.transfer([op(p, 'read', 0, 1)]);
    const to = (kind: 'read' | 'write', inc?: number): TransferOp => ({
      op: kind,
      endpoint: p.endpoint,
      remoteAddress: other.address,
      localAddress: h.local.address,
      length: 4096,
      incarnation: inc,
    });
    expect(await code(engine.transfer([to('read')]))).toBe('ADDRESS_OUT_OF_RANGE');
    expect(await code(engine.transfer([to('write')]))).toBe('ADDRESS_OUT_OF_RANGE');
    // Knowing its incarnation does not help.
    expect(await code(engine.transfer([to('read', other.incarnation)]))).toBe('ADDRESS_OUT_OF_RANGE');
    expect(await code(engine.transfer([{ ...to('write'), length: 2 * MiB - 4096 }]))).toBe('ADDRESS_OUT_OF_RANGE');
    // This test's own engine used its serve:false buffer as the local side all along.
  });
});

test('setFence resolves only once a WRITE of a generation it refuses, already moving bytes, has finished', async () => {
  const p = await startRegionPeer(PEER_SIZE, 78, { ...ports, shmTransport: false });
  peers.push(p);
  const half = 512 * 1024;
  const payload = Buffer.alloc(2 * half);
  randomFillSync(payload);
  const w = await rawConnect(p.endpoint);
  w.sock.write(requestHeader({ op: 'write', address: p.address, length: payload.length, incarnation: p.incarnation, generation: 5 }));
  w.sock.write(payload.subarray(0, half));
  // The first half is in the region: the serving thread checked the (absent) fence and pinned the region.
  while ((await p.sha256(0, half)) !== sha(payload.subarray(0, half)));
  const fence = await p.setFence(10);
  expect(fence.settledAtOnce).toBe(false);
  let settled = false;
  void fence.settled.then(() => (settled = true));
  await p.command('ping'); // a round trip later, still waiting for the writer
  expect(settled).toBe(false);
  w.sock.write(payload.subarray(half));
  expect(await w.response()).toBe(WireStatus.OK); // it started before the fence: it completes
  await fence.settled;
  expect(await p.sha256(0, payload.length)).toBe(sha(payload));
  // The same generation is refused from now on, payload drained, nothing written.
  const again = Buffer.alloc(4096, 0xee);
  w.sock.write(requestHeader({ op: 'write', requestId: 2, address: p.address, length: again.length, incarnation: p.incarnation, generation: 5 }));
  w.sock.write(again);
  expect(await w.response()).toBe(WireStatus.FENCED);
  expect(await p.sha256(0, payload.length)).toBe(sha(payload));
  w.sock.destroy();
});

test('setFence resolves once a half-sent WRITE it refuses is cut off by ioTimeoutMs (nothing waits forever)', async () => {
  const p = await startRegionPeer(PEER_SIZE, 79, { ...ports, shmTransport: false, ioTimeoutMs: 1000 });
  peers.push(p);
  const w = await rawConnect(p.endpoint);
  w.sock.write(requestHeader({ op: 'write', address: p.address, length: MiB, generation: 3 }));
  w.sock.write(Buffer.alloc(4096, 0x42));
  while ((await p.sha256(0, 4096)) !== sha(Buffer.alloc(4096, 0x42)));
  const fence = await p.setFence(4);
  expect(fence.settledAtOnce).toBe(false);
  await fence.settled;
  await w.closed;
  expect((await p.stats()).closedIoTimeout).toBe(1);
});

test('readInline checks the incarnation: same-host peer and own endpoint', async () => {
  const p = await startRegionPeer(PEER_SIZE, 80, { ...ports, shmTransport: true });
  peers.push(p);
  const e = new TransferEngine({ ...ports, memcpyLocal: true, env: {} });
  engines.push(e);
  const ep = e.start();
  e.registerRegion(h.local.address, h.local.size, { serve: false });
  const own = mapMemory({ size: MiB });
  try {
    await e.transfer([{ op: 'read', endpoint: p.endpoint, remoteAddress: p.address, localAddress: h.local.address, length: 1 }]);
    const target = Buffer.alloc(4096, 1);
    expect(e.readInline(p.endpoint, p.address, target, p.incarnation + 1)).toBe(false);
    expect(target.every((b) => b === 1)).toBe(true);
    expect(e.readInline(p.endpoint, p.address, target, p.incarnation)).toBe(true);
    expect(sha(target)).toBe(await p.sha256(0, 4096));
    // Own endpoint (memcpyLocal): the same, and a serve:false region is not reachable as a remote.
    const inc = e.registerRegion(own.address, own.size);
    randomFillSync(new Uint8Array(own.buffer));
    target.fill(1);
    expect(e.readInline(ep, own.address, target, inc + 1)).toBe(false);
    expect(target.every((b) => b === 1)).toBe(true);
    expect(e.readInline(ep, own.address, target, inc)).toBe(true);
    expect(sha(target)).toBe(sha(new Uint8Array(own.buffer, 0, 4096)));
    expect(e.readInline(ep, h.local.address, target)).toBe(false);
    expect(await code(e.transfer([{ op: 'read', endpoint: ep, remoteAddress: own.address, localAddress: h.local.address, length: 4096, incarnation: inc + 1 }]))).toBe(
      'STALE_REGION',
    );
    expect(await code(e.transfer([{ op: 'write', endpoint: ep, remoteAddress: h.local.address, localAddress: own.address, length: 4096 }]))).toBe('ADDRESS_OUT_OF_RANGE');
    await e.setFence(own.address, { below: 7 });
    expect(await code(e.transfer([{ op: 'write', endpoint: ep, remoteAddress: own.address, localAddress: h.local.address, length: 4096, generation: 6 }]))).toBe('FENCED');
    expect(await code(e.transfer([{ op: 'write', endpoint: ep, remoteAddress: own.address, localAddress: h.local.address, length: 2 * 4096 * 64, generation: 6 }]))).toBe('FENCED');
    expect(await code(e.transfer([{ op: 'write', endpoint: ep, remoteAddress: own.address, localAddress: h.local.address, length: 4096, generation: 7 }]))).toBe('OK');
    expect(await e.unregisterRegion(own.address)).toBe(true);
  } finally {
    own.release();
  }
});

test('setFence and registerRegion refuse bad input with clear errors', async () => {
  const e = new TransferEngine({ ...ports, shmTransport: false, env: {} });
  engines.push(e);
  const r = mapMemory({ size: MiB });
  try {
    const inc = e.registerRegion(r.address, r.size);
    expect(e.registerRegion(r.address, r.size)).not.toBe(inc); // every registration is a new incarnation
    await expect(e.setFence(r.address + 4096, { below: 1 })).rejects.toMatchObject({ code: 'ADDRESS_OUT_OF_RANGE' });
    await expect(e.setFence(r.address, { below: -1 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(e.setFence(r.address, { below: 1, revoked: new Array(1001).fill(5) })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    const localOnly = mapMemory({ size: MiB });
    try {
      e.registerRegion(localOnly.address, localOnly.size, { serve: false });
      await expect(e.setFence(localOnly.address, { below: 1 })).rejects.toMatchObject({ code: 'ADDRESS_OUT_OF_RANGE' });
      expect(await e.unregisterRegion(localOnly.address)).toBe(true);
    } finally {
      localOnly.release();
    }
    expect(() => e.registerRegion(r.address, 0)).toThrow(TransferError);
    expect(await e.unregisterRegion(r.address)).toBe(true);
    expect(await e.unregisterRegion(r.address)).toBe(false);
    await expect(e.unregisterRegion(-5)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  } finally {
    r.release();
  }
});
