// Per-op CRC-32C of transfer(ops) (`checksum: true`) and readInlineCrc, against a real peer
// process: for READ the CRC of the bytes that arrived, for WRITE of the bytes sent, each equal to
// crc32c() of the same bytes computed independently here and in the peer; over TCP, the shm
// transport and the local memcpy path, 1 byte .. 64 MiB, unaligned, multi-chunk (chunks finish
// on different threads in any order), and batches where only some ops ask.
import { randomFillSync } from 'node:crypto';
import { crc32c, mapMemory, TransferEngine, type TransferOp } from './index.js';
import { engineHarness } from './test-fixtures/engine-harness.js';
import { startRegionPeer, type RegionPeer } from './test-fixtures/region-peer.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const PEER_SIZE = 72 * MiB;
const ports = { minPort: 20000, maxPort: 32000 };

const h = engineHarness(72 * MiB);
const { engines, peers } = h;

const localBytes = (offset: number, length: number) => new Uint8Array(h.local.buffer, offset, length);

function newEngine(opts: ConstructorParameters<typeof TransferEngine>[0]): TransferEngine {
  const e = new TransferEngine({ ...ports, env: {}, ...opts });
  engines.push(e);
  e.start();
  e.registerRegion(h.local.address, h.local.size);
  return e;
}

const SIZES = [1, 7, 4096, 64 * KiB + 3, MiB + 1, 4 * MiB + 5, 64 * MiB];

