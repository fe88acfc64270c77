// The memory the RPC port holds for requests that have not fully arrived (a channel frame short
// of its length, a gRPC message short of its END_STREAM), bounded two ways:
// - in time: a connection whose oldest incomplete request began more than `timeoutMs` ago is
//   to be closed (a peer that sends most of a request, then nothing, holds it no longer);
// - in total: when the bytes held across all connections pass `maxBytes`, connections are to be
//   closed, the one holding the most first (ties: the one waiting longest), until the total is
//   back under the budget. Well-behaved clients send whole requests in one go and rarely hold
//   anything between two reads, so the largest holders are the slow or hostile ones.
// Pure bookkeeping: the listener reports what each connection holds and closes what it is told.

export interface BudgetLimits {
  /** Most request bytes held across all connections. */
  maxBytes: number;
  /** Longest time a request may take to arrive (ms); 0 disables the limit. */
  timeoutMs: number;
}

interface Held {
  bytes: number;
  /** Monotonic ms at which the oldest incomplete request of the connection began; -1: none. */
  since: number;
}

export class RequestBudget<C> {
  private readonly held = new Map<C, Held>();
  private total = 0;

  constructor(private readonly limits: BudgetLimits) {}

  /** Request bytes held across all connections. */
  get bytes(): number {
    return this.total;
  }

  /**
   * Records what `conn` holds now: `bytes` of incomplete requests, the oldest begun at `since`
   * (-1 when it holds none). Returns the connections to close to stay within the budget
   * (possibly `conn` itself), largest first; they are forgotten here.
   */
  set(conn: C, bytes: number, since: number): C[] {
    const h = this.held.get(conn);
    if (bytes === 0 && since < 0) {
      if (h !== undefined) this.forget(conn);
      return [];
    }
    if (h === undefined) this.held.set(conn, { bytes, since });
    else {
      this.total -= h.bytes;
      h.bytes = bytes;
      h.since = since;
    }
    this.total += bytes;
    if (this.total <= this.limits.maxBytes) return [];
    const victims: C[] = [];
    while (this.total > this.limits.maxBytes) {
      let worst: C | undefined;
      let w: Held | undefined;
      for (const [c, x] of this.held) {
        if (w === undefined || x.bytes > w.bytes || (x.bytes === w.bytes && x.since < w.since)) {
          worst = c;
          w = x;
        }
      }
      if (worst === undefined || w!.bytes === 0) break;
      this.forget(worst);
      victims.push(worst);
    }
    return victims;
  }

  /** Forgets a closed connection. */
  forget(conn: C): void {
    const h = this.held.get(conn);
    if (h === undefined) return;
    this.total -= h.bytes;
    this.held.delete(conn);
  }

  /** Connections whose oldest incomplete request began more than the timeout before `now`; they are forgotten here. */
  expired(now: number): C[] {
    if (this.limits.timeoutMs <= 0) return [];
    const out: C[] = [];
    for (const [c, h] of this.held) if (h.since >= 0 && now - h.since > this.limits.timeoutMs) out.push(c);
    for (const c of out) this.forget(c);
    return out;
  }
}
