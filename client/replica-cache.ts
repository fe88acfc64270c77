// Replica lists of objects this client read recently, reused while the read lease the master
// granted with them still has at least half its time to run. During a lease the master refuses to
// remove, evict or overwrite the object, so the list stays true; reusing it saves the master round
// trip on repeated reads of hot keys (a prefix read by many requests). An entry is dropped when a
// read through it fails (the caller then asks the master), and the whole cache when the master
// changes (a new master knows nothing of the old one's leases). Bounded: the oldest entries go,
// and expired ones leave from the old end a few at a time as new ones come (age-ring.ts: a Map is
// never walked from its start), so a stream of first reads does not keep 65,536 dead lists alive.
import type { GetReplicaListResponse__Output } from '../proto/gen/store/GetReplicaListResponse.js';
import { leaseDeadline } from './transfer-plan.js';
import { AgeRing } from './age-ring.js';

/** Pairs at the old end of the age order looked at per entry kept (expired or stale ones go). */
const PRUNE_STEPS = 4;

export interface CachedReplicas {
  /** The master's reply (status OK) as it came. */
  readonly res: GetReplicaListResponse__Output;
  /** When the GetReplicaList was sent (monotonic ms): the lease runs from there. */
  readonly start: number;
  /** Reuse it only before this time (half the lease). */
  readonly reuseUntil: number;
}

export class ReplicaCache {
  private readonly entries = new Map<string, CachedReplicas>();
  private readonly age = new AgeRing<CachedReplicas>();
  hits = 0;
  misses = 0;

  constructor(readonly maxEntries: number) {}

  get size(): number {
    return this.entries.size;
  }

  /** The entry for `key` if it may still be used at `now`. */
  lookup(key: string, now: number): CachedReplicas | undefined {
    const e = this.entries.get(key);
    if (e !== undefined && now < e.reuseUntil) {
      this.hits++;
      return e;
    }
    if (e !== undefined) this.entries.delete(key);
    this.misses++;
    return undefined;
  }

  /** Remembers a successful reply obtained by a GetReplicaList sent at `start`. */
  remember(key: string, res: GetReplicaListResponse__Output, start: number): void {
    if (this.maxEntries <= 0) return;
    const deadline = leaseDeadline(start, Number(res.lease_ttl_ms));
    const e = { res, start, reuseUntil: start + (deadline - start) / 2 };
    this.entries.set(key, e);
    this.age.push(key, e);
    // the oldest go past the bound; stale pairs (keys kept again or dropped) and expired entries
    // leave from the old end a few at a time, and the ring never holds more than twice the bound
    for (let n = 0; this.age.size > 0 && (this.entries.size > this.maxEntries || this.age.size > 2 * this.maxEntries || n < PRUNE_STEPS); n++) {
      const k = this.age.oldestKey!;
      const old = this.age.oldestValue!;
      const current = this.entries.get(k) === old;
      if (current && !(start >= old.reuseUntil) && this.entries.size <= this.maxEntries && this.age.size <= 2 * this.maxEntries) break;
      this.age.shift();
      if (current) this.entries.delete(k);
    }
  }

  forget(key: string): void {
    this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
    this.age.clear();
  }
}
