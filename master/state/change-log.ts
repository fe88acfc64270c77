// The append-only change log beside the snapshots (docs/master.md "Snapshots and the change log"):
// one file frame (common/state-proto.ts) per change, in the order the core made them. Frames are
// buffered during an RPC and written with one write(2) before its reply leaves (flush, called by
// the commit barrier), so a change acknowledged to a client is in the kernel's hands and survives
// the master process being killed. fdatasync runs once a second, at every rotation, and (with
// --change_log_sync=placement, the default) before a reply hands out space that a removal freed
// (spaceSafe): a power loss of the master's host may then lose the last second of changes, but
// never a removal whose space was given to someone else.
// Files are changes-<index>.log; a new index begins with every snapshot (snapshot-store.ts).
import { closeSync, fdatasync, fdatasyncSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { fileFrame } from '../../common/state-proto.js';
import type { ChangeConsumer } from './change-fanout.js';
import type { Durability } from './commit-barrier.js';

export function logFileName(index: number): string {
  return `changes-${String(index).padStart(10, '0')}.log`;
}

export class ChangeLog implements ChangeConsumer, Durability {
  private fd: number;
  private pending: Buffer[] = [];
  private pendingSeq = 0;
  private writtenSeq = 0;
  private syncedSeq = 0;
  private syncing: Promise<void> | undefined;
  private index_: number;
  /** Bytes written to the current file, and frames in it (metrics). */
  bytes = 0;
  frames = 0;
  /** fdatasync calls made (metrics: what the policy costs). */
  syncs = 0;
  /** Writes and syncs that failed (each also reported to onError). */
  errors = 0;

  constructor(
    private readonly dir: string,
    index: number,
    private readonly onError: (e: Error) => void,
  ) {
    this.index_ = index;
    this.fd = openSync(join(dir, logFileName(index)), 'a');
  }

  get index(): number {
    return this.index_;
  }

  change(bytes: Buffer, seq: number): void {
    this.pending.push(fileFrame(bytes));
    this.pendingSeq = seq;
  }

  flush(): void {
    if (this.pending.length === 0) return;
    const data = this.pending.length === 1 ? this.pending[0] : Buffer.concat(this.pending);
    this.frames += this.pending.length;
    this.pending = [];
    try {
      writeSync(this.fd, data);
      this.bytes += data.length;
      this.writtenSeq = this.pendingSeq;
    } catch (e) {
      this.errors++;
      this.onError(e as Error);
    }
  }

  committed(_seq: number): undefined {
    return undefined; // written by flush(), which the barrier calls first
  }

  spaceSafe(seq: number): Promise<void> | undefined {
    if (this.syncedSeq >= seq) return undefined;
    return this.syncTo(seq);
  }

  /** fdatasync of what is written (the timer's call; joins one in progress). */
  sync(): Promise<void> {
    return this.syncTo(this.writtenSeq);
  }

  private syncTo(seq: number): Promise<void> {
    if (this.syncing === undefined) {
      const target = this.writtenSeq;
      const fd = this.fd;
      this.syncs++;
      this.syncing = new Promise<void>((resolve) =>
        fdatasync(fd, (e) => {
          if (e) {
            this.errors++;
            this.onError(e);
          } else this.syncedSeq = Math.max(this.syncedSeq, target);
          this.syncing = undefined;
          resolve();
        }),
      );
    }
    return this.syncing.then(() => (this.syncedSeq >= seq || this.writtenSeq < seq ? undefined : this.syncTo(seq)));
  }

  /** Continues in a new file `index` (a snapshot begins): the old one is synced and closed. */
  async rotate(index: number): Promise<void> {
    while (this.syncing !== undefined) await this.syncing;
    this.flush();
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
