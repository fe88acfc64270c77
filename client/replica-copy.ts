// Replica copies the master asks for in Ping replies (master/core/re-replication.ts): an object
// lost a replica with a segment, the master placed a new one, and this client (it has staging
// memory) moves the bytes. `copyReplica` reads a complete replica into staging, checks each slice
// against the CRC-32C its writer recorded (a copy must not spread a corrupted replica), and writes
// it to the new placement with the copy's write generation. `ReplicaCopier` runs a few at once
// beside the client's own traffic and reports each outcome with ReplicaCopied.
import { ErrorCode } from '../common/error-code.js';
import type { ReplicaCopiedRequest } from '../proto/gen/store/ReplicaCopiedRequest.js';
import type { ReplicaCopy__Output } from '../proto/gen/store/ReplicaCopy.js';
import type { ReplicaInfo__Output } from '../proto/gen/store/ReplicaInfo.js';
import { StoreError, TransferError } from './errors.js';
import { transferFailure, type PathCore } from './path-core.js';
import { replicaPieces, type Piece, type TransferOp } from './transfer-plan.js';
import { unreachableSegments } from './write-path.js';

/** Copies one client runs at once (each holds a staging lease of the object's size while it runs). */
export const COPIES_AT_ONCE = 16;

/** Reads `copy.source` and writes it to `copy.target`. Throws when any byte did not make it. */
export async function copyReplica(core: PathCore, copy: ReplicaCopy__Output): Promise<void> {
  const what = `copy of ${JSON.stringify(copy.key)}`;
  if (!copy.source || !copy.target) throw new StoreError(ErrorCode.INVALID_PARAMS, `${what}: the master sent no source or target`);
  const from = replicaPieces(copy.source, core.isOwn);
  const to = replicaPieces(
    copy.target,
    core.isOwn,
    from.map((p) => p.length),
  );
  const sums = copy.slice_checksums.length === from.length ? copy.slice_checksums : undefined;
  for (const pieces of [from, to]) if (core.needsLookup(pieces)) await core.resolveEndpoints(pieces);
  const bytes = from.reduce((n, p) => n + p.length, 0);
  const pool = core.pool(what);
  const lease = pool.tryAcquire(bytes) ?? (await pool.acquire(bytes));
  try {
    const buf = lease.buffer;
    const crc = core.checksums;
    const reads: TransferOp[] = [];
    const readOf: Piece[] = [];
    for (const p of from) {
      if (p.local) {
        const view = core.segmentView(p.handle, p.length);
        const dst = buf.subarray(p.offset, p.offset + p.length);
        if (sums && crc) {
          if (crc.copy(dst, view) !== sums[from.indexOf(p)]) mismatch(core, copy, p, what);
        } else view.copy(dst);
        continue;
      }
      const op = core.op('read', p, lease.address + p.offset);
      if (sums) op.checksum = true;
      reads.push(op);
      readOf.push(p);
    }
    if (reads.length > 0) {
      let got: Uint32Array | undefined | void;
      try {
        got = await core.d.engine.transfer(reads);
      } catch (e) {
        throw transferFailure(e, `${what}: read`);
      }
      if (sums) {
        readOf.forEach((p, i) => {
          const v = got ? got[i] : crc?.of(buf.subarray(p.offset, p.offset + p.length));
          if (v !== undefined && v !== sums[from.indexOf(p)]) mismatch(core, copy, p, what);
        });
      }
    }
    const writes: TransferOp[] = [];
    for (const p of to) {
      if (p.local) buf.copy(core.segmentView(p.handle, p.length), 0, p.offset, p.offset + p.length);
      else writes.push(core.op('write', p, lease.address + p.offset));
    }
    if (writes.length > 0) {
      try {
        await core.d.engine.transfer(writes);
      } catch (e) {
        throw transferFailure(e, `${what}: write`);
      }
    }
  } finally {
    lease.release();
  }
}

function mismatch(core: PathCore, copy: ReplicaCopy__Output, p: Piece, what: string): never {
  core.d.onChecksumMismatch?.(copy.key, p.handle.segment_name);
  throw new TransferError(`${what}: the bytes read from ${p.handle.segment_name} do not have the CRC-32C their writer recorded`, { code: ErrorCode.CHECKSUM_MISMATCH });
}

export interface ReplicaCopierDeps {
  clientId: () => string;
  copy: (copy: ReplicaCopy__Output) => Promise<void>;
  report: (req: ReplicaCopiedRequest) => Promise<unknown>;
  log: (level: 'info' | 'warn', msg: string) => void;
  /** All copies started have reported: ask the master for more now rather than at the next heartbeat. */
  onIdle?: () => void;
}

export class ReplicaCopier {
  /** Copies started and not yet reported. */
  private active = 0;
  private readonly done = new Set<Promise<void>>();

  constructor(private readonly d: ReplicaCopierDeps) {}

  /** Whether to offer the master to copy (sent in Ping): not while COPIES_AT_ONCE are running. */
  get canTake(): boolean {
    return this.active < COPIES_AT_ONCE;
  }

  /** Starts the copies of a Ping reply; they report on their own. */
  start(copies: readonly ReplicaCopy__Output[]): void {
    for (const c of copies) {
      const p = this.one(c).finally(() => this.done.delete(p));
      this.done.add(p);
    }
  }

  /** Resolves when the copies started so far have reported (or failed to). */
  async drain(): Promise<void> {
    await Promise.all([...this.done]);
  }

  private async one(c: ReplicaCopy__Output): Promise<void> {
    this.active++;
    let ok = false;
    let failed: string[] = [];
    try {
      await this.d.copy(c);
      ok = true;
    } catch (e) {
      const replicas = [c.source, c.target].filter((r): r is ReplicaInfo__Output => !!r);
      failed = unreachableSegments(e, replicas);
      this.d.log('warn', `replica copy ${c.copy_id} of ${JSON.stringify(c.key)} failed: ${(e as Error).message}`);
    }
    try {
      await this.d.report({ client_id: this.d.clientId(), copy_id: c.copy_id, ok, failed_segments: failed });
    } catch (e) {
      // The master gives an unreported copy up at its deadline and queues the object again.
      this.d.log('warn', `reporting replica copy ${c.copy_id} failed: ${(e as Error).message}`);
    }
    if (--this.active === 0) this.d.onIdle?.();
  }
}
