// Counts active leases in O(1) amortized per grant, so stats() never walks the object map.
//
// Leases are counted per expiry time: a queue of the distinct expiry times still ahead of the
// horizon (the latest `now` seen), ascending, each with how many objects' leases end then. Every
// lease has the same TTL, so a new expiry is almost always the latest (an increment at the tail);
// extending a lease moves one count from its old expiry (found by binary search) to the new one;
// expiries the horizon passes fall off the head. The queue holds numbers only, at most one entry
// per distinct expiry within a TTL, so reads add nothing for the garbage collector to trace (an
// entry per read with a reference to its object measured ~10% of BatchGetReplicaList's time).
import type { ObjectMeta } from './object-meta.js';

export class LeaseTracker {
  private untils: number[] = [];
  private counts: number[] = [];
  private head = 0;
  private horizon = 0; // never-leased objects have leaseUntil 0: not counted
  private count = 0;

  /** Leases whose expiry is still ahead of the horizon. */
  active(now: number): number {
    this.expire(now);
    return this.count;
  }

  /** Extends meta's lease to `until` (never shortens it). */
  grant(meta: ObjectMeta, until: number, now: number): void {
    this.expire(now);
    this.extend(meta, until);
  }

  /** Moves the horizon to `now` (batches call this once, then `extend` per object). */
  advance(now: number): void {
    this.expire(now);
  }

  /** grant() without moving the horizon: the caller called advance(now) for this instant. */
  extend(meta: ObjectMeta, until: number): void {
    const old = meta.leaseUntil;
    if (until <= old) return;
    if (old > this.horizon) this.counts[this.indexOf(old)]--;
    else this.count++;
    meta.leaseUntil = until;
    this.add(until);
  }

  /** The object is gone: its lease no longer counts. */
  forget(meta: ObjectMeta): void {
    const old = meta.leaseUntil;
    if (old > this.horizon) {
      this.counts[this.indexOf(old)]--;
      this.count--;
    }
    meta.leaseUntil = -1; // before every time, and never a lease's expiry (a whole number, not -Infinity: see object-meta.ts)
  }

  /** One more lease ending at `until`. */
  private add(until: number): void {
    const untils = this.untils;
    const last = untils.length - 1;
    if (last >= this.head && untils[last] === until) {
      this.counts[last]++;
    } else if (last < this.head || untils[last] < until) {
      untils.push(until);
      this.counts.push(1);
    } else {
      // an expiry before the latest (a lease of a shorter TTL): inserted in order
      const i = this.lowerBound(until);
      if (untils[i] === until) this.counts[i]++;
      else {
        untils.splice(i, 0, until);
        this.counts.splice(i, 0, 1);
      }
    }
  }

  /** Index of `until`, which is in the queue (the expiry of a lease still counted). */
  private indexOf(until: number): number {
    const i = this.lowerBound(until);
    if (this.untils[i] !== until) throw new Error(`LeaseTracker: no entry for expiry ${until}`);
    return i;
  }

  /** First index at or after the head whose expiry is >= until. */
  private lowerBound(until: number): number {
    const untils = this.untils;
    let lo = this.head;
    let hi = untils.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (untils[mid] < until) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private expire(now: number): void {
    if (now > this.horizon) this.horizon = now;
    const untils = this.untils;
    let head = this.head;
    while (head < untils.length && untils[head] <= this.horizon) {
      this.count -= this.counts[head];
      head++;
    }
    if (head > 1024 && head * 2 > untils.length) {
      this.untils = untils.slice(head);
      this.counts = this.counts.slice(head);
      head = 0;
    }
    this.head = head;
  }
}
