// The SSD tier's file (docs/tiers.md, "SSD tier"): a new sparse file of a given size in a
// directory on the host's SSD, for a store service or an embedded client to map and mount as
// offload segments. Created once at startup, so synchronously.
import { randomBytes } from 'node:crypto';
import { closeSync, ftruncateSync, openSync, rmSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Creates `kvstore-offload-<pid>-<random>.seg` of `size` bytes in `dir` (ftruncate: sparse, no
 * block written) and returns its path. The caller maps it and then unlinks it (its blocks live as
 * long as the mapping). Throws the file system's error (nothing left behind).
 */
export function createOffloadFile(dir: string, size: number): string {
  const path = join(dir, `kvstore-offload-${process.pid}-${randomBytes(4).toString('hex')}.seg`);
  try {
    const fd = openSync(path, 'wx', 0o600);
    try {
      ftruncateSync(fd, size);
    } finally {
      closeSync(fd);
    }
  } catch (e) {
    rmSync(path, { force: true });
    throw e;
  }
  return path;
}
