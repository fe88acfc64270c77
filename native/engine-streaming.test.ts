// The chunks of large WRITEs are copied with streaming (non-temporal) stores on the memcpy paths
// (the shm transport and memcpyLocal; chunk_copy.h StreamedOp), from 256 KiB. Those copies have
// their own head and tail handling (a destination not aligned to a cache line, lengths that are not
// whole lines), so every case here lands at odd offsets with odd lengths and odd chunk sizes, with
// and without the fused CRC-32C, and checks that every byte arrived, that the bytes just before and
// after the range were not touched, and the CRC. READs (ordinary stores) are checked the same way.
import { createHash, randomFillSync } from 'node:crypto';
import { crc32c, mapMemory, TransferEngine, type MemoryRegion } from './index.js';
import { engineHarness } from './test-fixtures/engine-harness.js';
import { startRegionPeer, type RegionPeer } from './test-fixtures/region-peer.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const ports = { minPort: 20000, maxPort: 32000 };
const GUARD = 4 * KiB;
const FILL = 0xa5;

const h = engineHarness(24 * MiB);
const { engines, peers } = h;

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const filledSha = (length: number) => sha(new Uint8Array(length).fill(FILL));

// Around the 256 KiB of StreamedOp and the 2 MiB from which one fused copy streams by itself;
// odd lengths, so no copy ends on a line boundary.
const SIZES = [256 * KiB - 1, 256 * KiB + 7, MiB + 3, 2 * MiB - 1, 2 * MiB + 13, 5 * MiB + 3];

/** Where the bytes go and how they are read back: a peer process's region (shm) or a second local region (memcpyLocal). */
interface Target {
  endpoint: string;
  address: number;
  sha256(offset: number, length: number): Promise<string>;
  crc32c(offset: number, length: number): Promise<number>;
  fill(offset: number, length: number, byte: number): Promise<void>;
}

function localTarget(engine: TransferEngine, region: MemoryRegion): Target {
  const bytes = (offset: number, length: number) => new Uint8Array(region.buffer, offset, length);
  return {
    endpoint: engine.endpoint,
    address: region.address,
    sha256: async (offset, length) => sha(bytes(offset, length)),
    crc32c: async (offset, length) => crc32c(bytes(offset, length)),
    fill: async (offset, length, byte) => void bytes(offset, length).fill(byte),
  };
}

describe.each([
  ['shm', { shmTransport: true }],
  ['shm, 100003-byte chunks', { shmTransport: true, chunkSize: 100_003 }],
  ['memcpyLocal', { memcpyLocal: true, shmTransport: false }],
  ['memcpyLocal, 100003-byte chunks', { memcpyLocal: true, shmTransport: false, chunkSize: 100_003 }],
])('large ops over %s', (name, opts) => {
  let engine: TransferEngine;
  let target: Target;
  let second: MemoryRegion | undefined;
  const localBytes = (offset: number, length: number) => new Uint8Array(h.local.buffer, offset, length);

  beforeAll(async () => {
    engine = new TransferEngine({ ...ports, env: {}, ...opts });
    engines.push(engine);
    engine.start();
    engine.registerRegion(h.local.address, h.local.size);
    if (name.startsWith('shm')) {
      const peer: RegionPeer = await startRegionPeer(24 * MiB, 77, { ...ports, shmTransport: true });
      peers.push(peer);
      target = peer;
    } else {
      second = mapMemory({ size: 24 * MiB });
      randomFillSync(new Uint8Array(second.buffer));
      engine.registerRegion(second.address, second.size);
      target = localTarget(engine, second);
    }
  });

  afterAll(async () => {
    if (second) {
      await engine.unregisterRegion(second.address);
      second.release();
    }
  });

  test.each(SIZES.flatMap((size) => [false, true].map((checksum) => [size, checksum] as const)))(
    'WRITE of %d bytes (checksum %s): every byte lands, the bytes around the range are untouched',
    async (size, checksum) => {
      const at = GUARD + 61; // not on a cache line
      await target.fill(at - GUARD, size + 2 * GUARD, FILL);
      const src = localBytes(5, size);
      randomFillSync(src);
      const crcs = await engine.transfer([
        { op: 'write', endpoint: target.endpoint, remoteAddress: target.address + at, localAddress: h.local.address + 5, length: size, checksum },
      ]);
      expect(await target.sha256(at, size)).toBe(sha(src));
      expect([await target.sha256(at - GUARD, GUARD), await target.sha256(at + size, GUARD)]).toEqual([filledSha(GUARD), filledSha(GUARD)]);
      if (checksum) expect(crcs![0]).toBe(crc32c(src));
      else expect(crcs).toBeUndefined();
    },
  );

  test.each(SIZES.flatMap((size) => [false, true].map((checksum) => [size, checksum] as const)))(
    'READ of %d bytes (checksum %s): every byte lands, the bytes around the range are untouched',
    async (size, checksum) => {
      const from = 4093;
      const at = GUARD + 3;
      localBytes(at - GUARD, size + 2 * GUARD).fill(FILL);
      const crcs = await engine.transfer([
        { op: 'read', endpoint: target.endpoint, remoteAddress: target.address + from, localAddress: h.local.address + at, length: size, checksum },
      ]);
      expect(sha(localBytes(at, size))).toBe(await target.sha256(from, size));
      expect([sha(localBytes(at - GUARD, GUARD)), sha(localBytes(at + size, GUARD))]).toEqual([filledSha(GUARD), filledSha(GUARD)]);
      if (checksum) expect(crcs![0]).toBe(await target.crc32c(from, size));
    },
  );
});