// TCP with the default 1 MiB chunks and with odd 100,000-byte chunks striped over 4 connections
// (many chunks per op, finishing out of order); shm, whose chunks are copied on the I/O threads
// (and up to 64 KiB inline on the calling thread).
describe.each([
  ['TCP', { shmTransport: false }],
  ['TCP, 100000-byte chunks', { shmTransport: false, chunkSize: 100_000 }],
  ['shm', { shmTransport: true }],
  ['shm, 100000-byte chunks', { shmTransport: true, chunkSize: 100_000 }],
])('over %s', (_name, opts) => {
  let engine: TransferEngine;
  let peer: RegionPeer;

  beforeAll(async () => {
    peer = await startRegionPeer(PEER_SIZE, 4242, { ...ports, shmTransport: opts.shmTransport });
    peers.push(peer);
    engine = newEngine(opts);
    // The channel (and over shm the grant) exist before the timed cases, so small batches run inline.
    await engine.transfer([{ op: 'read', endpoint: peer.endpoint, remoteAddress: peer.address, localAddress: h.local.address, length: 1 }]);
  });

  test.each(SIZES)('READ of %d bytes: the CRC of the bytes that arrived', async (size) => {
    const remoteOffset = 4093;
    const localOffset = 8191;
    localBytes(localOffset, size).fill(0);
    const crcs = await engine.transfer([
      { op: 'read', endpoint: peer.endpoint, remoteAddress: peer.address + remoteOffset, localAddress: h.local.address + localOffset, length: size, checksum: true },
    ]);
    expect(Object.prototype.toString.call(crcs)).toBe('[object Uint32Array]'); // the addon's realm, not jest's
    expect(crcs!.length).toBe(1);
    const want = await peer.crc32c(remoteOffset, size);
    expect(crcs![0]).toBe(want);
    expect(crc32c(localBytes(localOffset, size))).toBe(want);
  });

  test.each(SIZES)('WRITE of %d bytes: the CRC of the bytes sent', async (size) => {
    const remoteOffset = 12345;
    const src = localBytes(3, size);
    randomFillSync(src);
    const crcs = await engine.transfer([
      { op: 'write', endpoint: peer.endpoint, remoteAddress: peer.address + remoteOffset, localAddress: h.local.address + 3, length: size, checksum: true },
    ]);
    expect(crcs!.length).toBe(1);
    expect(crcs![0]).toBe(crc32c(src));
    expect(await peer.crc32c(remoteOffset, size)).toBe(crc32c(src));
  });

  test('a batch where only some ops ask: their CRCs in op order, 0 for the others; none asked: undefined', async () => {
    // Large and small ops, reads and writes, one empty op that asks (the CRC of nothing is 0).
    const lengths = [3 * MiB + 17, 100, 0, 65_537, 1, 2 * MiB];
    const ops: TransferOp[] = lengths.map((length, i) => ({
      op: i % 2 === 0 ? 'write' : 'read',
      endpoint: peer.endpoint,
      remoteAddress: peer.address + i * 8 * MiB + 11,
      localAddress: h.local.address + i * 8 * MiB + 5,
      length,
      checksum: i !== 1 && i !== 4,
    }));
    for (const o of ops) if (o.op === 'write') randomFillSync(localBytes(o.localAddress - h.local.address, o.length));
    const crcs = await engine.transfer(ops);
    expect(crcs!.length).toBe(ops.length);
    for (let i = 0; i < ops.length; i++) {
      const o = ops[i];
      const want = o.checksum ? crc32c(localBytes(o.localAddress - h.local.address, o.length)) : 0;
      expect([i, crcs![i]]).toEqual([i, want]);
      if (o.checksum && o.length > 0) expect([i, await peer.crc32c(o.remoteAddress - peer.address, o.length)]).toEqual([i, want]);
    }
    expect(await engine.transfer(ops.map((o) => ({ ...o, checksum: false })))).toBeUndefined();
    expect(await engine.transfer([])).toBeUndefined();
  });

  test('a small batch of several ops (inline over shm) with checksums', async () => {
    const ops: TransferOp[] = [0, 1, 2, 3].map((i) => ({
      op: i === 2 ? 'write' : 'read',
      endpoint: peer.endpoint,
      remoteAddress: peer.address + 40 * MiB + i * 9000 + 1,
      localAddress: h.local.address + 40 * MiB + i * 9000 + 7,
      length: 4096 + i,
      checksum: i !== 3,
    }));
    randomFillSync(localBytes(ops[2].localAddress - h.local.address, ops[2].length));
    const crcs = await engine.transfer(ops);
    for (let i = 0; i < 4; i++) {
      const o = ops[i];
      expect([i, crcs![i]]).toEqual([i, o.checksum ? await peer.crc32c(o.remoteAddress - peer.address, o.length) : 0]);
      if (o.checksum) expect(crcs![i]).toBe(crc32c(localBytes(o.localAddress - h.local.address, o.length)));
    }
  });

  test('a batch of 40 ops, past the 32 whose requests travel as a bit mask', async () => {
    const ops: TransferOp[] = Array.from({ length: 40 }, (_, i) => ({
      op: 'read',
      endpoint: peer.endpoint,
      remoteAddress: peer.address + 50 * MiB + i * 5000 + 3,
      localAddress: h.local.address + 50 * MiB + i * 5000,
      length: 1000 + i,
      checksum: i % 3 !== 1,
    }));
    const crcs = await engine.transfer(ops);
    expect(crcs!.length).toBe(40);
    for (let i = 0; i < 40; i++) {
      const o = ops[i];
      expect([i, crcs![i]]).toEqual([i, o.checksum ? crc32c(localBytes(o.localAddress - h.local.address, o.length)) : 0]);
    }
    expect(crcs![39]).toBe(await peer.crc32c(ops[39].remoteAddress - peer.address, ops[39].length));
  });

  test('readInlineCrc: the CRC of what it copied, or -1 when it cannot copy', async () => {
    const target = Buffer.alloc(4096);
    const got = engine.readInlineCrc(peer.endpoint, peer.address + 4097, target);
    if (!opts.shmTransport) {
      expect(got).toBe(-1); // TCP peers are never read inline
      return;
    }
    expect(got).toBe(await peer.crc32c(4097, 4096));
    expect(crc32c(target)).toBe(got);
    expect(got).toBe(got >>> 0); // unsigned
    // Past the region, over the inline size, another incarnation: nothing copied.
    const untouched = Buffer.alloc(4096, 7);
    expect(engine.readInlineCrc(peer.endpoint, peer.address + PEER_SIZE - 100, untouched)).toBe(-1);
    expect(engine.readInlineCrc(peer.endpoint, peer.address, untouched, peer.incarnation + 1)).toBe(-1);
    expect(untouched.every((x) => x === 7)).toBe(true);
    expect(engine.readInlineCrc(peer.endpoint, peer.address, Buffer.alloc(64 * KiB + 1))).toBe(-1);
    const small = Buffer.alloc(3);
    expect(engine.readInlineCrc(peer.endpoint, peer.address + 5, small, peer.incarnation)).toBe(crc32c(small));
    expect(crc32c(small)).toBe(await peer.crc32c(5, 3));
  });
});

