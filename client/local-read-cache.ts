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
// drop and answered after it must not bring the old description back: a drop is numbered, and a
// read keeps its reply only if no drop of its key (or of everything) was numbered after it was
// sent. Bounded: the oldest entries go. An entry is one object for a value of one slice (most),
// with its engine's endpoint string shared: entries live for a second or so, and every object
// they keep costs the garbage collector a copy.
import type { LocalReplica__Output } from '../proto/gen/store/LocalReplica.js';

export interface LocalSlice {
  /** The serving engine (host:port). */
  readonly endpoint: string;
  readonly address: number;
  readonly length: number;
  /** The served region's incarnation (0: not checked). */
  readonly incarnation: number;
  /** The writer's CRC-32C of the slice, when `checksums`. */
  readonly crc: number;
}

/** An object's location: its first slice's fields, and all its slices when it has more than one. */
export interface LocalEntry extends LocalSlice {
  /** Every slice, in value order, when there are several; undefined: the entry is the one slice. */
  readonly slices: readonly LocalSlice[] | undefined;
  /** Each slice's crc is the writer's record: a copy must have it. */
  readonly checksums: boolean;
  /** The object's size: the slices' lengths added up. */
  readonly size: number;
  /** Reused only before this time (ms, the cache's clock). */
  readonly reuseUntil: number;
  /** A copy through it must have ended before this time. */
  readonly deadline: number;
}

/** When reads were sent (one stamp serves a whole batch): end() with it keeps what a reply described, unless a drop overtook the read. */
export interface ReadStamp {
  readonly sentAt: number;
  /** The drop number when they were sent. */
  readonly seq: number;
}

/** Drops remembered by key: past this many, every read then in flight is voided instead. */
const MAX_DROPS_REMEMBERED = 4096;
/** Every this many entries kept, up to this many expired ones are dropped from the old end. */
const PRUNE_EVERY = 32;

export class LocalReadCache {
  private readonly entries = new Map<string, LocalEntry>();
  /** Key -> the number of its latest drop (since `floor`). */
  private readonly drops = new Map<string, number>();
  private seq = 0;
  /** Entries kept so far (paces prune()). */
  private kept = 0;
  /** Reads sent before this drop number keep nothing (a clear, or forgotten drops). */
  private floor = 0;
  /** One string per engine endpoint, shared by the entries. */
  private readonly endpoints = new Map<string, string>();

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

  /** Called right before reads are sent. */
  begin(): ReadStamp {
    return { sentAt: this.now(), seq: this.seq };
  }

  /**
   * A read of `key` sent at `t` is answered. Keeps `local` unless a drop of the key overtook the
   * read, it is malformed or its lease is too short to be of use.
   */
  end(key: string, t: ReadStamp, local: LocalReplica__Output | null | undefined): void {
    if (!local || this.maxEntries <= 0 || t.seq < this.floor) return;
    if (this.drops.size > 0 && (this.drops.get(key) ?? -1) > t.seq) return;
    const leftMs = Number(local.lease_left_us) / 1000;
    const reuseUntil = t.sentAt + leftMs / 2;
    const list = local.slices;
    if (!(leftMs > 0) || list.length === 0 || this.now() >= reuseUntil) return;
    let slices: LocalSlice[] | undefined;
    let size = 0;
    for (const s of list) {
      const length = Number(s.length);
      if (!(length > 0) || !s.te_endpoint) return;
      size += length;
      if (list.length > 1) (slices ??= []).push(this.slice(s));
    }
    const s0 = list[0];
    const e: LocalEntry = {
      endpoint: slices ? slices[0].endpoint : this.endpoint(s0.te_endpoint),
      address: Number(s0.address),
      length: Number(s0.length),
      incarnation: Number(s0.incarnation),
      crc: s0.crc32c,
      slices,
      checksums: local.checksums === true,
      size,
      reuseUntil,
      deadline: t.sentAt + leftMs,
    };
    // (a key set again keeps its place in the Map's age order: eviction is only roughly oldest-first)
    this.entries.set(key, e);
    if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
    if (++this.kept % PRUNE_EVERY === 0) this.prune();
  }

  /**
   * Drops expired entries from the old end (the Map's order is roughly the send order), a few at a
   * time: what is never read again does not stay until the bound pushes it out (a big cache of
   * dead entries costs the garbage collector).
   */
  private prune(): void {
    const now = this.now();
    let n = 0;
    for (const [key, e] of this.entries) {
      if (now < e.reuseUntil || ++n > PRUNE_EVERY) break;
      this.entries.delete(key);
    }
  }

  private slice(s: LocalReplica__Output['slices'][number]): LocalSlice {
    return { endpoint: this.endpoint(s.te_endpoint), address: Number(s.address), length: Number(s.length), incarnation: Number(s.incarnation), crc: s.crc32c };
  }

  /** The shared string of an endpoint (a decoded reply's own copy is dropped at once). */
  private endpoint(text: string): string {
    const known = this.endpoints.get(text);
    if (known !== undefined) return known;
    if (this.endpoints.size < 1024) this.endpoints.set(text, text);
    return text;
  }

  /** Drops `key`'s entry, and voids the reads of it in flight (their replies are not kept). */
  forget(key: string): void {
    this.entries.delete(key);
    this.seq++;
    if (this.drops.size >= MAX_DROPS_REMEMBERED) {
      this.floor = this.seq;
      this.drops.clear();
    } else {
      this.drops.set(key, this.seq);
    }
  }

  /** Drops every entry and voids every read in flight. */
  clear(): void {
    this.entries.clear();
    this.floor = ++this.seq;
    this.drops.clear();
  }
}
