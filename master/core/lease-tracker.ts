// Counts active leases in O(1) amortized per grant, so stats() never walks the object map.
//
// Every lease has the same TTL, so expiry times arrive in grant order: a FIFO of (expiry, object)
// suffices. Each object's newest entry is the one that counts; older entries of an extended lease
// are skipped when they fall out. An entry is "counted" until the horizon (the latest `now` seen)
// passes its expiry.
import type { ObjectMeta } from './object-meta.js';

export class LeaseTracker {
  private untils: number[] = [];
  private metas: ObjectMeta[] = [];
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
    if (until <= meta.leaseUntil) return;
    if (!(meta.leaseUntil > this.horizon)) this.count++;
    meta.leaseUntil = until;
    this.untils.push(until);
    this.metas.push(meta);
  }

  /** The object is gone: its lease no longer counts. */
  forget(meta: ObjectMeta): void {
    if (meta.leaseUntil > this.horizon) this.count--;
    meta.leaseUntil = -1; // before every time, and never a lease's expiry (a whole number, not -Infinity: see object-meta.ts)
  }

  private expire(now: number): void {
    if (now > this.horizon) this.horizon = now;
    const untils = this.untils;
    let head = this.head;
    while (head < untils.length && untils[head]! <= this.horizon) {
      if (this.metas[head]!.leaseUntil === untils[head]) this.count--;
      head++;
    }
    if (head > 1024 && head * 2 > untils.length) {
      this.untils = untils.slice(head);
      this.metas = this.metas.slice(head);
      head = 0;
    } else {
      // drop references to objects whose entries were consumed
      for (let i = this.head; i < head; i++) this.metas[i] = undefined as unknown as ObjectMeta;
    }
    this.head = head;
  }
}
