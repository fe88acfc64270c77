// CRC-32C primitives: known vectors (RFC 3720 B.4, "123456789"), every backend against a bitwise
// reference on random lengths and unaligned offsets, each backend forced through
// KVSTORE_CRC32C_IMPL in a child process, the aarch64 backend under qemu-user, combine against the
// CRC of the whole, copyWithCrc32c against copy + crc (including overlapping views and the
// streaming-store sizes), bad arguments.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import fc from 'fast-check';
import { ChecksumError, copyWithCrc32c, copyWithCrc32cUsing, crc32c, crc32cCombine, crc32cImplementations, crc32cUsing, type Crc32cImplementation } from './index.js';
import { addonPath, ensureAddon, nativeDir } from './test-fixtures/ensure-addon.js';

beforeAll(() => ensureAddon());

const KiB = 1024;
const MiB = 1024 * KiB;

/** The definition: one bit at a time, reflected polynomial 0x82F63B78, pre/post inversion. */
function referenceCrc32c(data: Uint8Array, seed = 0): number {
  let c = ~seed >>> 0;
  for (let i = 0; i < data.length; i++) {
    c ^= data[i];
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
  }
  return ~c >>> 0;
}

/** Deterministic bytes (xorshift), so a failure reproduces. */
function pseudoRandomBytes(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

const implementations = (): Crc32cImplementation[] => crc32cImplementations().available;

// RFC 3720 appendix B.4 (the CRC bytes there are listed in wire order, least significant first).
const iscsiReadPdu = Uint8Array.from([
  0x01, 0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x14, 0, 0, 0, 0, 0, 0x04, 0, 0, 0, 0, 0x14, 0, 0, 0, 0x18, 0x28, 0, 0, 0, 0, 0, 0, 0, 0x02, 0, 0, 0, 0, 0, 0, 0,
]);
const vectors: Array<[string, Uint8Array, number]> = [
  ['empty', new Uint8Array(0), 0],
  ['"123456789"', new TextEncoder().encode('123456789'), 0xe3069283],
  ['32 zero bytes', new Uint8Array(32), 0x8a9136aa],
  ['32 bytes 0xff', new Uint8Array(32).fill(0xff), 0x62a8ab43],
  ['32 incrementing', Uint8Array.from({ length: 32 }, (_, i) => i), 0x46dd794e],
  ['32 decrementing', Uint8Array.from({ length: 32 }, (_, i) => 31 - i), 0x113fdb5c],
  ['iSCSI read PDU', iscsiReadPdu, 0xd9963a56],
];

describe('known vectors', () => {
  it.each(vectors)('%s', (_name, data, expected) => {
    expect(referenceCrc32c(data)).toBe(expected);
    expect(crc32c(data)).toBe(expected);
    for (const impl of implementations()) expect(crc32cUsing(impl, data)).toBe(expected);
  });

  it('reports the backends; this x86-64 CI machine has the hardware ones', () => {
    const { active, available } = crc32cImplementations();
    expect(available).toContain('portable');
    expect(available).toContain(active);
    if (process.arch === 'x64') expect(available).toContain('sse42');
  });
});

describe('every backend agrees with the bitwise reference', () => {
  const pool = pseudoRandomBytes(64 * KiB + 64, 0x1234);

  it('every length 0..1100 at every offset 0..7 (block and tail boundaries)', () => {
    for (const impl of implementations()) {
      for (let offset = 0; offset < 8; offset++) {
        let ref = 0xffffffff; // running bitwise register over pool[offset..]
        for (let len = 0; len <= 1100; len++) {
          const got = crc32cUsing(impl, pool.subarray(offset, offset + len));
          if (got !== ~ref >>> 0) throw new Error(`${impl}: length ${len} offset ${offset}: ${got.toString(16)} != ${(~ref >>> 0).toString(16)}`);
          ref ^= pool[offset + len];
          for (let k = 0; k < 8; k++) ref = ref & 1 ? (ref >>> 1) ^ 0x82f63b78 : ref >>> 1;
        }
      }
    }
  });

  it('random lengths 0..64 KiB, unaligned offsets, random seeds', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 64 * KiB }), fc.integer({ min: 0, max: 63 }), fc.integer({ min: 0, max: 0xffffffff }), (len, offset, seed) => {
        const view = pool.subarray(offset, offset + len);
        const expected = referenceCrc32c(view, seed);
        for (const impl of implementations()) expect(crc32cUsing(impl, view, seed)).toBe(expected);
        expect(crc32c(view, seed)).toBe(expected);
      }),
      { numRuns: 150 },
    );
  });

  it('lengths at the multiples of the three-stream blocks (192 B, 1.5 KiB, 12 KiB) and of the 256-byte fold', () => {
    const big = pseudoRandomBytes(40 * KiB, 99);
    const lengths = [191, 192, 193, 255, 256, 257, 319, 320, 1535, 1536, 1537, 12 * KiB - 1, 12 * KiB, 12 * KiB + 1, 24 * KiB + 7, 36 * KiB + 200];
    for (const len of lengths) {
      const expected = referenceCrc32c(big.subarray(3, 3 + len), 77);
      for (const impl of implementations()) expect([impl, len, crc32cUsing(impl, big.subarray(3, 3 + len), 77)]).toEqual([impl, len, expected]);
    }
  });

  it('multi-MiB buffers', () => {
    const big = pseudoRandomBytes(3 * MiB + 13, 7);
    const expected = referenceCrc32c(big);
    for (const impl of implementations()) expect(crc32cUsing(impl, big)).toBe(expected);
  });

  it('chains: crc32c(b, crc32c(a)) is the CRC of a followed by b', () => {
    const a = pool.subarray(1, 5000);
    const b = pool.subarray(5000, 20000);
    expect(crc32c(b, crc32c(a))).toBe(referenceCrc32c(pool.subarray(1, 20000)));
  });

  it('reads the bytes of any view: DataView, Float64Array, Buffer over a shared pool', () => {
    const bytes = pool.subarray(8, 8 + 800);
    const expected = referenceCrc32c(bytes);
    expect(crc32c(new DataView(pool.buffer, pool.byteOffset + 8, 800))).toBe(expected);
    expect(crc32c(new Float64Array(pool.buffer, pool.byteOffset + 8, 100))).toBe(expected);
    expect(crc32c(Buffer.from(pool.buffer, pool.byteOffset + 8, 800))).toBe(expected);
  });
});

