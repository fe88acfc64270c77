// Snapshots and the change log of a single master (docs/master.md "Snapshots and the change log"),
// wired to the process: --enable_snapshot_restore loads the newest whole snapshot and the logs
// after it into the core at startup; --enable_snapshot takes a first snapshot before any RPC is
// served (so a directory's logs always start from a snapshot), appends every change to the log,
// and snapshots again every --snapshot_interval_seconds without stopping service (the log moves
// to a new file as each snapshot begins), keeping --snapshot_retention_count of them.
import { mkdirSync } from 'node:fs';
import client from 'prom-client';
import type { Logger } from '../../common/logger.js';
import type { MasterCore } from '../core/master-core.js';
import type { MasterFlags } from '../master-flags.js';
import type { ChangeFanout } from './change-fanout.js';
import { ChangeLog, logFileName } from './change-log.js';
import type { CommitBarrier } from './commit-barrier.js';
import { restoreState } from './restore.js';
import { backup, EmbeddedCatalog, listDir, prune, RedisCatalog, type SnapshotCatalog } from './snapshot-store.js';
import { writeSnapshot } from './snapshot-writer.js';

/** fdatasync of the change log at least this often (the log's policy: change-log.ts). */
const LOG_SYNC_INTERVAL_MS = 1000;

type SnapshotFlags = Pick<
  MasterFlags,
  | 'enable_snapshot'
  | 'enable_snapshot_restore'
  | 'snapshot_interval_seconds'
  | 'snapshot_child_timeout_seconds'
  | 'snapshot_retention_count'
  | 'snapshot_catalog_store_type'
  | 'snapshot_catalog_store_connstring'
  | 'snapshot_backup_dir'
  | 'change_log_sync'
  | 'cluster_id'
>;

export interface PersistenceOptions {
  flags: SnapshotFlags;
  dir: string;
  log: Logger;
  clock: () => number;
  viewVersion: number;
  registry?: client.Registry;
}

export class Persistence {
  private timer: NodeJS.Timeout | undefined;
  private syncTimer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private changeLog: ChangeLog | undefined;
  private snapshots = 0;
  private failures = 0;
  private lastObjects = 0;
  private lastMs = 0;

  private constructor(
    private readonly o: PersistenceOptions,
    private readonly catalog: SnapshotCatalog,
    private readonly core: MasterCore,
  ) {}

  /**
   * Restores into `core` (an empty one) when asked, then, with --enable_snapshot, takes the first
   * snapshot and attaches the change log to `fanout` and `barrier`.
   */
  static async open(o: PersistenceOptions, core: MasterCore, fanout: ChangeFanout, barrier: CommitBarrier): Promise<Persistence> {
    mkdirSync(o.dir, { recursive: true });
    const f = o.flags;
    const catalog: SnapshotCatalog = f.snapshot_catalog_store_type === 'redis' ? new RedisCatalog(f.snapshot_catalog_store_connstring, f.cluster_id) : new EmbeddedCatalog(o.dir);
    const p = new Persistence(o, catalog, core);
    if (f.enable_snapshot_restore) await p.restore();
    if (f.enable_snapshot) {
      const files = listDir(o.dir);
      const index = Math.max(0, ...files.snapshots, ...files.logs) + 1;
      const first = await writeSnapshot(o.dir, index, core, o.clock, { stepped: false, timeoutMs: f.snapshot_child_timeout_seconds, viewVersion: o.viewVersion });
      await p.finished(first.index);
      p.changeLog = new ChangeLog(
        o.dir,
        index,
        {
          failed: (e) =>
            o.log.error(
              `change log ${logFileName(index)}: ${e.message}: changes are not durable; every reply that changed the state answers UNAVAILABLE_IN_CURRENT_STATUS until the log can be written again`,
            ),
          recovered: (frames) => o.log.warn(`change log: writable again (${frames} changes written late); replies succeed again`),
        },
        f.change_log_sync === 'placement',
      );
      fanout.add(p.changeLog);
      // Written before each reply (the barrier flushes the fanout; a reply whose changes are not
      // written is an error); with `placement` a placement after a removal also waits for the
      // removal's fdatasync (change-log.ts).
      barrier.add(p.changeLog);
      core.setChangeSink(fanout);
      o.log.info(
        `snapshots: first snapshot ${index} (${first.objects} objects, ${first.bytes} bytes) in ${o.dir}; every ${f.snapshot_interval_seconds / 1000} s, keeping ${f.snapshot_retention_count}; change log synced every second${f.change_log_sync === 'placement' ? ' and before placements after removals' : ''}; catalog ${catalog.description}`,
      );
      p.timer = setInterval(() => void p.snapshot(), f.snapshot_interval_seconds);
      p.timer.unref();
      p.syncTimer = setInterval(() => void p.changeLog?.sync(), LOG_SYNC_INTERVAL_MS);
      p.syncTimer.unref();
    }
    if (o.registry) p.registerMetrics(o.registry);
    return p;
  }

