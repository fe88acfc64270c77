// The client's side of the file tier (docs/tiers.md "File tier"): once a Put's (or an Upsert's)
// memory write is done, before its end, the value is copied (with each slice's CRC-32C, in the
// same pass) into a bounded staging area; after the end succeeded it is written, off the event
// loop, to <root>/<escaped key> through a temporary name in the same directory: header + value,
// fsync, rename, so a crash never leaves a torn file under an object's name (an upsert's rename
// replaces the old value's file). Then the writer reports it (BatchPutEnd replica_type DISK, for
// both) and the master indexes it if it is the current value's. A Get the
// master answers with a file replica reads the file straight into the destination, checking the
// header (magic, key, length, the checksums the master recorded) and each slice's CRC-32C; a bad
// file is never served (counted, and the read fails as not found or as a checksum mismatch).
//
// Why a staging copy rather than the store service writing from its memory replica: the put's
// caller may reuse its buffer once put() returns, and the copy (a fused memcpy+CRC, ~10 GB/s) costs
// far less than the file write it feeds (bench:file-tier: 3.5 us of a 64 KiB Put, 0.4 ms of a
// 4 MiB one); a store service writing from memory would need a read
// lease, a Ping work item and a second report path, for no gain on a shared file system every
// client reaches anyway. Staging is bounded: a Put waits for room (backpressure), nothing is dropped.
import { randomUUID } from 'node:crypto';
import { constants as fsc } from 'node:fs';
import { access, open, rename, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { ErrorCode } from '../common/error-code.js';
import { encodeHeader, readHeader } from '../common/file-tier-header.js';
import { keyFileName, tempFileName } from '../common/file-tier-name.js';
import { ObjectNotFoundError, TransferError } from './errors.js';

/** Staging bytes by default (values copied and waiting for their file write). */
export const DEFAULT_FILE_STAGING_BYTES = 256 * 1024 * 1024;
/** File writes in flight at once (the libuv threadpool has 4 threads by default). */
const WRITES_IN_FLIGHT = 4;
/**
 * A file the master named and this client finds missing is looked for once more after this long:
 * the master moves a file aside for a moment when it deletes an older value's file that a newer
 * one replaced meanwhile (master/file-tier-dir.ts `deleteDoomed`), and links it back.
 */
export const MISSING_FILE_RETRY_MS = 20;

export interface FileTierDeps {
  crc32c(data: Uint8Array): number;
  copyWithCrc32c(dst: Uint8Array, src: Uint8Array): number;
  /** Reports complete files (BatchPutEnd replica_type DISK): the master's status code per file, in order. */
  report(files: { key: string; checksums: number[] }[]): Promise<number[]>;
  log(level: 'info' | 'warn', msg: string): void;
  stagingBytes?: number;
  /** Told each time a counter of FileTierCounts grows (client metrics). */
  onCount?: (what: CountName, n: number) => void;
}

export type CountName = 'written' | 'refused' | 'failed' | 'bad' | 'read';

/** Counters of this client's file tier (client metrics read them). */
export interface FileTierCounts {
  written: number;
  refused: number;
  failed: number;
  bad: number;
  read: number;
  stagedBytes: number;
}

/** A value copied into staging for its file (FileTier.stage). */
export interface StagedValue {
  /** CRC-32C of each slice (unsigned). */
  readonly checksums: number[];
  /** The write's end (PutEnd, UpsertEnd) succeeded: write the file. */
  commit(): void;
  /** The write failed: drop the copy. */
  cancel(): void;
}

interface Staged {
  key: string;
  buf: Buffer;
  sliceLengths: number[];
  checksums: number[];
}

export class FileTier {
  private root = '';
  /** The root as the master last named it (checked or not). */
  private named = '';
  private checking: Promise<void> | undefined;
  private readonly stagingLimit: number;
  private staged = 0;
  private readonly queue: Staged[] = [];
  private writing = 0;
  private readonly roomWaiters: (() => void)[] = [];
  private readonly idleWaiters: (() => void)[] = [];
  /** Files written and not yet reported, and whether a report is on its way. */
  private readonly unreported: { key: string; checksums: number[] }[] = [];
  private reporting = false;
  readonly counts: FileTierCounts = { written: 0, refused: 0, failed: 0, bad: 0, read: 0, stagedBytes: 0 };

  constructor(private readonly d: FileTierDeps) {
    this.stagingLimit = d.stagingBytes ?? DEFAULT_FILE_STAGING_BYTES;
  }

  /** Whether Puts write files (the master named a directory this host can read and write). */
  get enabled(): boolean {
    return this.root !== '';
  }

  /**
   * The directory the master names (Ping replies; '' when the tier is off). A directory this host
   * cannot reach is logged once and the tier stays off here: objects still work from memory.
   */
  setRoot(root: string): Promise<void> {
    if (root === this.named) return this.checking ?? Promise.resolve();
    this.named = root;
    if (root === '') {
      this.root = '';
      return Promise.resolve();
    }
    const check = (async () => {
      try {
        await access(root, fsc.R_OK | fsc.W_OK | fsc.X_OK);
        if (!(await stat(root)).isDirectory()) throw new Error('not a directory');
        if (this.named === root) this.root = root;
      } catch (e) {
        if (this.named !== root) return;
        this.root = '';
        this.d.log(
          'warn',
          `the file tier's directory ${root} is not usable on this host (${(e as Error).message}); this client neither writes nor reads files (objects still work from memory)`,
        );
      }
    })();
    this.checking = check;
    return check;
  }

  /**
   * Copies a Put's or an Upsert's value into staging (waiting for room), computing each slice's
   * CRC-32C; the caller's buffer is not read afterwards. The write's end (PutEnd, UpsertEnd) then
   * carries these checksums (so the master can tell this value's file from a stale one of the same
   * key), and `commit()` queues the file write once the end succeeded (`cancel()` drops it
   * otherwise). Undefined: tier off here.
   */
  async stage(key: string, slices: readonly Uint8Array[]): Promise<StagedValue | undefined> {
    if (!this.enabled) return undefined;
    let total = 0;
    for (const s of slices) total += s.byteLength;
    // A value larger than the whole area waits until staging is empty, then goes alone.
    while (this.staged > 0 && this.staged + total > this.stagingLimit) await new Promise<void>((r) => this.roomWaiters.push(r));
    this.staged += total;
    this.counts.stagedBytes = this.staged;
    const buf = Buffer.allocUnsafe(total);
    const checksums: number[] = [];
    let at = 0;
    for (const s of slices) {
      checksums.push(this.d.copyWithCrc32c(buf.subarray(at, at + s.byteLength), s) >>> 0);
      at += s.byteLength;
    }
    const job: Staged = { key, buf, sliceLengths: slices.map((s) => s.byteLength), checksums };
    let settled = false;
    return {
      checksums,
      commit: () => {
        if (settled) return;
        settled = true;
        this.queue.push(job);
        this.pump();
      },
      cancel: () => {
        if (settled) return;
        settled = true;
        this.release(total);
        this.settle();
      },
    };
  }

  /** Staging bytes given back: waiting Puts may go on. */
  private release(bytes: number): void {
    this.staged -= bytes;
    this.counts.stagedBytes = this.staged;
    for (const w of this.roomWaiters.splice(0)) w();
  }

  /** Resolves when every staged value has been written and reported (or failed). */
  drain(): Promise<void> {
    if (this.idle) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  private get idle(): boolean {
    return this.queue.length === 0 && this.writing === 0 && this.unreported.length === 0 && !this.reporting;
  }

  private settle(): void {
    if (this.idle) for (const w of this.idleWaiters.splice(0)) w();
  }

  private pump(): void {
    while (this.writing < WRITES_IN_FLIGHT && this.queue.length > 0) {
      const job = this.queue.shift()!;
      this.writing++;
      void this.write(job).then((ok) => {
        this.writing--;
        // The staged copy is done with once its file is written; the report needs only the key and CRCs.
        this.release(job.buf.length);
        if (ok) this.unreported.push({ key: job.key, checksums: job.checksums });
        this.report();
        this.pump();
        this.settle();
      });
    }
  }

  /** Writes a staged value's file; false (logged, counted) when that failed. */
  private async write(job: Staged): Promise<boolean> {
    const root = this.root;
    if (root === '') return false;
    try {
      await writeObjectFile(root, job.key, encodeHeader(job.key, job.sliceLengths, job.checksums, this.d.crc32c), job.buf);
      return true;
    } catch (e) {
      this.count('failed');
      this.d.log('warn', `writing the file of ${JSON.stringify(job.key)} under ${root} failed: ${(e as Error).message}; the object stays in memory only`);
      return false;
    }
  }

  /**
   * Reports the written files to the master, one batch at a time: files completed while a batch
   * is on its way go together in the next (one BatchPutEnd for many files under load).
   */
  private report(): void {
    if (this.reporting || this.unreported.length === 0) return;
    const batch = this.unreported.splice(0);
    this.reporting = true;
    void this.d
      .report(batch)
      .then(
        (codes) => {
          codes.forEach((code) => {
            if (code === ErrorCode.OK) this.count('written');
            else this.count('refused'); // the master deletes a file it refuses (over budget, removed meanwhile)
          });
        },
        (e: unknown) => {
          this.count('failed', batch.length);
          this.d.log('warn', `reporting ${batch.length} file(s) of the file tier failed: ${(e as Error).message}`);
        },
      )
      .finally(() => {
        this.reporting = false;
        this.report();
        this.settle();
      });
  }

  /**
   * Reads the object's file into `out` (its exact length), checking it against `checksums` (the
   * master's record; [] none) and its own header. Not found, torn or bad: never any bytes.
   */
  async readInto(path: string, key: string, out: Buffer, checksums: readonly number[]): Promise<void> {
    const what = `get ${JSON.stringify(key)} from the file tier`;
    if (!this.enabled) throw new ObjectNotFoundError(`${what}: the file tier's directory is not usable on this host`);
    if (path.length === 0 || path.includes('/') || path.startsWith('.') || path !== keyFileName(key))
      throw new ObjectNotFoundError(`${what}: the master named file ${JSON.stringify(path)}, not this key's`);
    let fh;
    try {
      fh = await open(join(this.root, path), 'r').catch(async (e: NodeJS.ErrnoException) => {
        if (e.code !== 'ENOENT') throw e;
        await new Promise((r) => setTimeout(r, MISSING_FILE_RETRY_MS));
        return open(join(this.root, path), 'r');
      });
    } catch (e) {
      throw new ObjectNotFoundError(`${what}: ${(e as Error).message}`, { cause: e });
    }
    try {
      const d = await readHeader(fh, this.d.crc32c);
      if (!d.ok) throw this.bad(new ObjectNotFoundError(`${what}: bad file (${'bad' in d ? d.bad : 'torn header'})`));
      const h = d.header;
      if (h.key !== key) throw this.bad(new ObjectNotFoundError(`${what}: the file holds another key`));
      if (h.valueLength !== out.length) throw this.bad(new ObjectNotFoundError(`${what}: the file holds ${h.valueLength} B, the master recorded ${out.length} B`));
      if (checksums.length !== 0 && (checksums.length !== h.checksums.length || checksums.some((c, i) => c >>> 0 !== h.checksums[i]))) {
        throw this.bad(new TransferError(`${what}: the file's checksums are not the ones the master recorded (a stale or foreign file)`, { code: ErrorCode.CHECKSUM_MISMATCH }));
      }
      let at = 0;
      while (at < out.length) {
        const n = (await fh.read(out, at, out.length - at, h.headerLength + at)).bytesRead;
        if (n === 0) throw this.bad(new ObjectNotFoundError(`${what}: the file is torn (${at} of ${out.length} B)`));
        at += n;
      }
      at = 0;
      for (let i = 0; i < h.sliceLengths.length; i++) {
        const l = h.sliceLengths[i];
        if (this.d.crc32c(out.subarray(at, at + l)) >>> 0 !== h.checksums[i]) {
          throw this.bad(new TransferError(`${what}: slice ${i} does not have the CRC-32C its writer recorded`, { code: ErrorCode.CHECKSUM_MISMATCH }));
        }
        at += l;
      }
      this.count('read');
    } finally {
      await fh.close();
    }
  }

  private count(what: CountName, n = 1): void {
    this.counts[what] += n;
    this.d.onCount?.(what, n);
  }

  private bad<E extends Error>(e: E): E {
    this.count('bad');
    this.d.log('warn', e.message);
    return e;
  }
}

/**
 * Writes header + value to <root>/<key's name>: a temporary name, fsync, rename. The data is
 * durable before the name points at it, so a crash leaves the old file, no file, or the whole new
 * one (the directory is not synced: after a power loss the rename may be undone, never torn).
 */
export async function writeObjectFile(root: string, key: string, header: Buffer, value: Buffer): Promise<void> {
  const tmp = join(root, tempFileName(randomUUID()));
  const fh = await open(tmp, 'wx', 0o644);
  try {
    try {
      let buffers = [header, value];
      let left = header.length + value.length;
      while (left > 0) {
        const { bytesWritten } = await fh.writev(buffers);
        left -= bytesWritten;
        buffers = remaining(buffers, bytesWritten);
      }
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, join(root, keyFileName(key)));
  } catch (e) {
    await unlink(tmp).catch(() => {});
    throw e;
  }
}

function remaining(buffers: Buffer[], written: number): Buffer[] {
  const out: Buffer[] = [];
  for (const b of buffers) {
    if (written >= b.length) {
      written -= b.length;
      continue;
    }
    out.push(written > 0 ? b.subarray(written) : b);
    written = 0;
  }
  return out;
}
