// The append-only change log beside the snapshots (docs/master.md "Snapshots and the change log"):
// one file frame (common/state-proto.ts) per change, in the order the core made them. Frames are
// buffered during an RPC and written with one write(2) before its reply leaves (flush, called by
// the commit barrier), so a change acknowledged to a client is in the kernel's hands and survives
// the master process being killed. fdatasync runs once a second, at every rotation, and (with
// --change_log_sync=placement, the default) before a reply hands out space that a removal freed
// (spaceSafe): a power loss of the master's host may then lose the last second of changes, but
// never a removal whose space was given to someone else.
// A failed write (disk full, EIO) is never acknowledged: the frames not written stay queued, the
// file is cut back to its last whole frame, and every reply whose changes are not in the file
// answers UNAVAILABLE_IN_CURRENT_STATUS (a NotDurableError, commit-barrier.ts) until a later flush
// writes the queue out (the disk has room again); in order, so the log never has a gap.
// Files are changes-<index>.log; a new index begins with every snapshot (snapshot-store.ts).
import { closeSync, fdatasync, fdatasyncSync, ftruncateSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { fileFrame } from '../../common/state-proto.js';
import type { ChangeConsumer } from './change-fanout.js';
import { NotDurableError, type Durability } from './commit-barrier.js';

export function logFileName(index: number): string {
  return `changes-${String(index).padStart(10, '0')}.log`;
}

/** The calls that touch the file (a seam for tests that make them fail). */
export interface ChangeLogIo {
  writeSync(fd: number, data: Buffer, offset: number, length: number): number;
  fdatasync(fd: number, cb: (e: NodeJS.ErrnoException | null) => void): void;
}

const FS_IO: ChangeLogIo = { writeSync: (fd, data, offset, length) => writeSync(fd, data, offset, length), fdatasync };

export interface ChangeLogEvents {
  /** Writing failed (first failure after success, or a sync failure). */
  failed(e: Error): void;
  /** Writing works again after failures; `frames` were written late. */
  recovered(frames: number): void;
}

export class ChangeLog implements ChangeConsumer, Durability {
  private fd: number;
  /** Frames not yet in the file, oldest first (handed over since the last flush, or left by a failed write). */
  private pending: Buffer[] = [];
  private pendingSeq = 0;
  private writtenSeq = 0;
  private syncedSeq = 0;
  private syncing: Promise<Error | undefined> | undefined;
  private index_: number;
  /** The last write or sync failure while it lasts (undefined: the log is writable). */
  private failure: Error | undefined;
  /** A partial write could not be cut off yet. */
  private torn = false;
  /** Bytes written to the current file (whole frames), and frames in it (metrics). */
  bytes = 0;
  frames = 0;
  /** fdatasync calls made (metrics: what the policy costs). */
  syncs = 0;
  /** Writes and syncs that failed. */
  errors = 0;

  constructor(
    private readonly dir: string,
    index: number,
    private readonly events: ChangeLogEvents,
    /** --change_log_sync=placement: a placement after a removal waits for its fdatasync. */
    private readonly syncBeforePlacement = true,
    private readonly io: ChangeLogIo = FS_IO,
  ) {
    this.index_ = index;
    this.fd = openSync(join(dir, logFileName(index)), 'a');
  }

  get index(): number {
    return this.index_;
  }

  /** False while changes cannot be written (their replies are errors). */
  get writable(): boolean {
    return this.failure === undefined;
  }

  change(bytes: Buffer, seq: number): void {
    this.pending.push(fileFrame(bytes));
    this.pendingSeq = seq;
  }

  flush(): void {
    if (this.pending.length === 0) return;
    if (this.torn) {
      try {
        ftruncateSync(this.fd, this.bytes);
        this.torn = false;
      } catch (e) {
        this.fail(e as Error);
        return;
      }
    }
    const data = this.pending.length === 1 ? this.pending[0] : Buffer.concat(this.pending);
    const count = this.pending.length;
    let done = 0;
    try {
      while (done < data.length) done += this.io.writeSync(this.fd, data, done, data.length - done);
    } catch (e) {
      // Cut a torn frame off (a restore stops at one and would lose what follows) and keep every
      // frame for the next flush: the log stays a prefix of the changes, with no gap.
      if (done > 0) {
        try {
          ftruncateSync(this.fd, this.bytes);
        } catch {
          this.torn = true; // cut before anything else is appended
        }
      }
      this.pending = [data];
      this.fail(e as Error);
      return;
    }
    this.pending = [];
    this.bytes += data.length;
    this.frames += count;
    this.writtenSeq = this.pendingSeq;
    if (this.failure !== undefined) {
      this.failure = undefined;
      this.events.recovered(count);
    }
  }

  committed(seq: number): Promise<void> | undefined {
    // written by flush(), which the barrier calls first
    return this.writtenSeq >= seq ? undefined : Promise.reject(this.notDurable(seq));
  }

  spaceSafe(seq: number): Promise<void> | undefined {
    if (this.writtenSeq < seq) return Promise.reject(this.notDurable(seq));
    if (!this.syncBeforePlacement || this.syncedSeq >= seq) return undefined;
    return this.syncTo(seq);
  }

  /** fdatasync of what is written (the timer's call; joins one in progress). Never rejects. */
  sync(): Promise<void> {
    return this.syncTo(this.writtenSeq).catch(() => undefined);
  }

  private notDurable(seq: number): NotDurableError {
    return new NotDurableError(`change ${seq} is not in the change log (${this.failure?.message ?? 'not written'})`);
  }

  private fail(e: Error): void {
    this.errors++;
    if (this.failure === undefined) this.events.failed(e);
    this.failure = e;
  }

  /** Resolves once change `seq` is synced; rejects when the write or the fdatasync failed. */
  private syncTo(seq: number): Promise<void> {
    if (this.syncing === undefined) {
      const target = this.writtenSeq;
      const fd = this.fd;
      this.syncs++;
      this.syncing = new Promise<Error | undefined>((resolve) =>
        this.io.fdatasync(fd, (e) => {
          if (e) this.fail(e);
          else {
            this.syncedSeq = Math.max(this.syncedSeq, target);
            if (this.failure !== undefined && this.pending.length === 0) {
              this.failure = undefined; // nothing left unwritten: a sync failure has passed
              this.events.recovered(0);
            }
          }
          this.syncing = undefined;
          resolve(e ?? undefined);
        }),
      );
    }
    return this.syncing.then((e) => {
      if (this.syncedSeq >= seq) return undefined;
      if (e !== undefined || this.writtenSeq < seq) throw this.notDurable(seq);
      return this.syncTo(seq);
    });
  }

  /** Continues in a new file `index` (a snapshot begins): the old one is synced and closed. */
  async rotate(index: number): Promise<void> {
    while (this.syncing !== undefined) await this.syncing;
    this.flush(); // what cannot be written now stays queued, for the new file (order kept)
    const old = this.fd;
    this.fd = openSync(join(this.dir, logFileName(index)), 'a');
    this.index_ = index;
    this.bytes = 0;
    this.frames = 0;
    try {
      fdatasyncSync(old);
      this.syncedSeq = this.writtenSeq;
    } finally {
      closeSync(old);
    }
  }

  close(): void {
    this.flush();
    try {
      fdatasyncSync(this.fd);
    } finally {
      closeSync(this.fd);
    }
  }
}
