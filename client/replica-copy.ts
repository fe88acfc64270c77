// Replica copies the master asks for in Ping replies (master/core/re-replication.ts): an object
// lost a replica with a segment, a task asked for one, or the SSD tier offloads or promotes one;
// the master placed the new replica, and this client (it has staging memory) moves the bytes.
// Each copy reads a complete replica, checks each slice against the CRC-32C its writer recorded
// (a copy must not spread a corrupted replica), and writes it to the new placement with the
// copy's write generation. The master joins the new replica only once it is reported, and only
// if the object did not change meanwhile.
//
// `copyReplicas` makes the copies of one Ping reply together: a copy from this client's own
// memory into its own SSD file (the SSD tier's offloads, placed on the owner's file first) is a
// positioned write of the source bytes, adjacent ones as one pwritev, O_DIRECT when page-aligned
// (offload-file-writer.ts);
// copies whose every piece is remote move as one engine batch of reads and one of writes through
// staging; anything else (own pieces read by memcpy, MC_STORE_MEMCPY) copies alone
// (`copyReplica`). `ReplicaCopier` runs a reply's copies beside the client's own traffic and
// reports their outcomes in one BatchReplicaCopied (ReplicaCopied each from an older master).
import { ErrorCode } from '../common/error-code.js';
import type { BatchReplicaCopiedRequest } from '../proto/gen/store/BatchReplicaCopiedRequest.js';
import type { CopyOutcome } from '../proto/gen/store/CopyOutcome.js';
import type { ReplicaCopiedRequest } from '../proto/gen/store/ReplicaCopiedRequest.js';
import type { ReplicaCopy__Output } from '../proto/gen/store/ReplicaCopy.js';
import type { ReplicaInfo__Output } from '../proto/gen/store/ReplicaInfo.js';
import { StoreError, TransferError } from './errors.js';
import { MasterProtocolError } from './master-channel-errors.js';
import type { BufferLease } from './buffer-pool.js';
import type { FileRange } from './offload-file-writer.js';
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

/**
 * Makes `copies` (one Ping reply's), each as cheaply as its placement allows (the opening
 * comment); resolves with each one's outcome in order: undefined (every byte at its target) or
 * why not. Never rejects. `lastWriteStarted`: called when all that is left of them is their last
 * file write, now started after others (only when every copy is a file write; ReplicaCopier's `nearlyDone`).
 */
export async function copyReplicas(core: PathCore, copies: readonly ReplicaCopy__Output[], lastWriteStarted?: () => void): Promise<(Error | undefined)[]> {
  const out: (Error | undefined)[] = copies.map(() => undefined);
  const files: { at: number; ranges: FileRange[] }[] = [];
  const remote: number[] = [];
  const alone: number[] = [];
  copies.forEach((c, at) => {
    try {
      const ranges = fileCopy(core, c);
      if (ranges !== undefined) files.push({ at, ranges });
      else if (allRemote(core, c)) remote.push(at);
      else alone.push(at);
    } catch (e) {
      out[at] = e as Error;
    }
  });
  const onlyFiles = remote.length === 0 && alone.length === 0;
  const writes =
    files.length > 0
      ? core.d.offloadFiles!.write(
          files.flatMap((f) => f.ranges),
          onlyFiles ? lastWriteStarted : undefined,
        )
      : undefined;
  await Promise.all([
    writes?.then((errors) => {
      let i = 0;
      for (const f of files) {
        for (const _ of f.ranges) {
          const e = errors[i++];
          if (e !== undefined && out[f.at] === undefined) out[f.at] = transferFailure(e, `copy of ${JSON.stringify(copies[f.at].key)}: write to the SSD file`);
        }
      }
    }),
    remote.length > 0
      ? engineBatch(
          core,
          remote.map((at) => copies[at]),
        ).then((r) => r.forEach((e, i) => (out[remote[i]] = e)))
      : undefined,
    ...alone.map((at) =>
      copyReplica(core, copies[at]).then(
        () => undefined,
        (e: Error) => (out[at] = e),
      ),
    ),
  ]);
  return out;
}

/**
 * The file writes of a copy from own memory into an own SSD file, its source checked against the
 * recorded CRC-32C; undefined when the copy is not one (another path makes it). Throws when the
 * source does not check out or the target refuses the write (fenced, out of range).
 */
