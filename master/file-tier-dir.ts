// The master's I/O on the file tier's directory (docs/tiers.md "File tier"): opening it at start
// (<root_fs_dir>/<cluster_id>, created if absent; a directory the master cannot read and write is
// a startup error), rebuilding the index (master/core/file-index.ts) by reading every file's
// header (temporary files a crash left are deleted; a file whose header is bad or whose length is
// not header + value is left out and counted), and deleting the files the index dooms (removals,
// refusals). All of it through fs/promises, on the libuv threadpool, never blocking the loop.
import { constants as fsc } from 'node:fs';
import { access, mkdir, open, readdir, unlink } from 'node:fs/promises';
import { isAbsolute, join, resolve } from 'node:path';
import { FlagError } from '../common/flags.js';
import { readHeader } from '../common/file-tier-header.js';
import { keyFileName, TEMP_PREFIX } from '../common/file-tier-name.js';
import type { Logger } from '../common/logger.js';
import { crc32c } from '../native/checksum.js';
import { FileIndex } from './core/file-index.js';

/** Files whose headers are read at once during a rescan. */
const SCAN_PARALLEL = 16;

/** What a rescan found. */
export interface ScanReport {
  files: number;
  bytes: number;
  bad: number;
  tempsDeleted: number;
}

/**
 * The tier's directory for --root_fs_dir and --cluster_id: absolute, created if absent, readable
 * and writable by this process. Throws FlagError (exit 2) when it is not.
 */
export async function openFileTierDir(rootFsDir: string, clusterId: string): Promise<string> {
  if (clusterId === '' || clusterId === '.' || clusterId === '..' || clusterId.includes('/') || clusterId.includes('\0')) {
    throw new FlagError('--cluster_id', `--cluster_id=${clusterId}: with --root_fs_dir the cluster id names a directory, so it must be one path component`);
  }
  const dir = resolve(isAbsolute(rootFsDir) ? rootFsDir : resolve(rootFsDir), clusterId);
  try {
    await mkdir(dir, { recursive: true });
    await access(dir, fsc.R_OK | fsc.W_OK | fsc.X_OK);
  } catch (e) {
    throw new FlagError('--root_fs_dir', `--root_fs_dir=${rootFsDir}: the file tier's directory ${dir} is not accessible to the master (${(e as Error).message})`);
  }
  return dir;
}

/** Reads one file's header; the index entry, or why it is left out. */
async function readEntry(dir: string, name: string): Promise<{ key: string; size: number; checksums: number[] } | string> {
  const fh = await open(join(dir, name), 'r');
  try {
    const size = (await fh.stat()).size;
    const d = await readHeader(fh, crc32c);
    if (!d.ok) return 'bad' in d ? d.bad : 'torn header';
    const h = d.header;
    if (size !== h.headerLength + h.valueLength) return `${size} B, not header + value (${h.headerLength + h.valueLength} B): torn`;
    if (keyFileName(h.key) !== name) return "the name is not its key's";
    return { key: h.key, size: h.valueLength, checksums: h.checksums };
  } finally {
    await fh.close();
  }
}

/**
 * Rebuilds `index` from the directory: headers only (values are checked by their readers), temp
 * files deleted. Files appearing meanwhile (clients still writing) are picked up by their report.
 */
export async function scanFileTier(dir: string, index: FileIndex, log: Logger): Promise<ScanReport> {
  const report: ScanReport = { files: 0, bytes: 0, bad: 0, tempsDeleted: 0 };
  const names = await readdir(dir);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < names.length) {
      const name = names[next++];
      if (name.startsWith(TEMP_PREFIX)) {
        // Left by a writer that died before its rename (a live writer's temp is lost too: it reports an error).
        await unlink(join(dir, name)).then(
          () => report.tempsDeleted++,
          () => {},
        );
        continue;
      }
      let entry: Awaited<ReturnType<typeof readEntry>>;
      try {
        entry = await readEntry(dir, name);
      } catch (e) {
        entry = (e as Error).message;
      }
      if (typeof entry === 'string') {
        report.bad++;
        index.bad++;
        log.warn(`file tier: ${join(dir, name)} left out: ${entry}`);
        continue;
      }
      index.load(entry.key, { size: entry.size, checksums: entry.checksums, name });
      report.files++;
      report.bytes += entry.size;
    }
  };
  await Promise.all(Array.from({ length: SCAN_PARALLEL }, worker));
  return report;
}

/** Deletes the files `index` dooms, soon after each is doomed (batched per turn of the loop). */
export function deleteDoomedFiles(dir: string, index: FileIndex, log: Logger): void {
  let scheduled = false;
  index.onDoomed = () => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(() => {
      scheduled = false;
      for (const name of index.takeDoomed()) {
        unlink(join(dir, name)).catch((e: NodeJS.ErrnoException) => {
          if (e.code !== 'ENOENT') log.warn(`file tier: deleting ${join(dir, name)} failed: ${e.message}`);
        });
      }
    });
  };
}

/** A new index over `dir`, deleting what it dooms, filled by a scan (resolves when it is). */
export async function loadFileTier(dir: string, budget: number, log: Logger): Promise<FileIndex> {
  const index = new FileIndex(dir, budget);
  deleteDoomedFiles(dir, index, log);
  const started = performance.now();
  const r = await scanFileTier(dir, index, log);
  log.info(
    `file tier ${dir}: ${r.files} objects, ${r.bytes} B of ${budget} B` +
      `${r.bad ? `, ${r.bad} bad files left out` : ''}${r.tempsDeleted ? `, ${r.tempsDeleted} temporary files deleted` : ''} (scanned in ${Math.round(performance.now() - started)} ms)`,
  );
  return index;
}
