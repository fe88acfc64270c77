// Memory backends: each kind round-trips bytes and releases; shm mapped twice shares bytes;
// huge pages when the machine can reserve them; the huge-page failure message; the arena.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { addressOf, arenaConfig, mapMemory, MemoryError, type MemoryRegion } from './index.js';
import { ensureAddon, nativeDir } from './test-fixtures/ensure-addon.js';

beforeAll(() => ensureAddon());

const MiB = 1024 * 1024;
const tmp = mkdtempSync(join(tmpdir(), 'kvstore-native-'));
const shmNames: string[] = [];
afterAll(() => {
  rmSync(tmp, { recursive: true, force: true });
  for (const n of shmNames) rmSync(`/dev/shm/${n}`, { force: true });
});

function isMapped(address: number): boolean {
  const hex = address.toString(16);
  return readFileSync('/proc/self/maps', 'utf8')
    .split('\n')
    .some((l) => l.startsWith(hex + '-'));
}

function roundTrip(r: MemoryRegion): void {
  const data = randomBytes(Math.min(r.size, 256 * 1024));
  const view = new Uint8Array(r.buffer);
  view.set(data, 0);
  view[r.size - 1] = 0x5a;
  expect(Buffer.from(view.subarray(0, data.length)).equals(data)).toBe(true);
  expect(view[r.size - 1]).toBe(0x5a);
  expect(r.buffer.byteLength).toBe(r.size);
  expect(addressOf(view)).toBe(r.address);
  expect(addressOf(view.subarray(100))).toBe(r.address + 100);
}

function expectReleased(r: MemoryRegion): void {
  const address = r.address;
  r.release();
  r.release(); // idempotent
  expect(r.released).toBe(true);
  expect(r.buffer.byteLength).toBe(0); // detached: JS can no longer reach the unmapped bytes
  expect(isMapped(address)).toBe(false);
}

function shmName(): string {
  const n = `kvstore-test-${process.pid}-${shmNames.length}`;
  shmNames.push(n);
  return n;
}

test('memfd (default kind) round-trips bytes, exposes its fd, and unmaps on release', () => {
  const r = mapMemory({ size: 4 * MiB + 123 });
  expect(r.kind).toBe('memfd');
  expect(r.size).toBe(4 * MiB + 123);
  expect(r.fd).toBeGreaterThanOrEqual(0);
  expect(isMapped(r.address)).toBe(true);
  roundTrip(r);
  expectReleased(r);
});

test('a named shm object mapped twice sees the same bytes, and survives for a later mapping', () => {
  const name = shmName();
  const a = mapMemory({ kind: 'shm', name, size: 2 * MiB });
  const b = mapMemory({ kind: 'shm', name: `/${name}`, size: 2 * MiB, create: false });
  expect(a.address).not.toBe(b.address);
  roundTrip(b);
  const data = randomBytes(64 * 1024);
  new Uint8Array(a.buffer).set(data, 4096);
  expect(Buffer.from(b.buffer, 4096, data.length).equals(data)).toBe(true);
  expectReleased(a);
  expectReleased(b);
  expect(existsSync(`/dev/shm/${name}`)).toBe(true);
  const c = mapMemory({ kind: 'shm', name, size: MiB, offset: 4096, create: false });
  expect(Buffer.from(c.buffer, 0, 16).equals(data.subarray(0, 16))).toBe(true); // offset 4096 of the object
  c.release();
});

