// Positioned writes of replica copies into own SSD files (offload-file-writer.ts): every range
// lands at its place whatever the order given, a failing file fails only its own ranges, and
// `settled` waits for the writes in flight on a segment (a write fence's ack waits on it), and
// `lastStarted` says when a batch is down to its last call (the copier asks for more then).
// Page-aligned ranges from mapped memory go out with O_DIRECT, the rest buffered, and a direct
// write the file refuses is made buffered.
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mapMemory } from '../native/index.js';
import { DIRECT_MAX_BYTES, OffloadFileWriter, WRITE_MAX_BYTES, writePieces, type FileRange } from './offload-file-writer.js';

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

  it('lastStarted: called once the last of several calls starts, the others written; never for a single call', async () => {
    const fd = openSync(join(dir, 'f'), 'w+');
    try {
      const w = new OffloadFileWriter();
      const at: number[] = [];
      let next: Promise<(Error | undefined)[]> | undefined;
      const three = w.write(
        [0, 1, 2].map((i) => ({ segment: 's', fd, position: i * 8192, data: bytes(4096, i + 1) })), // not adjacent: three calls
        () => {
          at.push(w.counts.bufferedBytes);
          // lined up behind the last call (the copier's next batch)
          next = w.write([{ segment: 's', fd, position: 3 * 8192, data: bytes(4096, 4) }], () => at.push(-1));
        },
      );
      expect(await three).toEqual([undefined, undefined, undefined]);
      expect(at).toEqual([8192]); // the first two calls written, the last one started
      expect(await next).toEqual([undefined]); // a single call: no lastStarted
      expect(at).toEqual([8192]);
      const f = readFileSync(join(dir, 'f'));
      for (let i = 0; i < 4; i++) expect(f.subarray(i * 8192, i * 8192 + 4096).every((b) => b === i + 1)).toBe(true);
    } finally {
      closeSync(fd);
    }
  });

  it('page-aligned ranges go out through the O_DIRECT descriptor in calls of up to DIRECT_MAX_BYTES, the rest buffered, never both in one call', () => {
    const KiB = 1024;
    const r = (position: number, n: number, address?: number): FileRange => ({ segment: 's', fd: 3, position, data: Buffer.alloc(n), address });
    const pieces = writePieces(
      [
        r(0, 64 * KiB, 0x7f00_0000_0000), // aligned: direct
        r(64 * KiB, 64 * KiB, 0x7f00_0001_0000), // adjacent and aligned: the same direct call
        r(128 * KiB, 64 * KiB), // adjacent, but its address is not known: buffered
        r(192 * KiB, 64 * KiB + 8, 0x7f00_0002_0000), // its length is not a multiple of the page: buffered
        r(1024 * KiB, 64 * KiB, 0x7f00_0003_0008), // its address is not aligned: buffered
        r(2048 * KiB, 8 * 1024 * KiB, 0x7f00_1000_0000), // 8 MiB aligned: two direct calls
      ],
      () => 99,
    );
    expect(pieces.map((p) => [p.direct ?? 'buffered', p.position / KiB, p.bytes / KiB, p.ranges])).toEqual([
      ['buffered', 128, 128 + 8 / KiB, [2, 3]],
      ['buffered', 1024, 64, [4]],
      [99, 0, 128, [0, 1]],
      [99, 2048, 4096, [5]],
      [99, 6144, 4096, [5]],
    ]);
    expect(Math.max(...pieces.filter((p) => p.direct !== undefined).map((p) => p.bytes))).toBe(DIRECT_MAX_BYTES);
  });

  it('writes page-aligned ranges of mapped memory with O_DIRECT (buffered when told not to), every byte at its place', async () => {
    const KiB = 1024;
    const mem = mapMemory({ size: 8 * 64 * KiB });
    try {
      const view = mem.view(0, mem.size);
      for (let i = 0; i < view.length; i++) view[i] = (i * 7 + (i >> 16)) & 0xff;
      for (const direct of [true, false]) {
        const path = join(dir, `f-${direct}`);
        const fd = openSync(path, 'w+');
        try {
          const w = new OffloadFileWriter({ direct });
          // eight 64 KiB objects placed one after another from 256 KiB on, given in another order
          const ranges: FileRange[] = [3, 0, 1, 2, 7, 5, 6, 4].map((k) => ({
            segment: 's',
            fd,
            position: 256 * KiB + 64 * KiB * k,
            data: mem.view(64 * KiB * k, 64 * KiB),
            address: mem.address + 64 * KiB * k,
          }));
          expect(await w.write(ranges)).toEqual(ranges.map(() => undefined));
          expect(w.counts).toEqual(direct ? { directBytes: 512 * KiB, bufferedBytes: 0 } : { directBytes: 0, bufferedBytes: 512 * KiB });
          w.release('s');
          const f = readFileSync(path);
          expect(f.length).toBe(768 * KiB);
          expect(f.subarray(0, 256 * KiB).every((b) => b === 0)).toBe(true);
          expect(f.subarray(256 * KiB).equals(view)).toBe(true);
        } finally {
          closeSync(fd);
        }
      }
    } finally {
      mem.release();
    }
  });

  it("a direct write the file refuses (EINVAL) is written buffered, and so are its file's later writes", async () => {
    const KiB = 1024;
    const mem = mapMemory({ size: 128 * KiB });
    const fd = openSync(join(dir, 'f'), 'w+');
    try {
      mem.view(0, mem.size).fill(5);
      const w = new OffloadFileWriter();
      // said to start at an aligned address, but the bytes lie one past it: the kernel refuses the direct write
      const wrong: FileRange = { segment: 's', fd, position: 0, data: mem.view(1, 64 * KiB), address: mem.address };
      expect(await w.write([wrong])).toEqual([undefined]);
      expect(w.counts).toEqual({ directBytes: 0, bufferedBytes: 64 * KiB });
      const right: FileRange = { segment: 's', fd, position: 64 * KiB, data: mem.view(0, 64 * KiB), address: mem.address };
      expect(await w.write([right])).toEqual([undefined]);
      expect(w.counts).toEqual({ directBytes: 0, bufferedBytes: 128 * KiB }); // the file refused one: buffered from now on
      w.close();
      expect(readFileSync(join(dir, 'f')).equals(Buffer.alloc(128 * KiB, 5))).toBe(true);
    } finally {
      closeSync(fd);
      mem.release();
    }
  });
});