describe('KVSTORE_CRC32C_IMPL forces a backend for the whole process', () => {
  const inChild = (value: string | undefined): { active: string; crc: number } => {
    const script =
      `const a = require(${JSON.stringify(addonPath)});` +
      `const d = Buffer.alloc(70000, 0).map((_, i) => (i * 31 + 7) & 0xff);` +
      `const dst = Buffer.alloc(3 << 20); const src = Buffer.alloc(3 << 20, 0x5c);` +
      `a.copyWithCrc32c(dst, src, 0);` +
      `if (!dst.equals(src)) throw new Error('copy differs');` +
      `console.log(JSON.stringify({ active: a.crc32cInfo().active, crc: a.crc32c(d, 0) }));`;
    const env = { ...process.env };
    delete env.KVSTORE_CRC32C_IMPL;
    if (value !== undefined) env.KVSTORE_CRC32C_IMPL = value;
    return JSON.parse(execFileSync(process.execPath, ['-e', script], { env, encoding: 'utf8' })) as { active: string; crc: number };
  };
  const data = Uint8Array.from({ length: 70000 }, (_, i) => (i * 31 + 7) & 0xff);

  it.each(['portable', 'sse42', 'avx512', 'arm64'])('%s', (impl) => {
    if (!implementations().includes(impl as Crc32cImplementation)) {
      // Not this CPU: the variable must then leave the automatic choice.
      expect(inChild(impl).active).toBe(crc32cImplementations().available.at(-1));
      return;
    }
    expect(inChild(impl)).toEqual({ active: impl, crc: referenceCrc32c(data) });
  });

  it('an unknown name leaves the automatic choice (the best backend)', () => {
    const auto = inChild(undefined);
    expect(inChild('sse5')).toEqual(auto);
    expect(auto.active).toBe(implementations().at(-1));
  });
});