function fileCopy(core: PathCore, copy: ReplicaCopy__Output): FileRange[] | undefined {
  const what = `copy of ${JSON.stringify(copy.key)}`;
  const source = copy.source;
  const target = copy.target;
  if (!source || !target || source.handles.length === 0 || source.handles.length !== target.handles.length) return undefined;
  const own = core.d.segments;
  for (const h of source.handles) if (!own.has(h.segment_name)) return undefined;
  for (const h of target.handles) if (own.get(h.segment_name)?.file === undefined) return undefined;
  const from = replicaPieces(source, () => true);
  const to = replicaPieces(
    target,
    () => true,
    from.map((p) => p.length),
  );
  const sums = copy.slice_checksums.length === from.length ? copy.slice_checksums : undefined;
  const crc = core.checksums;
  const ranges: FileRange[] = [];
  for (let i = 0; i < from.length; i++) {
    const range = core.segmentFile(to[i].handle, to[i].length);
    if (range === undefined) return undefined;
    const view = core.segmentView(from[i].handle, from[i].length);
    // The bytes written are read again by the write: checked here, they can change after only if
    // their space was freed and reused, and then the master knows the copy is stale.
    if (sums && crc && crc.of(view) !== sums[i]) mismatch(core, copy, from[i], what);
    range.data = view;
    range.address = Number(from[i].handle.buffer); // page-aligned: written with O_DIRECT
    ranges.push(range);
  }
  return ranges;
}

function allRemote(core: PathCore, copy: ReplicaCopy__Output): boolean {
  for (const r of [copy.source, copy.target]) for (const h of r?.handles ?? []) if (core.isOwn(h.segment_name)) return false;
  return true;
}

/**
 * Copies whose pieces are all remote, as one engine batch of reads (into staging) and one of
 * writes. A batch that fails is made again copy by copy (copyReplica), so one bad copy fails
 * alone; so are copies that find no staging room while the batch holds its own.
 */
async function engineBatch(core: PathCore, copies: readonly ReplicaCopy__Output[]): Promise<(Error | undefined)[]> {
  const out: (Error | undefined)[] = copies.map(() => undefined);
  const pool = core.pool('replica copies');
  const plans: { at: number; from: Piece[]; to: Piece[]; sums: number[] | undefined; lease: BufferLease }[] = [];
  const later: number[] = [];
  try {
    for (let at = 0; at < copies.length; at++) {
      const c = copies[at];
      try {
        if (!c.source || !c.target) throw new StoreError(ErrorCode.INVALID_PARAMS, `copy of ${JSON.stringify(c.key)}: the master sent no source or target`);
        const from = replicaPieces(c.source, core.isOwn);
        const to = replicaPieces(
          c.target,
          core.isOwn,
          from.map((p) => p.length),
        );
        for (const pieces of [from, to]) if (core.needsLookup(pieces)) await core.resolveEndpoints(pieces);
        const lease = pool.tryAcquire(from.reduce((n, p) => n + p.length, 0));
        if (!lease) {
          later.push(at);
          continue;
        }
        plans.push({ at, from, to, sums: c.slice_checksums.length === from.length ? c.slice_checksums : undefined, lease });
      } catch (e) {
        out[at] = e as Error;
      }
    }
    if (plans.length > 0) {
      const reads: TransferOp[] = [];
      for (const p of plans) {
        for (const piece of p.from) {
          const op = core.op('read', piece, p.lease.address + piece.offset);
          if (p.sums) op.checksum = true;
          reads.push(op);
        }
      }
      let got: Uint32Array | undefined | void;
      try {
        got = await core.d.engine.transfer(reads);
      } catch {
        // which one failed: each alone tells
        for (const p of plans) {
          later.push(p.at);
          p.lease.release();
        }
        plans.length = 0;
      }
      let i = 0;
      const crc = core.checksums;
      const good = plans.filter((p) => {
        let ok = true;
        p.from.forEach((piece, j) => {
          const v = got ? got[i] : crc?.of(p.lease.buffer.subarray(piece.offset, piece.offset + piece.length));
          i++;
          if (p.sums && v !== undefined && v !== p.sums[j] && ok) {
            try {
              mismatch(core, copies[p.at], piece, `copy of ${JSON.stringify(copies[p.at].key)}`);
            } catch (e) {
              out[p.at] = e as Error;
              ok = false;
            }
          }
        });
        return ok;
      });
      const writes: TransferOp[] = [];
      for (const p of good) for (const piece of p.to) writes.push(core.op('write', piece, p.lease.address + piece.offset));
      if (writes.length > 0) {
        try {
          await core.d.engine.transfer(writes);
        } catch {
          for (const p of good) later.push(p.at);
        }
      }
    }
  } finally {
    for (const p of plans) p.lease.release();
  }
  await Promise.all(
    later.map((at) =>
      copyReplica(core, copies[at]).then(
        () => (out[at] = undefined),
        (e: Error) => (out[at] = e),
      ),
    ),
  );
  return out;
}

