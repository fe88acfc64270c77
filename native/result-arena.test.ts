// The result arena: distinct aligned ranges inside the mapping, a clear refusal when full, bad
// sizes refused, and (in a child process with --expose-gc) ranges returning only when every view
// of a result is gone, transfers copying, results outliving the arena object, close() giving the
// memory of free ranges back.
import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { addressOf, MemoryError, ResultArena } from './index.js';
import { ensureAddon, nativeDir } from './test-fixtures/ensure-addon.js';

beforeAll(() => ensureAddon());

const MiB = 1024 * 1024;

test('hands out distinct 4 KiB-aligned ranges inside its mapping, then refuses when full', () => {
  const arena = new ResultArena(4 * MiB);
  expect(arena.size).toBe(4 * MiB);
  const a = arena.take(MiB + 1)!;
  const b = arena.take(MiB)!;
  expect(Buffer.isBuffer(a)).toBe(true);
  expect(a.length).toBe(MiB + 1);
  for (const x of [a, b]) {
    const at = addressOf(x);
    expect(at % 4096).toBe(0);
    expect(at).toBeGreaterThanOrEqual(arena.address);
    expect(at + x.length).toBeLessThanOrEqual(arena.address + arena.size);
  }
  expect(addressOf(b)).toBeGreaterThanOrEqual(addressOf(a) + a.length);
  a.fill(1);
  b.fill(2);
  expect(a.every((v) => v === 1)).toBe(true);
  expect(arena.take(2 * MiB)).toBeUndefined(); // 2 MiB - 4 KiB left
  expect(arena.stats()).toEqual(expect.objectContaining({ size: 4 * MiB, used: 2 * MiB + 4096, ranges: 2, refusals: 1 }));
  expect(arena.take(MiB)).toBeDefined();
});

test('refuses sizes that are not positive integers', () => {
  for (const bad of [0, -1, 1.5, Number.NaN]) expect(() => new ResultArena(bad)).toThrow(MemoryError);
  const arena = new ResultArena(MiB);
  expect(() => arena.take(0)).toThrow(/positive/);
});

test('a range returns after GC only once no view of its result is alive; transfers copy; results outlive the arena; close() gives memory back', () => {
  const out = execFileSync(process.execPath, ['--expose-gc', resolve(nativeDir, 'test-fixtures/result-arena-probe.mjs')], { encoding: 'utf8' });
  expect(JSON.parse(out)).toEqual({
    refusedWhileCollecting: 0,
    usedAfterDrop: 0,
    keptIntact: true,
    churned: 40,
    transferCopied: true,
    survivorReadable: true,
    closeGaveBack: true,
  });
});
