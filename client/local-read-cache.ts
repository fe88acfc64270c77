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
// sent. Bounded: the oldest entries go.
//
// Every first read learns a location (a batch of 128 learns 128), so keeping one must cost next
// to nothing. Entries are not objects but slots of a ring of typed arrays (the numbers of a
// location) and a key array, in the order they were kept, with a Map from key to slot: learning
// allocates nothing that lives on (an object per entry living a second or so costs the garbage
// collector a copy or two each), and the oldest entries (the bound, expiry) are found at the
// ring's head. A Map is never walked from its start: V8 keeps a deleted entry's place until the
// table is rebuilt, so taking the first key of a Map used as a queue walks over every entry
// deleted before it (12 us per entry kept at 65,536 entries, measured; a ring: 0.3 us).
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
/** Slots of a new cache; the ring doubles up to maxEntries as entries come. */
const FIRST_SLOTS = 256;
/** Distinct engine endpoints kept (one per engine of this host serving memory: a few). */
const MAX_ENDPOINTS = 1024;
/** Numbers per slot in `nums`, at these offsets. */
const F = { reuseUntil: 0, deadline: 1, address: 2, length: 3, incarnation: 4, crc: 5, size: 6 } as const;
const FIELDS = 7;

export class LocalReadCache {
  /** Key -> its slot in the ring. */
  private readonly slots = new Map<string, number>();
  /** Per slot: its key, or undefined once the entry was dropped or replaced (the slot waits for the head). */
  private keys: (string | undefined)[] = [];
  private nums = new Float64Array(0);
  /** Per slot: index in `endpointList`, negative (-1 - index) when the writer recorded CRCs. */
  private eps = new Int32Array(0);
  /** Slots of objects of several slices: all of them. */
  private readonly multi = new Map<number, LocalSlice[]>();
  /** Ring: the oldest slot, and slots in use from there (dropped ones included). */
  private head = 0;
  private used = 0;
  /** Key -> the number of its latest drop (since `floor`). */
  private readonly drops = new Map<string, number>();
  private seq = 0;
  /** Entries kept so far (paces prune()). */
  private kept = 0;
  /** Reads sent before this drop number keep nothing (a clear, or forgotten drops). */
  private floor = 0;
  /** Engine endpoints, each once; slots name them by index. */
  private readonly endpointList: string[] = [];
  private readonly endpointIndex = new Map<string, number>();

  constructor(
    readonly maxEntries: number,
    private readonly now: () => number,
  ) {}

  get size(): number {
    return this.slots.size;
  }