test('shm: missing object without create, bad names and too-small objects are clear errors', () => {
  expect(() => mapMemory({ kind: 'shm', name: `kvstore-missing-${process.pid}`, size: MiB, create: false })).toThrow(expect.objectContaining({ code: 'NOT_FOUND' }));
  expect(() => mapMemory({ kind: 'shm', name: 'a/b', size: MiB })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  expect(() => mapMemory({ kind: 'shm', size: MiB })).toThrow(MemoryError);
  const name = shmName();
  mapMemory({ kind: 'shm', name, size: MiB }).release();
  expect(() => mapMemory({ kind: 'shm', name, size: 2 * MiB, create: false })).toThrow(/fewer than offset\+size/);
});

test('file kind maps any file path (CXL / DAX style), persists bytes, honours offset', () => {
  const path = join(tmp, 'segment.bin');
  const r = mapMemory({ kind: 'file', path, size: 2 * MiB, create: true });
  expect(r.kind).toBe('file');
  roundTrip(r);
  const data = randomBytes(1000);
  new Uint8Array(r.buffer).set(data, MiB);
  expectReleased(r);
  expect(
    readFileSync(path)
      .subarray(MiB, MiB + 1000)
      .equals(data),
  ).toBe(true);
  const again = mapMemory({ kind: 'file', path, size: MiB, offset: MiB });
  expect(Buffer.from(again.buffer, 0, 1000).equals(data)).toBe(true);
  again.release();
});

test('file kind: missing file, short file without create, unaligned offset are refused', () => {
  expect(() => mapMemory({ kind: 'file', path: join(tmp, 'nope'), size: MiB })).toThrow(expect.objectContaining({ code: 'NOT_FOUND' }));
  const short = join(tmp, 'short.bin');
  writeFileSync(short, Buffer.alloc(4096));
  expect(() => mapMemory({ kind: 'file', path: short, size: MiB })).toThrow(/create: true/);
  expect(() => mapMemory({ kind: 'file', path: short, size: 4096, offset: 100 })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  expect(() => mapMemory({ kind: 'file', size: MiB })).toThrow(/path is required/);
  expect(readFileSync(short).length).toBe(4096); // nothing changed by the refusals
});

test('hugetlbfs kind refuses a path that is not on a hugetlbfs mount', () => {
  expect(() => mapMemory({ kind: 'hugetlbfs', path: join(tmp, 'not-huge'), size: 2 * MiB, create: true })).toThrow(/not on a hugetlbfs mount/);
});

test('anonymous kind round-trips bytes and unmaps', () => {
  const r = mapMemory({ kind: 'anonymous', size: MiB, env: {} });
  expect(r.fd).toBe(-1);
  roundTrip(r);
  expectReleased(r);
});

test('bad sizes are rejected before anything is mapped', () => {
  expect(() => mapMemory({ size: 0 })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  expect(() => mapMemory({ size: -5 })).toThrow(MemoryError);
  expect(() => mapMemory({ size: 1.5 })).toThrow(MemoryError);
});

describe('huge pages', () => {
  const GB1 = '/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages';
  const oneGbFree = existsSync(GB1) ? Number(readFileSync(GB1, 'utf8')) : 0;
  const failTest = oneGbFree === 0 ? test : test.skip;

  failTest(
    `an unsatisfiable request fails with a message naming MC_STORE_USE_HUGEPAGE and how to reserve pages${oneGbFree === 0 ? '' : ' (skipped: this machine has free 1 GiB huge pages, so a 1 GiB request would succeed)'}`,
    () => {
      let err: unknown;
      try {
        mapMemory({ size: 2 * MiB, env: { MC_STORE_USE_HUGEPAGE: '1', MC_STORE_HUGEPAGE_SIZE: '1GB' } });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(MemoryError);
      expect((err as MemoryError).code).toBe('HUGEPAGE_UNAVAILABLE');
      expect((err as Error).message).toMatch(/MC_STORE_USE_HUGEPAGE/);
      expect((err as Error).message).toMatch(/echo 1 > \/sys\/kernel\/mm\/hugepages\/hugepages-1048576kB\/nr_hugepages/);
      expect((err as Error).message).toMatch(/mount -t hugetlbfs/);
    },
  );

  test('an unsupported MC_STORE_HUGEPAGE_SIZE is refused', () => {
    expect(() => mapMemory({ size: MiB, env: { MC_STORE_USE_HUGEPAGE: '1', MC_STORE_HUGEPAGE_SIZE: '4MB' } })).toThrow(/2MB or 1GB/);
  });

  // Reserve 2 MB pages for the rest of this block when the machine lets us (root, hugetlb).
  const NR = '/proc/sys/vm/nr_hugepages';
  const previous = existsSync(NR) ? Number(readFileSync(NR, 'utf8')) : -1;
  let reserved = false;
  let reason = 'no /proc/sys/vm/nr_hugepages';
  if (previous >= 0) {
    try {
      writeFileSync(NR, String(Math.max(previous, 64)));
      const free = Number(/HugePages_Free:\s+(\d+)/.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1] ?? 0);
      reserved = free >= 8;
      reason = reserved ? '' : `only ${free} free 2MB huge pages after asking for 64`;
    } catch (e) {
      reason = `cannot write ${NR}: ${(e as Error).message}`;
    }
  }
  afterAll(() => {
    if (previous >= 0 && reserved) writeFileSync(NR, String(previous));
  });
  const hugeTest = reserved ? test : test.skip;
  const suffix = reserved ? '' : ` (skipped: ${reason})`;

  hugeTest(`memfd with MFD_HUGETLB (MC_STORE_USE_HUGEPAGE=1) round-trips bytes${suffix}`, () => {
    const r = mapMemory({ size: 3 * MiB, env: { MC_STORE_USE_HUGEPAGE: '1' } });
    const smaps = readFileSync('/proc/self/smaps', 'utf8');
    const block = smaps.split(/\n(?=[0-9a-f]+-)/).find((b) => b.startsWith(r.address.toString(16) + '-'));
    expect(block).toMatch(/KernelPageSize:\s+2048 kB/);
    roundTrip(r);
    expectReleased(r);
  });

  hugeTest(`anonymous MAP_HUGETLB round-trips bytes${suffix}`, () => {
    const r = mapMemory({ kind: 'anonymous', size: 2 * MiB, hugepage: true, env: {} });
    roundTrip(r);
    expectReleased(r);
  });

  const mountDir = join(tmp, 'huge');
  let mounted = false;
  let mountReason = reason;
  if (reserved) {
    try {
      execFileSync('mkdir', ['-p', mountDir]);
      execFileSync('mount', ['-t', 'hugetlbfs', '-o', 'pagesize=2M', 'none', mountDir], { stdio: 'pipe' });
      mounted = true;
    } catch (e) {
      mountReason = `cannot mount hugetlbfs: ${String((e as { stderr?: Buffer }).stderr ?? e).trim()}`;
    }
  }
  afterAll(() => {
    if (mounted) execFileSync('umount', [mountDir]);
  });
  (mounted ? test : test.skip)(`hugetlbfs file round-trips bytes${mounted ? '' : ` (skipped: ${mountReason})`}`, () => {
    const r = mapMemory({ kind: 'hugetlbfs', path: join(mountDir, 'seg'), size: 4 * MiB, create: true });
    expect(r.kind).toBe('hugetlbfs');
    roundTrip(r);
    expectReleased(r);
  });
});

describe('mmap arena (fresh process each: the arena is decided once per process)', () => {
  const probe = resolve(nativeDir, 'test-fixtures/arena-probe.mjs');
  const run = (env: Record<string, string>, sizes: number[]) => {
    const cfg = arenaConfig(env);
    const out = execFileSync(process.execPath, [probe, cfg.enabled ? '1' : '0', String(cfg.poolSize), ...sizes.map(String)], {
      encoding: 'utf8',
    });
    return JSON.parse(out) as {
      addresses: number[];
      ok: boolean;
      stats: { enabled: boolean; poolSize: number; used: number; fallbacks: number };
    };
  };

  test('MC_MMAP_ARENA_POOL_SIZE bump-allocates anonymous regions back to back; overflow falls back to mmap', () => {
    const r = run({ MC_MMAP_ARENA_POOL_SIZE: '8mb' }, [MiB, 100, 4 * MiB, 8 * MiB]);
    expect(r.ok).toBe(true);
    expect(r.stats.enabled).toBe(true);
    expect(r.stats.poolSize).toBe(8 * MiB);
    expect(r.addresses[1]).toBe(r.addresses[0] + MiB);
    expect(r.addresses[2]).toBe(r.addresses[1] + 4096); // 100 bytes rounded to a page
    expect(r.stats.used).toBe(MiB + 4096 + 4 * MiB);
    expect(r.stats.fallbacks).toBe(1); // the 8 MiB one did not fit
  });

  test('MC_DISABLE_MMAP_ARENA turns it off', () => {
    const r = run({ MC_MMAP_ARENA_POOL_SIZE: '8mb', MC_DISABLE_MMAP_ARENA: 'yes' }, [MiB]);
    expect(r.ok).toBe(true);
    expect(r.stats.enabled).toBe(false);
    expect(r.stats.used).toBe(0);
  });
});

test('a region dropped without release() is unmapped by its finalizer after GC', () => {
  const out = execFileSync(process.execPath, ['--expose-gc', resolve(nativeDir, 'test-fixtures/gc-probe.mjs')], { encoding: 'utf8' });
  expect(JSON.parse(out)).toEqual({ mappedBefore: true, unmappedAfterGc: true });
});