describe('KVSTORE_CRC32C_COPY: how the avx512 backend copies below the streaming size', () => {
  // Each way, in a process of its own (the choice is made once): every length around the vector
  // and 4 KiB steps and at every destination offset within a line, the bytes and the CRC against
  // the portable backend, and nothing written before or after the range.
  const inChild = (value: string | undefined): { method: string; bad: string[] } => {
    const script =
      `const a = require(${JSON.stringify(addonPath)});` +
      `const bad = [];` +
      `const src = Buffer.alloc((1 << 20) + 200).map((_, i) => (i * 131 + (i >> 9)) & 0xff);` +
      `for (const len of [0, 1, 255, 256, 257, 4095, 4096, 4097, 12289, 65536 + 13, (1 << 20) + 7]) {` +
      `  for (let off = 0; off < 64; off += len > 70000 ? 21 : 1) {` +
      `    const s = src.subarray(off % 7, off % 7 + len);` +
      `    const backing = Buffer.alloc(len + 160, 0xee); const dst = backing.subarray(off + 16, off + 16 + len);` +
      `    const crc = a.copyWithCrc32c(dst, s, 99, 'avx512');` +
      `    const guards = backing.subarray(0, off + 16).every((v) => v === 0xee) && backing.subarray(off + 16 + len).every((v) => v === 0xee);` +
      `    if (crc !== a.crc32c(s, 99, 'portable') || !dst.equals(s) || !guards) bad.push(len + '@' + off);` +
      `  }` +
      `}` +
      `console.log(JSON.stringify({ method: a.crc32cInfo().avx512Copy, bad }));`;
    const env = { ...process.env };
    delete env.KVSTORE_CRC32C_COPY;
    if (value !== undefined) env.KVSTORE_CRC32C_COPY = value;
    return JSON.parse(execFileSync(process.execPath, ['-e', script], { env, encoding: 'utf8' })) as { method: string; bad: string[] };
  };
  const avx512 = implementations().includes('avx512');
  const cpuVendor = () => /^vendor_id\s*:\s*(\S+)/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1];

  (avx512 ? it.each : it.skip.each)(['memcpy', 'vector'])(`%s: copies exactly with the right CRC${avx512 ? '' : ' (skipped: this CPU has no AVX-512 backend)'}`, (method) => {
    expect(inChild(method)).toEqual({ method, bad: [] });
  });

  (avx512 ? it : it.skip)(`by default, vector stores on AMD and memcpy + fold elsewhere; other values leave that${avx512 ? '' : ' (skipped: no AVX-512)'}`, () => {
    const auto = inChild(undefined);
    expect(auto).toEqual({ method: cpuVendor() === 'AuthenticAMD' ? 'vector' : 'memcpy', bad: [] });
    expect(inChild('fast').method).toBe(auto.method);
  });
});