  /** The entry for `key` if it may still be used now (an expired one is dropped). */
  lookup(key: string): LocalEntry | undefined {
    const slot = this.slots.get(key);
    if (slot === undefined) return undefined;
    const n = this.nums;
    const at = slot * FIELDS;
    if (!(this.now() < n[at + F.reuseUntil])) {
      this.drop(key, slot);
      return undefined;
    }
    const ep = this.eps[slot];
    return {
      endpoint: this.endpointList[ep < 0 ? -1 - ep : ep],
      address: n[at + F.address],
      length: n[at + F.length],
      incarnation: n[at + F.incarnation],
      crc: n[at + F.crc],
      slices: this.multi.get(slot),
      checksums: ep < 0,
      size: n[at + F.size],
      reuseUntil: n[at + F.reuseUntil],
      deadline: n[at + F.deadline],
    };
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
    }
    if (list.length > 1) {
      slices = [];
      for (const s of list) {
        const ep = this.endpointOf(s.te_endpoint);
        if (ep < 0) return;
        slices.push({ endpoint: this.endpointList[ep], address: Number(s.address), length: Number(s.length), incarnation: Number(s.incarnation), crc: s.crc32c });
      }
    }
    const s0 = list[0];
    const ep = this.endpointOf(s0.te_endpoint);
    if (ep < 0) return;
    const old = this.slots.get(key);
    if (old !== undefined) this.drop(key, old); // a key kept again takes a new place at the young end
    const slot = this.push(key);
    const n = this.nums;
    const at = slot * FIELDS;
    n[at + F.reuseUntil] = reuseUntil;
    n[at + F.deadline] = t.sentAt + leftMs;
    n[at + F.address] = Number(s0.address);
    n[at + F.length] = Number(s0.length);
    n[at + F.incarnation] = Number(s0.incarnation);
    n[at + F.crc] = s0.crc32c;
    n[at + F.size] = size;
    this.eps[slot] = local.checksums === true ? -1 - ep : ep;
    if (slices) this.multi.set(slot, slices);
    if (++this.kept % PRUNE_EVERY === 0) this.prune();
  }

  /** A slot at the young end of the ring for `key`: the ring grows up to maxEntries, then the oldest entry goes. */
  private push(key: string): number {
    let cap = this.keys.length;
    if (this.used === cap) {
      if (cap < this.maxEntries) {
        this.grow(Math.min(this.maxEntries, Math.max(FIRST_SLOTS, 2 * cap)));
        cap = this.keys.length;
      } else {
        this.pop();
      }
    }
    const slot = (this.head + this.used) % cap;
    this.used++;
    this.keys[slot] = key;
    this.slots.set(key, slot);
    return slot;
  }

  /** Frees the oldest slot (dropping its entry, if it still has one). */
  private pop(): void {
    const slot = this.head;
    const key = this.keys[slot];
    if (key !== undefined) {
      this.slots.delete(key);
      this.keys[slot] = undefined;
      if (this.multi.size > 0) this.multi.delete(slot);
    }
    this.head = (slot + 1) % this.keys.length;
    this.used--;
  }

  /** A ring of `cap` slots with the entries in the same order from slot 0. */
  private grow(cap: number): void {
    const keys: (string | undefined)[] = new Array<string | undefined>(cap).fill(undefined);
    const nums = new Float64Array(cap * FIELDS);
    const eps = new Int32Array(cap);
    const multi = this.multi.size > 0 ? new Map(this.multi) : undefined;
    this.multi.clear();
    const old = this.keys.length;
    for (let i = 0; i < this.used; i++) {
      const from = (this.head + i) % old;
      const key = this.keys[from];
      keys[i] = key;
      nums.set(this.nums.subarray(from * FIELDS, (from + 1) * FIELDS), i * FIELDS);
      eps[i] = this.eps[from];
      if (key !== undefined) this.slots.set(key, i);
      const m = multi?.get(from);
      if (m) this.multi.set(i, m);
    }
    this.keys = keys;
    this.nums = nums;
    this.eps = eps;
    this.head = 0;
  }

  /**
   * Frees slots at the old end whose entries expired or were dropped, a few at a time: what is
   * never read again does not stay until the bound pushes it out.
   */
  private prune(): void {
    const now = this.now();
    for (let n = 0; n < 2 * PRUNE_EVERY && this.used > 0; n++) {
      const slot = this.head;
      if (this.keys[slot] !== undefined && now < this.nums[slot * FIELDS + F.reuseUntil]) break;
      this.pop();
    }
  }

  private drop(key: string, slot: number): void {
    this.slots.delete(key);
    this.keys[slot] = undefined;
    if (this.multi.size > 0) this.multi.delete(slot);
  }

  /** The index of an engine endpoint (-1: too many to keep). */
  private endpointOf(text: string): number {
    const known = this.endpointIndex.get(text);
    if (known !== undefined) return known;
    if (this.endpointList.length >= MAX_ENDPOINTS) return -1;
    this.endpointList.push(text);
    this.endpointIndex.set(text, this.endpointList.length - 1);
    return this.endpointList.length - 1;
  }

  /** Drops `key`'s entry, and voids the reads of it in flight (their replies are not kept). */
  forget(key: string): void {
    const slot = this.slots.get(key);
    if (slot !== undefined) this.drop(key, slot);
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
    this.slots.clear();
    this.multi.clear();
    this.keys.fill(undefined);
    this.head = this.used = 0;
    this.floor = ++this.seq;
    this.drops.clear();
  }
}
