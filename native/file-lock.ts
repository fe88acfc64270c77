// Advisory file locks (flock) for the liveness of dummy clients' region files: the owner holds a
// shared lock while it lives; a file nobody holds a lock on belongs to a dead process and may go.
import { addon } from './addon.js';

/** A held shared lock on a file; release() drops it. */
export interface FileLock {
  release(): void;
}

/** Takes a shared lock on `path` without waiting (throws with code LOCKED or NOT_FOUND otherwise). */
export function lockShared(path: string): FileLock {
  const fd = addon().lockShared(path);
  let held = true;
  return {
    release: () => {
      if (!held) return;
      held = false;
      addon().unlockFile(fd);
    },
  };
}

/** Deletes `path` unless a process holds a lock on it; true when it is gone. */
export function unlinkIfUnlocked(path: string): boolean {
  return addon().unlinkIfUnlocked(path);
}
