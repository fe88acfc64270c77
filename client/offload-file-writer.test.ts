// Positioned writes of replica copies into own SSD files (offload-file-writer.ts): every range
// lands at its place whatever the order given, a failing file fails only its own ranges, and
// `settled` waits for the writes in flight on a segment (a write fence's ack waits on it).
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OffloadFileWriter, WRITE_MAX_BYTES, writePieces, type FileRange } from './offload-file-writer.js';

describe('OffloadFileWriter', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'kvstore-ofw-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const bytes = (n: number, fill: number): Buffer => Buffer.alloc(n, fill);

  it('writes each range at its position, adjacent or not, in any order given', async () => {
    const fd = openSync(join(dir, 'f'), 'w+');
    try {
      const ranges: FileRange[] = [
        { segment: 's', fd, position: 8192, data: bytes(4096, 3) },
        { segment: 's', fd, position: 0, data: bytes(4096, 1) },
        { segment: 's', fd, position: 4096, data: bytes(4096, 2) }, // adjacent to the one before: one pwritev
        { segment: 's', fd, position: 20_000, data: bytes(100, 9) },
      ];
      expect(await new OffloadFileWriter().write(ranges)).toEqual([undefined, undefined, undefined, undefined]);
      const f = readFileSync(join(dir, 'f'));
      expect(f.subarray(0, 4096).every((b) => b === 1)).toBe(true);
      expect(f.subarray(4096, 8192).every((b) => b === 2)).toBe(true);
      expect(f.subarray(8192, 12288).every((b) => b === 3)).toBe(true);
      expect(f.subarray(12288, 20_000).every((b) => b === 0)).toBe(true); // a hole
      expect(f.subarray(20_000, 20_100).every((b) => b === 9)).toBe(true);
    } finally {
      closeSync(fd);
    }
  });

  it('joins adjacent ranges of a file into one write call and splits every call at WRITE_MAX_BYTES', () => {
    const r = (fd: number, position: number, n: number): FileRange => ({ segment: 's', fd, position, data: Buffer.alloc(n) });
    const KiB = 1024;
    const pieces = writePieces([
      r(3, 64 * KiB, 64 * KiB), // given out of order: sorted by file and position
      r(3, 0, 64 * KiB),
      r(3, 128 * KiB, 64 * KiB),
      r(3, 192 * KiB, 64 * KiB),
      r(3, 256 * KiB, 64 * KiB), // adjacent, but the call before is full
      r(3, 1024 * KiB, 4 * 1024 * KiB), // a 4 MiB copy: 16 calls
      r(4, 320 * KiB, 64 * KiB), // another file
    ]);
    expect(pieces.map((p) => [p.fd, p.position / KiB, p.bytes / KiB, p.ranges])).toEqual([
      [3, 0, 256, [1, 0, 2, 3]],
      [3, 256, 64, [4]],
      ...Array.from({ length: 16 }, (_, i) => [3, 1024 + 256 * i, 256, [5]]),
      [4, 320, 64, [6]],
    ]);
    expect(Math.max(...pieces.map((p) => p.bytes))).toBe(WRITE_MAX_BYTES);
  });

  it('a file that cannot be written fails its own ranges only', async () => {
    const good = openSync(join(dir, 'good'), 'w+');
    const readOnly = openSync(join(dir, 'good'), 'r');
    try {
      const out = await new OffloadFileWriter().write([
        { segment: 'a', fd: readOnly, position: 0, data: bytes(10, 1) },
        { segment: 'b', fd: good, position: 0, data: bytes(10, 2) },
      ]);
      expect(out[0]?.message).toMatch(/EBADF/);
      expect(out[1]).toBeUndefined();
      expect(readFileSync(join(dir, 'good')).equals(bytes(10, 2))).toBe(true);
    } finally {
      closeSync(good);
      closeSync(readOnly);
    }
  });

  it('settled(segment) resolves once the writes started on it have ended', async () => {
    const fd = openSync(join(dir, 'f'), 'w+');
    try {
      const w = new OffloadFileWriter();
      const writing = w.write([{ segment: 's', fd, position: 0, data: bytes(1 << 20, 7) }]);
      await w.settled('other'); // nothing on another segment: at once
      await w.settled('s');
      expect(readFileSync(join(dir, 'f')).equals(bytes(1 << 20, 7))).toBe(true);
      expect(await writing).toEqual([undefined]);
    } finally {
      closeSync(fd);
    }
  });
});
