// MemoryRegion.populate(): every page of a region backed now, off the JS thread, on several
// threads, keeping what the region already holds; safe against a release() while it runs; clear
// errors for a released region and bad arguments.
import { randomFillSync } from 'node:crypto';
import { mapMemory, MemoryError } from './index.js';
import { ensureAddon } from './test-fixtures/ensure-addon.js';
import { residentKb } from './test-fixtures/resident.js';

beforeAll(() => ensureAddon());

const MiB = 1024 ** 2;

test('populate backs every page of a fresh region and keeps the bytes already written', async () => {
  const r = mapMemory({ size: 256 * MiB });
  try {
    const head = randomFillSync(Buffer.alloc(4096));
    r.view(0, 4096).set(head);
    r.view(200 * MiB, 4096).set(head);
    expect(residentKb(r.address)).toBeLessThan(1024);
    const how = await r.populate();
    expect(['madvise', 'touch']).toContain(how.method);
    expect(how.threads).toBeGreaterThanOrEqual(1);
    expect(residentKb(r.address)).toBe(256 * 1024);
    expect(r.view(0, 4096).equals(head)).toBe(true);
    expect(r.view(200 * MiB, 4096).equals(head)).toBe(true);
    expect(r.view(100 * MiB, 4096).every((b) => b === 0)).toBe(true);
  } finally {
    r.release();
  }
});

test('populate on one thread and on more threads than the region has steps', async () => {
  for (const threads of [1, 64]) {
    const r = mapMemory({ size: 3 * MiB + 4096 });
    try {
      const how = await r.populate(threads);
      expect(how.threads).toBe(1); // one 64 MiB step: one slice
      expect(residentKb(r.address)).toBe((3 * MiB + 4096) / 1024);
    } finally {
      r.release();
    }
  }
});

test('a release while populate runs waits for its threads, and the promise still settles', async () => {
  const r = mapMemory({ size: 512 * MiB });
  const done = r.populate(2);
  r.release();
  expect(r.released).toBe(true);
  await expect(done).resolves.toEqual(expect.objectContaining({ threads: 2 }));
});

test('populate of a released region or with bad threads is a MemoryError, not a crash', async () => {
  const r = mapMemory({ size: MiB });
  await expect(r.populate(-1)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  await expect(r.populate(1.5)).rejects.toBeInstanceOf(MemoryError);
  r.release();
  await expect(r.populate()).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/released/) });
});
