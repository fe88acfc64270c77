// Write fences of one segment (docs/integrity.md). A write the master gave up on (revoked, a
// zombie released, its writer or a replica's owner gone) may still have bytes on their way to the
// segment: queued in a socket, retransmitted after a partition heals. Its space is therefore not
// reused at once: it is quarantined here until the segment's owner confirms (FenceAck) that its
// transfer engine refuses that write's generation. The fence the owner installs says: refuse
// generations below `below` (every write still open on the segment is at least that old) and
// those listed in `revoked`. Only then does the space go back to the allocator, so a stale write
// lands in free space or nowhere, never in another object.
//
// Generations are the master's clock at the write's start, plus one (object-meta.ts keeps the
// start of an unfinished write; no field per object). Two writes started in the same millisecond
// share one: when one of them is revoked the other's bytes are refused too, and that put fails
// and is retried by its client. Safe, and rare.

/** Sent fences kept to match late acks (an ack names the version it installed). */
const SENT_KEPT = 8;

export interface FenceMessage {
  version: number;
  below: number;
  revoked: number[];
}

interface Quarantined {
  block: number;
  gen: number;
}

export class WriteFence {
  /** Revoked generations with space still quarantined or still above `below`: gen -> blocks held. */
  private readonly revoked = new Map<number, number>();
  private quarantine: Quarantined[] = [];
  private version = 0;
  private readonly sent: FenceMessage[] = [];
  /** The highest `below` the owner has acknowledged (fences only move forward). */
  private ackedBelow = 0;

  /** Blocks waiting for an ack. */
  get quarantinedBlocks(): number {
    return this.quarantine.length;
  }

  /** Whether the owner has something to install (a revoked generation it has not acknowledged). */
  get pending(): boolean {
    return this.quarantine.length > 0 || this.revoked.size > 0;
  }

  /** Holds `block` (of a write of generation `gen` that was given up) until the owner fences `gen`. */
  hold(block: number, gen: number): void {
    this.quarantine.push({ block, gen });
    this.revoked.set(gen, (this.revoked.get(gen) ?? 0) + 1);
  }

  /**
   * The fence to send now, given `below` (the oldest generation still open on the segment, or the
   * next one to be handed out). A new version whenever it differs from the last one sent.
   */
  fence(below: number): FenceMessage {
    const b = Math.max(below, this.ackedBelow);
    const revoked: number[] = [];
    for (const gen of this.revoked.keys()) if (gen >= b) revoked.push(gen);
    revoked.sort((x, y) => x - y);
    const last = this.sent[this.sent.length - 1];
    if (last !== undefined && last.below === b && sameList(last.revoked, revoked)) return last;
    const msg: FenceMessage = { version: ++this.version, below: b, revoked };
    this.sent.push(msg);
    if (this.sent.length > SENT_KEPT) this.sent.shift();
    return msg;
  }

  /**
   * The owner installed fence `version`: returns the blocks that fence covers (free to reuse now)
   * and forgets what needs no fencing any more. An unknown (too old) version frees nothing.
   */
  ack(version: number): number[] {
    const msg = this.sent.find((m) => m.version === version);
    if (msg === undefined) return [];
    if (msg.below > this.ackedBelow) this.ackedBelow = msg.below;
    const fenced = new Set(msg.revoked);
    const freed: number[] = [];
    const kept: Quarantined[] = [];
    for (const q of this.quarantine) {
      if (q.gen < msg.below || fenced.has(q.gen)) {
        freed.push(q.block);
        const n = this.revoked.get(q.gen)! - 1;
        if (n === 0) this.revoked.delete(q.gen);
        else this.revoked.set(q.gen, n);
      } else kept.push(q);
    }
    this.quarantine = kept;
    // Generations whose space is free but that are still above the acked `below` stay listed: the
    // owner must keep refusing them. Those below it are refused by `below` itself.
    for (const gen of fenced) if (!this.revoked.has(gen) && gen >= this.ackedBelow) this.revoked.set(gen, 0);
    for (const gen of [...this.revoked.keys()]) if (gen < this.ackedBelow && this.revoked.get(gen) === 0) this.revoked.delete(gen);
    return freed;
  }
}

function sameList(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
