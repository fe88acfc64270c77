// READs over TCP of a region mapped from a file on a device (an SSD offload file): served from
// the file (sendfile), not by faulting the mapping in. Bytes that are not in memory arrive intact
// and only they are read from the device (a fault would read the mapping's whole read-around
// window); bytes written through the mapping or by a WRITE are read back; a range the file cannot
// supply fails that batch, is counted (fileReadErrors), and the serving process serves the rest.
// The peer is a separate process mapping a file of this test; its cache is dropped with
// `dd iflag=nocache` and measured with util-linux `fincore`.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, mkdtempSync, openSync, rmSync, statfsSync, truncateSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TransferEngine, TransferError } from './index.js';
import { engineHarness } from './test-fixtures/engine-harness.js';
import { startRegionPeer, type RegionPeer } from './test-fixtures/region-peer.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const FILE_SIZE = 64 * MiB;
// File systems whose pages never leave memory (tmpfs, ramfs): a file there is served from its mapping.
const MEMORY_FS = new Set([0x01021994, 0x858458f6]);

const dir = mkdtempSync(join(tmpdir(), 'kvstore-paged-'));
const onDevice = !MEMORY_FS.has(statfsSync(dir).type);
const tools = spawnSync('fincore', ['--version']).status === 0 && spawnSync('dd', ['--version']).status === 0;
const why = !onDevice ? `${tmpdir()} is a memory file system (tmpfs): no file on a device to test with` : !tools ? 'util-linux fincore or coreutils dd missing' : '';
const maybe = why ? test.skip : test;

const h = engineHarness(16 * MiB);
let engine: TransferEngine;

