// The master's I/O on the file tier's directory (docs/tiers.md "File tier"): opening it at start
// (<root_fs_dir>/<cluster_id>, created if absent; a directory the master cannot read and write is
// a startup error), rebuilding the index (master/core/file-index.ts) by reading every file's
// header (temporary files a crash left are deleted; a file whose header is bad or whose length is
// not header + value is left out and counted), and deleting the files the index dooms (removals,
// refusals, an upsert's old value) only while they still hold the value they were doomed as. All
// of it through fs/promises, on the libuv threadpool, never blocking the loop.
import { randomUUID } from 'node:crypto';
import { constants as fsc } from 'node:fs';
import { access, link, mkdir, open, readdir, rename, unlink } from 'node:fs/promises';
import { isAbsolute, join, resolve } from 'node:path';
import { FlagError } from '../common/flags.js';
import { readHeader } from '../common/file-tier-header.js';
import { keyFileName, TEMP_PREFIX, tempFileName } from '../common/file-tier-name.js';
import type { Logger } from '../common/logger.js';
import { crc32c } from '../native/checksum.js';
import { FileIndex, type DoomedFile } from './core/file-index.js';

/** Files whose headers are read at once during a rescan. */
export const SCAN_PARALLEL = 16;

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
      for (const doomed of index.takeDoomed()) {
        deleteDoomed(dir, doomed).catch((e: NodeJS.ErrnoException) => {
          if (e.code !== 'ENOENT') log.warn(`file tier: deleting ${join(dir, doomed.name)} failed: ${e.message}`);
        });
      }
    });
  };
}

/** The slice checksums of the value in the file at `path`, or undefined when it has no good header. */
async function valueAt(path: string): Promise<number[] | undefined> {
  const fh = await open(path, 'r');
  try {
    const d = await readHeader(fh, crc32c);
    return d.ok ? d.header.checksums : undefined;
  } finally {
    await fh.close();
  }
}

function holds(sums: readonly number[] | undefined, doomed: DoomedFile): boolean {
  const want = doomed.checksums;
  return sums === undefined || (sums.length === want.length && sums.every((c, i) => c >>> 0 === want[i] >>> 0));
}

/**
 * Deletes a doomed file if its name still holds the value it was doomed as (any file when the doom
 * names no checksums). A writer's rename may have put a newer value there meanwhile (an upsert's,
 * a Put after a removal): that file stays. The check and the deletion are made race-free by moving
 * the file aside first (a rename takes whatever has the name, atomically), reading its header
 * there, and then deleting it, or linking it back under its name when it holds another value
 * (link never replaces a file renamed there later still). A crash in between leaves a temporary
 * file, which the next scan deletes: a file lost, never a wrong one kept. Readers may find no file
 * only in that short window, and only when the name holds a value other than the doomed one,
 * which the header read first rules out in the usual case.
 */
export async function deleteDoomed(dir: string, doomed: DoomedFile): Promise<void> {
  const path = join(dir, doomed.name);
  if (doomed.checksums.length === 0) return unlink(path);
  if (!holds(await valueAt(path).catch(() => undefined), doomed)) return; // another value (or none) there already
  const aside = join(dir, tempFileName(randomUUID()));
  try {
    await rename(path, aside);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return; // gone meanwhile
    throw e;
  }
  if (!holds(await valueAt(aside).catch(() => undefined), doomed)) {
    try {
      await link(aside, path);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') return rename(aside, path); // no hard links on this file system: back by rename
    }
  }
  await unlink(aside);
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
