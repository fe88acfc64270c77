// Where snapshots live (docs/master.md "Snapshots and the change log"): the files of the
// directory STORE_SNAPSHOT_LOCAL_PATH (snapshot-<index>.snap beside changes-<index>.log), written
// atomically (a temporary file, fsync, rename, fsync of the directory: a crash leaves the previous
// latest intact and at worst a stray .tmp, removed at the next start), and a catalog of the
// snapshots kept: `embedded` is the directory itself, `redis` a list in Redis
// (/<cluster_id>/master/snapshots) that a restart reads first. Retention keeps the newest
// --snapshot_retention_count snapshots and the change logs from the oldest of them on; with
// --snapshot_backup_dir each finished snapshot is copied there too (same atomic steps, same
// retention).
import { closeSync, copyFileSync, fsyncSync, mkdirSync, openSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { logFileName } from './change-log.js';

export function snapshotFileName(index: number): string {
  return `snapshot-${String(index).padStart(10, '0')}.snap`;
}

const SNAPSHOT_RE = /^snapshot-(\d{10})\.snap$/;
const LOG_RE = /^changes-(\d{10})\.log$/;

/** The indexes of the snapshots and logs in `dir`, ascending. */
export function listDir(dir: string): { snapshots: number[]; logs: number[]; temporary: string[] } {
  const snapshots: number[] = [];
  const logs: number[] = [];
  const temporary: string[] = [];
  for (const name of readdirSync(dir)) {
    const s = SNAPSHOT_RE.exec(name);
    const l = LOG_RE.exec(name);
    if (s) snapshots.push(Number(s[1]));
    else if (l) logs.push(Number(l[1]));
    else if (name.endsWith('.tmp')) temporary.push(name);
  }
  return { snapshots: snapshots.sort((a, b) => a - b), logs: logs.sort((a, b) => a - b), temporary };
}

export function fsyncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Moves a written and fsynced temporary file to `name` in `dir`, then makes the rename durable. */
export function publish(dir: string, tmpName: string, name: string): void {
  renameSync(join(dir, tmpName), join(dir, name));
  fsyncDir(dir);
}

/** The list of snapshots kept: the directory, or a Redis list. */
export interface SnapshotCatalog {
  readonly description: string;
  /** Snapshot indexes, oldest first; undefined when the catalog cannot be read. */
  list(): Promise<number[] | undefined>;
  /** Records a finished snapshot and trims to `keep`. */
  add(index: number, keep: number): Promise<void>;
  close(): void;
}

export class EmbeddedCatalog implements SnapshotCatalog {
  readonly description: string;

  constructor(private readonly dir: string) {
    this.description = `embedded (${dir})`;
  }

  async list(): Promise<number[]> {
    return listDir(this.dir).snapshots;
  }

  async add(): Promise<void> {}

  close(): void {}
}

export class RedisCatalog implements SnapshotCatalog {
  readonly description: string;
  private readonly redis: Redis;
  private readonly key: string;

  constructor(connstring: string, clusterId: string) {
    this.redis = new Redis(connstring, { lazyConnect: true, maxRetriesPerRequest: 1, enableOfflineQueue: true, connectTimeout: 2000 });
    this.redis.on('error', () => {}); // each call reports its own failure
    this.key = `/${clusterId}/master/snapshots`;
    this.description = `redis (${connstring} ${this.key})`;
  }

  async list(): Promise<number[] | undefined> {
    try {
      const names = await this.redis.lrange(this.key, 0, -1);
      return names
        .map((n) => SNAPSHOT_RE.exec(n))
        .filter((m): m is RegExpExecArray => m !== null)
        .map((m) => Number(m[1]));
    } catch {
      return undefined;
    }
  }

  async add(index: number, keep: number): Promise<void> {
    await this.redis.multi().rpush(this.key, snapshotFileName(index)).ltrim(this.key, -keep, -1).exec();
  }

  close(): void {
    this.redis.disconnect();
  }
}

/**
 * Keeps the newest `keep` snapshots of `dir` and the logs they need (index >= the oldest kept
 * snapshot's); removes older snapshots and logs and stray temporary files. Never removes the log
 * being written (`current`). Returns the names removed.
 */
export function prune(dir: string, keep: number, current: number): string[] {
  const { snapshots, logs, temporary } = listDir(dir);
  const removed: string[] = [];
  const kept = snapshots.slice(-keep);
  const oldest = kept[0];
  if (oldest === undefined) return removed;
  for (const s of snapshots) if (s < oldest) removed.push(snapshotFileName(s));
  for (const l of logs) if (l < oldest && l !== current) removed.push(logFileName(l));
  for (const t of temporary) removed.push(t);
  for (const name of removed) rmSync(join(dir, name), { force: true });
  return removed;
}

/** Copies a published snapshot into the backup directory (atomically) and prunes the backups. */
export function backup(dir: string, backupDir: string, index: number, keep: number): void {
  mkdirSync(backupDir, { recursive: true });
  const name = snapshotFileName(index);
  copyFileSync(join(dir, name), join(backupDir, `${name}.tmp`));
  const fd = openSync(join(backupDir, `${name}.tmp`), 'r+');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  publish(backupDir, `${name}.tmp`, name);
  const { snapshots } = listDir(backupDir);
  for (const s of snapshots.slice(0, Math.max(0, snapshots.length - keep))) rmSync(join(backupDir, snapshotFileName(s)), { force: true });
}
