// A dummy client's cache of where the objects it read lie in same-host memory (the LocalReplica
// its real client adds to read replies, proto/store_client.proto), so that a repeated read copies
// the bytes itself instead of asking (client/dummy-local-reads.ts). An entry is reused until the
// dummy's own request's send time + half the lease left that the real client reported (the rule
// of replica-cache.ts: the master refuses to remove, evict or overwrite a leased object, so the
// bytes stay the object's), and a copy through it must end before send time + all of it. The
// send time is earlier than the real client's reply, so both bounds are conservative without
// comparing the two processes' clocks.
//
// The dummy's own writes and removals drop the entries of their keys (removeByRegex and
// removeAll, and a reconnection to a restarted real client, drop all). A read sent before such a
// drop and answered after it must not bring the old description back: reads take a ticket when
// sent, and a drop of their key (or of everything) meanwhile voids it. Bounded: the oldest go.
import type { LocalReplica__Output } from '../proto/gen/store/LocalReplica.js';
import type { LocalSlice__Output } from '../proto/gen/store/LocalSlice.js';

export interface LocalEntry {
  readonly slices: readonly LocalSlice__Output[];
  /** Each slice's crc32c is the writer's record: a copy must have it. */
  readonly checksums: boolean;
  /** The object's size: the slices' lengths added up. */
  readonly size: number;
  /** Reused only before this time (ms, the cache's clock). */
  readonly reuseUntil: number;
  /** A copy through it must have ended before this time. */
  readonly deadline: number;
}

/** Reads of one key in flight; `void` once a drop overtook them. */
interface Pending {
  n: number;
  void: boolean;
}

/** A read in flight: remember() with it stores what its reply described, unless a drop overtook it. */
export interface ReadTicket {
  readonly key: string;
  readonly sentAt: number;
  readonly epoch: number;
  readonly pending: Pending;
}

export class LocalReadCache {
  private readonly entries = new Map<string, LocalEntry>();
  private readonly pending = new Map<string, Pending>();
  /** Moves on every clear(): tickets of an older epoch are void. */
  private epoch = 0;

  constructor(
    readonly maxEntries: number,
    private readonly now: () => number,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /** The entry for `key` if it may still be used now (an expired one is dropped). */
  lookup(key: string): LocalEntry | undefined {
    const e = this.entries.get(key);
    if (e === undefined) return undefined;
    if (this.now() < e.reuseUntil) return e;
    this.entries.delete(key);
    return undefined;
  }

  /** Called right before a read of `key` is sent. */
  begin(key: string): ReadTicket {
    let p = this.pending.get(key);
    if (p === undefined) {
      p = { n: 0, void: false };
      this.pending.set(key, p);
    }
    p.n++;
    return { key, sentAt: this.now(), epoch: this.epoch, pending: p };
  }

  /**
   * The read of `t` is answered (or failed: `local` undefined). Keeps `local` unless a drop of its
   * key overtook the read, it is malformed or its lease is too short to be of use.
   */
  end(t: ReadTicket, local: LocalReplica__Output | null | undefined): void {
    const p = t.pending;
    if (--p.n === 0 && this.pending.get(t.key) === p) this.pending.delete(t.key);
    if (!local || p.void || t.epoch !== this.epoch || this.maxEntries <= 0) return;
    const leftMs = Number(local.lease_left_us) / 1000;
    const slices = local.slices;
    if (!(leftMs > 0) || slices.length === 0) return;
    let size = 0;
    for (const s of slices) {
      const n = Number(s.length);
      if (!(n > 0) || !s.te_endpoint) return;
      size += n;
    }
    const reuseUntil = t.sentAt + leftMs / 2;
    if (this.now() >= reuseUntil) return;
    this.entries.delete(t.key); // re-inserted: the Map's order is the age order
    this.entries.set(t.key, { slices, checksums: local.checksums === true, size, reuseUntil, deadline: t.sentAt + leftMs });
    if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
  }

  /** Drops `key`'s entry, and voids the reads of it in flight (their replies are not kept). */
  forget(key: string): void {
    this.entries.delete(key);
    const p = this.pending.get(key);
    if (p !== undefined) {
      p.void = true;
      this.pending.delete(key);
    }
  }

  /** Drops every entry and voids every read in flight. */
  clear(): void {
    this.epoch++;
    this.entries.clear();
    for (const p of this.pending.values()) p.void = true;
    this.pending.clear();
  }
}
