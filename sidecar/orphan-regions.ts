// Region files left in the shared directory by dummy clients that died before deleting them (a
// crash-looping inference container would otherwise fill the pod's in-memory volume). A live
// dummy client holds a shared flock on each of its files, so a file nobody holds a lock on is an
// orphan. Files younger than a minute are left alone: a dummy client takes its lock right after
// creating the file, and this sweep must not race that.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { REGION_FILE_PREFIX } from './dummy-session.js';

export const ORPHAN_MIN_AGE_MS = 60_000;
/** A second try after a connection ended: its process may still be closing its descriptors. */
export const ORPHAN_RETRY_MS = 1000;

/**
 * Deletes the region file of a dummy client whose connection ended, if that client is dead (no
 * lock held). A process being killed closes its socket and its lock descriptor one after the
 * other, so a lock still held now is tried once more a moment later; a live client keeps its lock
 * (and deletes its file itself).
 */
export function removeIfOrphaned(
  path: string,
  unlinkIfUnlocked: (path: string) => boolean,
  onRemoved: (path: string) => void,
  schedule: (ms: number, fn: () => void) => void = (ms, fn) => void setTimeout(fn, ms).unref(),
): void {
  const attempt = (): boolean => {
    try {
      return unlinkIfUnlocked(path);
    } catch {
      return true; // not ours to open: leave it
    }
  };
  if (attempt()) return;
  schedule(ORPHAN_RETRY_MS, () => {
    if (existsSync(path) && attempt()) onRemoved(path);
  });
}

/** Deletes orphaned region files in `dir`; returns their names. */
export function sweepOrphanRegions(dir: string, unlinkIfUnlocked: (path: string) => boolean, nowMs: number = Date.now()): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    if (!name.startsWith(REGION_FILE_PREFIX)) continue;
    const path = join(dir, name);
    try {
      if (nowMs - statSync(path).mtimeMs < ORPHAN_MIN_AGE_MS) continue;
      if (unlinkIfUnlocked(path)) removed.push(name);
    } catch {
      // gone meanwhile, or not ours to open
    }
  }
  return removed;
}