export interface ReplicaCopierDeps {
  clientId: () => string;
  /**
   * Makes one Ping reply's copies; each one's outcome in order (copyReplicas). Calls `nearlyDone`,
   * when it can tell, once all that is left is a last write the device is already making.
   */
  copy: (copies: readonly ReplicaCopy__Output[], nearlyDone: () => void) => Promise<(Error | undefined)[]>;
  /** Reports many outcomes at once; rejects with MasterProtocolError "unknown method" from an older master. */
  reportBatch: (req: BatchReplicaCopiedRequest) => Promise<unknown>;
  /** Reports one outcome (an older master). */
  report: (req: ReplicaCopiedRequest) => Promise<unknown>;
  log: (level: 'info' | 'warn', msg: string) => void;
  /** All copies started have been made: ask the master for more now rather than at the next heartbeat. */
  onIdle?: () => void;
}

export class ReplicaCopier {
  /** Copies started and not yet made. */
  private active = 0;
  /** Of those, copies whose batch is down to its last write (nearlyDone): they do not stop a Ping from taking more. */
  private finishing = 0;
  private readonly done = new Set<Promise<void>>();
  /** False once the master refused BatchReplicaCopied (an older one): one ReplicaCopied per copy. */
  private batchReports = true;

  constructor(private readonly d: ReplicaCopierDeps) {}

  /**
   * Whether to offer the master to copy (sent in Ping): not while COPIES_AT_ONCE are running,
   * leaving out those down to their last write.
   */
  get canTake(): boolean {
    return this.active - this.finishing < COPIES_AT_ONCE;
  }

  /** Whether no copy is being made. */
  get idle(): boolean {
    return this.active === 0;
  }

  /** Starts the copies of a Ping reply; they report on their own. */
  start(copies: readonly ReplicaCopy__Output[]): void {
    if (copies.length === 0) return;
    const p = this.batch(copies).finally(() => this.done.delete(p));
    this.done.add(p);
  }

  /** Resolves when the copies started so far have reported (or failed to). */
  async drain(): Promise<void> {
    await Promise.all([...this.done]);
  }

  private async batch(copies: readonly ReplicaCopy__Output[]): Promise<void> {
    this.active += copies.length;
    // Down to its last file write, others written before it: ask for the next batch now, so its
    // Ping (a round trip behind the master's other work) and checks overlap that write and its
    // writes queue behind it: the device is not left idle between batches. Not earlier, nor for a
    // batch of one write: a Ping then finds fewer copies waiting, and smaller batches cost more
    // per copy (docs/tiers.md "SSD tier").
    let finishing = false;
    const nearlyDone = (): void => {
      if (finishing) return;
      finishing = true;
      this.finishing += copies.length;
      if (this.active === this.finishing) this.d.onIdle?.();
    };
    let made: (Error | undefined)[];
    try {
      made = await this.d.copy(copies, nearlyDone);
    } catch (e) {
      made = copies.map(() => e as Error);
    }
    const outcomes: CopyOutcome[] = copies.map((c, i) => {
      const e = made[i];
      if (e === undefined) return { copy_id: c.copy_id, ok: true, failed_segments: [] };
      this.d.log('warn', `replica copy ${c.copy_id} of ${JSON.stringify(c.key)} failed: ${e.message}`);
      const replicas = [c.source, c.target].filter((r): r is ReplicaInfo__Output => !!r);
      return { copy_id: c.copy_id, ok: false, failed_segments: unreachableSegments(e, replicas) };
    });
    const reported = this.report(outcomes);
    // The report and the next Ping leave together: the master reads the report first (one connection, in order).
    this.active -= copies.length;
    if (finishing) this.finishing -= copies.length;
    // Nothing left but batches down to their last write (which asked already, as did this one if it was one).
    if (this.active === this.finishing && !finishing) this.d.onIdle?.();
    await reported;
  }

  private async report(outcomes: CopyOutcome[]): Promise<void> {
    const client_id = this.d.clientId();
    try {
      if (this.batchReports) {
        try {
          await this.d.reportBatch({ client_id, outcomes });
          return;
        } catch (e) {
          if (!(e instanceof MasterProtocolError && /unknown method/.test(e.message))) throw e;
          this.batchReports = false; // an older master: one report per copy from now on
        }
      }
      await Promise.all(outcomes.map((o) => this.d.report({ client_id, ...o })));
    } catch (e) {
      // The master gives an unreported copy up at its deadline and queues the object again.
      this.d.log('warn', `reporting ${outcomes.length} replica copies failed: ${(e as Error).message}`);
    }
  }
}