describe('the aarch64 backend (cross-compiled, run under qemu-user)', () => {
  const has = (cmd: string) => spawnSync(cmd, ['--version'], { stdio: 'ignore' }).status === 0;
  const tools = has('aarch64-linux-gnu-g++') && has('qemu-aarch64');
  const src = resolve(nativeDir, 'src');
  (tools ? test : test.skip)(
    `the C++ self-test passes for every backend of an aarch64 build${tools ? '' : ' (skipped: needs aarch64-linux-gnu-g++ and qemu-aarch64: apt-get install g++-aarch64-linux-gnu qemu-user)'}`,
    () => {
      const dir = mkdtempSync(join(tmpdir(), 'kvstore-crc-arm64-'));
      try {
        const exe = join(dir, 'selftest');
        const sources = ['crc32c.cc', 'crc32c_portable.cc', 'crc32c_sse42.cc', 'crc32c_avx512.cc', 'crc32c_arm64.cc'].map((f) => join(src, f));
        execFileSync('aarch64-linux-gnu-g++', ['-O2', '-std=c++17', '-static', '-o', exe, resolve(nativeDir, 'test-fixtures/crc32c-selftest.cc'), ...sources]);
        for (const forced of [undefined, 'portable']) {
          const env = { ...process.env, KVSTORE_CRC32C_IMPL: forced ?? '' };
          const out = execFileSync('qemu-aarch64', [exe], { env, encoding: 'utf8' });
          expect(out.trim()).toBe(`ok portable arm64 (active ${forced ?? 'arm64'})`);
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});

describe('crc32cCombine', () => {
  const pool = pseudoRandomBytes(64 * KiB, 4242);

  it('equals the CRC of the whole on random splits', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 64 * KiB }), fc.double({ min: 0, max: 1, noNaN: true }), fc.integer({ min: 0, max: 0xffffffff }), (len, at, seed) => {
        const split = Math.floor(len * at);
        const a = pool.subarray(0, split);
        const b = pool.subarray(split, len);
        expect(crc32cCombine(crc32c(a, seed), crc32c(b), b.length)).toBe(crc32c(pool.subarray(0, len), seed));
      }),
      { numRuns: 300 },
    );
  });

  it('every split of a short buffer, including empty halves', () => {
    const data = pool.subarray(0, 300);
    const whole = referenceCrc32c(data);
    for (let split = 0; split <= data.length; split++) {
      expect(crc32cCombine(referenceCrc32c(data.subarray(0, split)), referenceCrc32c(data.subarray(split)), data.length - split)).toBe(whole);
    }
  });

  it('over long zero runs, and is associative at lengths past 2^32 (BigInt lengths)', () => {
    const zeros = new Uint8Array(5 * MiB + 3);
    const head = pool.subarray(0, 1000);
    const joined = new Uint8Array(head.length + zeros.length);
    joined.set(head);
    expect(crc32cCombine(crc32c(head), crc32c(zeros), zeros.length)).toBe(crc32c(joined));

    fc.assert(
      fc.property(fc.nat(), fc.nat(), fc.nat(), fc.bigInt({ min: 0n, max: 1n << 50n }), fc.bigInt({ min: 0n, max: 1n << 50n }), (a, b, c, lb, lc) => {
        const [x, y, z] = [a >>> 0, b >>> 0, c >>> 0];
        const left = crc32cCombine(crc32cCombine(x, y, lb), z, lc);
        const right = crc32cCombine(x, crc32cCombine(y, z, lc), lb + lc);
        expect(left).toBe(right);
      }),
      { numRuns: 200 },
    );
  });
});