  private async restore(): Promise<void> {
    const { o, core } = this;
    const now = o.clock();
    const r = await restoreState(o.dir, this.catalog, now);
    for (const s of r.skipped) o.log.warn(`restore: skipped ${s}`);
    for (const t of r.torn) o.log.warn(`restore: change log ${t.log}: the last ${t.bytesIgnored} bytes are a torn or corrupt frame (a crash while writing); ignored`);
    const imported = core.importState(r.image.toState(now), now);
    for (const d of imported.dropped.slice(0, 20)) o.log.warn(`restore: left out ${d}`);
    if (imported.dropped.length > 20) o.log.warn(`restore: ... and ${imported.dropped.length - 20} more records left out`);
    o.log.info(
      `restore: ${r.snapshot === undefined ? 'no whole snapshot' : `snapshot ${r.snapshot}`} + ${r.changes} changes from ${r.logs.length} log(s) (catalog ${r.catalog}): ` +
        `${imported.segments} segments (RESTORED until their owners mount them again), ${imported.objects} objects`,
    );
  }

  /** Takes one snapshot now (unless one is running): the log moves to a new file first. */
  snapshot(): Promise<void> {
    if (this.running !== undefined || this.changeLog === undefined) return this.running ?? Promise.resolve();
    const run = this.takeSnapshot().finally(() => (this.running = undefined));
    this.running = run;
    return run;
  }

  private async takeSnapshot(): Promise<void> {
    const { o } = this;
    const log = this.changeLog!;
    const index = log.index + 1;
    try {
      await log.rotate(index);
      o.log.info(`snapshot ${index} started`);
      const r = await writeSnapshot(o.dir, index, this.core, o.clock, { stepped: true, timeoutMs: o.flags.snapshot_child_timeout_seconds, viewVersion: o.viewVersion });
      await this.finished(index);
      this.lastObjects = r.objects;
      this.lastMs = r.ms;
      o.log.info(`snapshot ${index} written: ${r.segments} segments, ${r.objects} objects, ${r.bytes} bytes in ${r.ms} ms`);
    } catch (e) {
      this.failures++;
      o.log.error(`snapshot ${index} failed: ${(e as Error).message} (the previous snapshot and the change logs after it still hold the state)`);
    }
  }

  /** A snapshot is published: catalog, retention, backup. */
  private async finished(index: number): Promise<void> {
    const { o } = this;
    const keep = o.flags.snapshot_retention_count;
    this.snapshots++;
    try {
      await this.catalog.add(index, keep);
    } catch (e) {
      o.log.warn(`snapshot ${index}: catalog ${this.catalog.description} not updated: ${(e as Error).message}`);
    }
    prune(o.dir, keep, this.changeLog?.index ?? index);
    if (o.flags.snapshot_backup_dir) {
      try {
        backup(o.dir, o.flags.snapshot_backup_dir, index, keep);
      } catch (e) {
        o.log.warn(`snapshot ${index}: backup to ${o.flags.snapshot_backup_dir} failed: ${(e as Error).message}`);
      }
    }
  }

  private registerMetrics(registry: client.Registry): void {
    const self = this;
    const gauge = (name: string, help: string, value: () => number): void => {
      new client.Gauge({
        name,
        help,
        registers: [registry],
        collect() {
          this.set(value());
        },
      });
    };
    gauge('store_master_snapshots_taken', 'snapshots written since start', () => self.snapshots);
    gauge('store_master_snapshot_failures', 'snapshots that failed since start', () => self.failures);
    gauge('store_master_snapshot_last_objects', 'objects in the last snapshot', () => self.lastObjects);
    gauge('store_master_snapshot_last_duration_seconds', 'time the last snapshot took', () => self.lastMs / 1000);
    gauge('store_master_change_log_bytes', 'bytes in the current change log', () => self.changeLog?.bytes ?? 0);
    gauge('store_master_change_log_syncs', 'fdatasync calls of the change log since start', () => self.changeLog?.syncs ?? 0);
    gauge('store_master_change_log_errors', 'failed writes and syncs of the change log since start', () => self.changeLog?.errors ?? 0);
    gauge('store_master_change_log_writable', '1 while the change log can be written; 0: replies that change the state answer UNAVAILABLE_IN_CURRENT_STATUS', () =>
      self.changeLog === undefined || self.changeLog.writable ? 1 : 0,
    );
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    if (this.syncTimer) clearInterval(this.syncTimer);
    await this.running;
    this.changeLog?.close();
    this.catalog.close();
  }
}