test('readInlineCrc returns -1 before a channel exists, and after close()', async () => {
  const p = await startRegionPeer(8 * MiB, 5, { ...ports, shmTransport: true });
  peers.push(p);
  const e = newEngine({ shmTransport: true });
  const target = Buffer.alloc(100);
  expect(e.readInlineCrc(p.endpoint, p.address, target)).toBe(-1);
  await e.transfer([{ op: 'read', endpoint: p.endpoint, remoteAddress: p.address, localAddress: h.local.address, length: 1 }]);
  expect(e.readInlineCrc(p.endpoint, p.address, target)).toBe(await p.crc32c(0, 100));
  expect(() => e.readInlineCrc(p.endpoint, -1, target)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  e.close();
  expect(e.readInlineCrc(p.endpoint, p.address, target)).toBe(-1);
});

test('the local memcpy path (memcpyLocal) checksums inline and on the I/O threads, and readInlineCrc', async () => {
  const e = newEngine({ memcpyLocal: true, shmTransport: false });
  const b = mapMemory({ size: 16 * MiB });
  try {
    e.registerRegion(b.address, b.size);
    randomFillSync(new Uint8Array(b.buffer));
    const bBytes = (offset: number, length: number) => new Uint8Array(b.buffer, offset, length);
    for (const size of [1, 4096 + 1, 64 * KiB, 5 * MiB + 3]) {
      localBytes(0, size).fill(0);
      const [readCrc] = (await e.transfer([
        { op: 'read', endpoint: e.endpoint, remoteAddress: b.address + 101, localAddress: h.local.address + 9, length: size, checksum: true },
      ]))!;
      expect([size, readCrc]).toEqual([size, crc32c(bBytes(101, size))]);
      expect(crc32c(localBytes(9, size))).toBe(readCrc);
      randomFillSync(localBytes(9, size));
      const [writeCrc] = (await e.transfer([
        { op: 'write', endpoint: e.endpoint, remoteAddress: b.address + 77, localAddress: h.local.address + 9, length: size, checksum: true },
      ]))!;
      expect([size, writeCrc]).toEqual([size, crc32c(localBytes(9, size))]);
      expect(crc32c(bBytes(77, size))).toBe(writeCrc);
    }
    const target = Buffer.alloc(4000);
    expect(e.readInlineCrc(e.endpoint, b.address + 33, target)).toBe(crc32c(bBytes(33, 4000)));
    expect(crc32c(target)).toBe(crc32c(bBytes(33, 4000)));
    expect(e.readInlineCrc(e.endpoint, b.address + b.size - 10, target)).toBe(-1);
    // A batch inside one region whose ranges overlap (memmove): the CRC of the source as it was.
    const [overlap] = (await e.transfer([{ op: 'write', endpoint: e.endpoint, remoteAddress: b.address + 1000, localAddress: b.address + 3000, length: 5000, checksum: true }]))!;
    expect(overlap).toBe(crc32c(bBytes(1000, 5000))); // the destination now holds exactly what was sent
  } finally {
    await e.unregisterRegion(b.address);
    b.release();
  }
});

test('a failed batch resolves no checksum (it rejects)', async () => {
  const p = await startRegionPeer(8 * MiB, 6, { ...ports, shmTransport: false });
  peers.push(p);
  const e = newEngine({ shmTransport: false });
  await expect(
    e.transfer([
      { op: 'read', endpoint: p.endpoint, remoteAddress: p.address, localAddress: h.local.address, length: 4096, checksum: true },
      { op: 'read', endpoint: p.endpoint, remoteAddress: p.address + 8 * MiB - 10, localAddress: h.local.address, length: 4096, checksum: true },
    ]),
  ).rejects.toMatchObject({ code: 'ADDRESS_OUT_OF_RANGE' });
});
