// The startup sweep deletes region files nobody holds a lock on, but never young ones (their
// owner may not have locked them yet) or files that are not region files.
import { existsSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ORPHAN_MIN_AGE_MS, removeIfOrphaned, sweepOrphanRegions } from './orphan-regions.js';

test('deletes old unlocked region files only', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvstore-orphans-'));
  try {
    const now = Date.now();
    const old = (now - ORPHAN_MIN_AGE_MS - 1000) / 1000;
    for (const name of ['kvstore-region-dead', 'kvstore-region-alive', 'kvstore-region-young', 'other-file']) writeFileSync(join(dir, name), 'x');
    for (const name of ['kvstore-region-dead', 'kvstore-region-alive', 'other-file']) utimesSync(join(dir, name), old, old);
    const locked = new Set([join(dir, 'kvstore-region-alive')]);
    const tried: string[] = [];
    const removed = sweepOrphanRegions(
      dir,
      (p) => {
        tried.push(p);
        if (locked.has(p)) return false;
        rmSync(p);
        return true;
      },
      now,
    );
    expect(removed).toEqual(['kvstore-region-dead']);
    expect(tried.sort()).toEqual([join(dir, 'kvstore-region-alive'), join(dir, 'kvstore-region-dead')]);
    expect(existsSync(join(dir, 'kvstore-region-young'))).toBe(true);
    expect(existsSync(join(dir, 'other-file'))).toBe(true);
    expect(sweepOrphanRegions(join(dir, 'missing'), () => true)).toEqual([]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a region file of an ended connection is deleted now or one moment later, never while locked', () => {
  const pending: (() => void)[] = [];
  const schedule = (_ms: number, fn: () => void) => void pending.push(fn);
  const dir = mkdtempSync(join(tmpdir(), 'kvstore-orphans-'));
  try {
    const path = join(dir, 'kvstore-region-x');
    writeFileSync(path, 'x');
    let locked = true; // its process is still closing its descriptors
    const removed: string[] = [];
    const unlink = (p: string) => {
      if (locked) return false;
      rmSync(p);
      return true;
    };
    removeIfOrphaned(path, unlink, (p) => removed.push(p), schedule);
    expect(existsSync(path)).toBe(true);
    locked = false;
    pending.shift()!();
    expect(removed).toEqual([path]);
    expect(existsSync(path)).toBe(false);
    // a live owner keeps its lock: the file stays
    writeFileSync(path, 'x');
    locked = true;
    removeIfOrphaned(path, unlink, (p) => removed.push(p), schedule);
    pending.shift()!();
    expect(existsSync(path)).toBe(true);
    expect(removed).toHaveLength(1);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