describe('copyWithCrc32c', () => {
  it('equals copy + crc on random sizes and offsets, leaves the rest of dst alone', () => {
    const pool = pseudoRandomBytes(64 * KiB + 64, 555);
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 64 * KiB }),
        fc.integer({ min: 0, max: 63 }),
        fc.integer({ min: 0, max: 63 }),
        fc.integer({ min: 0, max: 0xffffffff }),
        (len, so, doff, seed) => {
          const src = pool.subarray(so, so + len);
          const expected = referenceCrc32c(src, seed);
          for (const impl of [...implementations(), 'default' as const]) {
            const backing = new Uint8Array(doff + len + 16).fill(0xee);
            const dst = backing.subarray(doff, doff + len + 16);
            const crc = impl === 'default' ? copyWithCrc32c(dst, src, seed) : copyWithCrc32cUsing(impl, dst, src, seed);
            expect(crc).toBe(expected);
            expect(Buffer.compare(dst.subarray(0, len), src)).toBe(0);
            expect(backing.subarray(0, doff).every((v) => v === 0xee)).toBe(true);
            expect(dst.subarray(len).every((v) => v === 0xee)).toBe(true);
          }
        },
      ),
      { numRuns: 100 },
    );
  });

  it('copies around the streaming-store size (2 MiB) at unaligned destinations', () => {
    for (const [len, doff] of [
      [MiB, 0],
      [2 * MiB - 1, 5],
      [2 * MiB, 0],
      [2 * MiB + 5, 3],
      [3 * MiB + 77, 61],
    ]) {
      const src = pseudoRandomBytes(len, len);
      const expected = referenceCrc32c(src);
      for (const impl of implementations()) {
        const backing = new Uint8Array(len + 128).fill(0xee);
        const dst = backing.subarray(doff);
        expect(copyWithCrc32cUsing(impl, dst, src)).toBe(expected);
        expect(Buffer.compare(dst.subarray(0, len), src)).toBe(0);
        expect(backing[doff - 1] ?? 0xee).toBe(0xee);
        expect(dst[len]).toBe(0xee);
      }
    }
  });

  it('overlapping views of one buffer: moves like memmove and returns the CRC of the original source', () => {
    for (const impl of implementations()) {
      for (const [from, to, len] of [
        [0, 100, 5000],
        [100, 0, 5000],
        [0, 1, 2 * MiB],
        [7, 0, 2 * MiB],
      ]) {
        const backing = pseudoRandomBytes(2 * MiB + 200, from * 7 + to);
        const original = backing.slice(from, from + len);
        const crc = copyWithCrc32cUsing(impl, backing.subarray(to, to + len), backing.subarray(from, from + len));
        expect(crc).toBe(crc32c(original));
        expect(Buffer.compare(backing.subarray(to, to + len), original)).toBe(0);
      }
    }
  });
});

describe('bad arguments throw ChecksumError INVALID_ARGUMENT', () => {
  const expectInvalid = (fn: () => unknown, message: RegExp) => {
    let err: unknown;
    try {
      fn();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ChecksumError);
    expect((err as ChecksumError).code).toBe('INVALID_ARGUMENT');
    expect((err as ChecksumError).message).toMatch(message);
  };
  const buf = new Uint8Array(16);

  it('data that is not a view', () => {
    for (const bad of ['abc', 42, null, undefined, {}, [1, 2, 3], new ArrayBuffer(8)]) {
      expectInvalid(() => crc32c(bad as ArrayBufferView), /data must be a TypedArray, Buffer or DataView/);
    }
    expectInvalid(() => copyWithCrc32c(buf, 'x' as unknown as ArrayBufferView), /src must be/);
    expectInvalid(() => copyWithCrc32c({} as ArrayBufferView, buf), /dst must be/);
  });

  it('seeds outside 0..2^32-1', () => {
    for (const bad of [-1, 2 ** 32, 1.5, NaN, Infinity]) expectInvalid(() => crc32c(buf, bad), /seed must be an integer in 0\.\.2\^32-1/);
    expectInvalid(() => crc32c(buf, '1' as unknown as number), /seed must be a number/);
    expectInvalid(() => crc32cCombine(-1, 0, 1), /crcA/);
    expectInvalid(() => crc32cCombine(0, 2 ** 32, 1), /crcB/);
  });

  it('a negative or fractional length to combine', () => {
    expectInvalid(() => crc32cCombine(1, 2, -1), /lengthB must be a non-negative integer/);
    expectInvalid(() => crc32cCombine(1, 2, 0.5), /lengthB/);
    expectInvalid(() => crc32cCombine(1, 2, -1n), /lengthB/);
  });

  it('a destination shorter than the source', () => {
    expectInvalid(() => copyWithCrc32c(new Uint8Array(15), buf), /dst \(15 bytes\) is shorter than src \(16 bytes\)/);
  });

  it('an unknown backend', () => {
    expectInvalid(() => crc32cUsing('sse5' as Crc32cImplementation, buf), /unknown CRC-32C implementation: sse5/);
  });

  it('a detached buffer checksums as empty', () => {
    const b = new Uint8Array(64);
    structuredClone(b.buffer, { transfer: [b.buffer] });
    expect(crc32c(b, 1234)).toBe(1234);
  });
});
