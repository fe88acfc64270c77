// When a reply may leave (docs/ha.md "Commit acknowledgements"). Two rules, checked after every
// RPC the core served:
//  - a call that changed the state (its changes got sequence numbers) answers once those changes
//    are durable as configured: written to the change log, acknowledged by the standbys
//    (--ha_commit_acks). A PutEnd acknowledged to its writer then survives the master's death.
//  - a call that hands out space (PutStart, UpsertStart, their batch forms, a Ping that may carry
//    copies) answers once every change that freed space is durable everywhere: a new master must
//    never believe an object still holds space another writer has been given. This rule holds
//    whatever --ha_commit_acks says.
// A place that cannot make the changes durable (the change log's disk is full) rejects with a
// NotDurableError: the reply becomes UNAVAILABLE_IN_CURRENT_STATUS, never a success.
// Replies of other calls (reads) never wait. The waits are promises; the dispatcher's replies
// may already be promises (rpc-dispatcher.ts), so nothing blocks the event loop.
import { ErrorCode } from '../../common/error-code.js';
import type { ChangeFanout } from './change-fanout.js';

/** A change could not be made durable: its reply must not say it succeeded. */
export class NotDurableError extends Error {
  readonly code = ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS;
}

/** A place changes become durable in (the change log, the standbys). */
export interface Durability {
  /** Resolves once change `seq` is durable for a commit; undefined when it already is; rejects (NotDurableError) when it cannot be. */
  committed(seq: number): Promise<void> | undefined;
  /** Resolves once change `seq` is durable for reusing the space it freed; undefined when it already is. */
  spaceSafe(seq: number): Promise<void> | undefined;
}

/** RPCs whose replies hand out space (by name, as in the proto). */
export const PLACING_RPCS: readonly string[] = ['PutStart', 'BatchPutStart', 'UpsertStart', 'BatchUpsertStart', 'Ping'];

export class CommitBarrier {
  private readonly places: Durability[] = [];
  private readonly placing: boolean[];

  constructor(
    private readonly fanout: ChangeFanout,
    methodNames: readonly string[],
  ) {
    this.placing = methodNames.map((n) => PLACING_RPCS.includes(n));
  }

  add(d: Durability): void {
    this.places.push(d);
  }

  /** The change count before a call (pass it to settle). */
  get seq(): number {
    return this.fanout.seq;
  }

  /** `res` once the rules allow (at once when nothing waits). */
  settle<T>(methodIndex: number, res: T, seqBefore: number): T | Promise<T> {
    const seq = this.fanout.seq;
    const changed = seq !== seqBefore;
    const placing = this.placing[methodIndex] === true;
    if (!changed && !placing) return res;
    this.fanout.flush();
    let waits: Promise<void>[] | undefined;
    const removal = this.fanout.lastRemoval;
    for (const d of this.places) {
      const c = changed ? d.committed(seq) : undefined;
      if (c !== undefined) (waits ??= []).push(c);
      // Only a placement waits for freed space to be durable: the removal's own reply need not
      // (nobody holds that space until a placement hands it out).
      const s = placing && removal > 0 ? d.spaceSafe(removal) : undefined;
      if (s !== undefined) (waits ??= []).push(s);
    }
    if (waits === undefined) return res;
    return Promise.all(waits).then(
      () => res,
      (e: unknown) => {
        if (e instanceof NotDurableError) return { status_code: e.code } as T;
        throw e;
      },
    );
  }
}