beforeAll(() => {
  engine = new TransferEngine({ minPort: 20000, maxPort: 32000, shmTransport: false, env: {} });
  h.engines.push(engine);
  engine.start();
  engine.registerRegion(h.local.address, h.local.size);
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A file of `size` random bytes, written back and dropped from the page cache. */
function coldFile(name: string, size: number): { path: string; content: Buffer } {
  const path = join(dir, name);
  const content = randomBytes(size);
  const fd = openSync(path, 'w');
  try {
    writeSync(fd, content);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  dropCache(path);
  return { path, content };
}

function dropCache(path: string): void {
  execFileSync('dd', [`if=${path}`, 'iflag=nocache', 'count=0', 'status=none']);
}

/** Bytes of the file in the page cache. */
function cachedBytes(path: string): number {
  return Number(execFileSync('fincore', ['--bytes', '--noheadings', '--output', 'RES', path], { encoding: 'utf8' }).trim());
}

/** A peer serving `size` bytes of the file from `offset` as its region. */
async function filePeer(path: string, size: number, offset = 0): Promise<RegionPeer> {
  const p = await startRegionPeer(size, 0, { regionPath: path, regionOffset: offset });
  h.peers.push(p);
  return p;
}

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

async function read(peer: RegionPeer, offset: number, length: number): Promise<Uint8Array> {
  const dst = new Uint8Array(h.local.buffer, 0, length);
  dst.fill(0);
  await engine.transfer([{ op: 'read', endpoint: peer.endpoint, remoteAddress: peer.address + offset, localAddress: h.local.address, length, incarnation: peer.incarnation }]);
  return dst;
}

describe(`paged file regions${why ? ` (skipped: ${why})` : ''}`, () => {
  maybe('a READ of bytes not in memory arrives intact and reads only its own pages from the device', async () => {
    const { path, content } = coldFile('cold.bin', FILE_SIZE);
    const peer = await filePeer(path, FILE_SIZE);
    expect(cachedBytes(path)).toBe(0);
    // 64 KiB in the middle: a fault would have read the mapping's read-around window (128 KiB
    // with the kernel's default read-ahead, 8 MiB on the machine this was written on)
    const at = 32 * MiB;
    expect(sha(await read(peer, at, 64 * KiB))).toBe(sha(content.subarray(at, at + 64 * KiB)));
    expect(cachedBytes(path)).toBe(64 * KiB);
    // unaligned ranges and an op of several chunks (1 MiB each, on several connections)
    for (const [offset, length] of [
      [4093, 1],
      [8 * MiB + 4093, 65536 + 3],
      [16 * MiB + 1, MiB + 7],
      [40 * MiB + 12345, 4 * MiB + 1],
      [FILE_SIZE - 9 * MiB, 9 * MiB],
    ]) {
      dropCache(path);
      expect(sha(await read(peer, offset, length))).toBe(sha(content.subarray(offset, offset + length)));
    }
    expect((await peer.stats()).fileReadErrors).toBe(0);
    // a region mapped from further into the file (an offload file's later segments)
    const later = await filePeer(path, 16 * MiB, 48 * MiB);
    dropCache(path);
    expect(sha(await read(later, 3 * MiB + 5, 2 * MiB))).toBe(sha(content.subarray(51 * MiB + 5, 53 * MiB + 5)));
  });

  maybe('a run of READs of neighbouring ranges is read ahead of; scattered READs and reads again are not', async () => {
    const { path, content } = coldFile('run.bin', FILE_SIZE);
    const peer = await filePeer(path, FILE_SIZE);
    // scattered 64 KiB READs, one of them read twice: the device reads exactly them
    const scattered = [5, 1, 9, 9, 3, 13, 7].map((i) => i * MiB);
    for (const at of scattered) expect(sha(await read(peer, at, 64 * KiB))).toBe(sha(content.subarray(at, at + 64 * KiB)));
    expect(cachedBytes(path)).toBe(6 * 64 * KiB);
    // 64 KiB objects read in file order from 32 MiB: from the third neighbour on, the file ahead
    // of the run is read in large steps, and what is read ahead is the file's own bytes
    dropCache(path);
    const start = 32 * MiB;
    for (let i = 0; i < 4; i++) {
      const at = start + i * 64 * KiB;
      expect(sha(await read(peer, at, 64 * KiB))).toBe(sha(content.subarray(at, at + 64 * KiB)));
    }
    expect(cachedBytes(path)).toBeGreaterThanOrEqual(2 * MiB);
    for (let i = 4; i < 64; i++) {
      const at = start + i * 64 * KiB;
      expect(sha(await read(peer, at, 64 * KiB))).toBe(sha(content.subarray(at, at + 64 * KiB)));
    }
    const cached = cachedBytes(path);
    expect(cached).toBeGreaterThanOrEqual(4 * MiB);
    expect(cached).toBeLessThanOrEqual(4 * MiB + 3 * MiB); // at most a window and a half beyond the run
    expect((await peer.stats()).fileReadErrors).toBe(0);
    // the run never reads past the end of the region served. A file of its own: read-ahead the
    // run above asked for may still be in flight, and pages under I/O survive a cache drop.
    const other = coldFile('tail.bin', 8 * MiB);
    const tail = await filePeer(other.path, 2 * MiB, 4 * MiB);
    for (let i = 0; i < 32; i++) await read(tail, i * 64 * KiB, 64 * KiB);
    expect(cachedBytes(other.path)).toBe(2 * MiB);
    expect((await tail.stats()).fileReadErrors).toBe(0);
  });

  maybe('bytes written through the mapping or by a WRITE are what a READ returns', async () => {
    const { path, content } = coldFile('written.bin', 8 * MiB);
    const peer = await filePeer(path, 8 * MiB);
    await peer.fill(MiB + 3, 100_000, 0xab); // the peer's own store into its mapping
    const expected = Buffer.from(content);
    expected.fill(0xab, MiB + 3, MiB + 3 + 100_000);
    const src = new Uint8Array(h.local.buffer, 8 * MiB, 2 * MiB + 5);
    src.set(randomBytes(src.length));
    await engine.transfer([{ op: 'write', endpoint: peer.endpoint, remoteAddress: peer.address + 5 * MiB + 1, localAddress: h.local.address + 8 * MiB, length: src.length }]);
    expected.set(src, 5 * MiB + 1);
    expect(sha(await read(peer, 0, 8 * MiB))).toBe(sha(expected));
  });

  maybe('a range the file cannot supply fails its batch and is counted; the serving process serves the rest', async () => {
    const { path, content } = coldFile('short.bin', 8 * MiB);
    const peer = await filePeer(path, 8 * MiB);
    truncateSync(path, 4 * MiB); // the mapping still spans 8 MiB: its second half has no file behind it
    const err = await read(peer, 6 * MiB, 64 * KiB).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(TransferError);
    expect((err as TransferError).code).toBe('TRANSFER_FAILED');
    expect(sha(await read(peer, MiB, 64 * KiB))).toBe(sha(content.subarray(MiB, MiB + 64 * KiB)));
    expect((await peer.stats()).fileReadErrors).toBe(1);
  });
});
