// The SSD tier in the master core (docs/tiers.md, "SSD tier"): DISK replicas on store services'
// offload segments (protocol `ssd`, segment-registry.ts) beside an object's memory replicas.
//
// - Offload (--enable_offload): a completed write is queued (bounded; overflow counted, a put is
//   never held up); a copier pinging for work gets copies of queued objects to a placement on an
//   SSD segment (the memory replica's owner preferred). The copy is re-replication's
//   (re-replication.ts `direct`): the DISK replica joins the object only when reported complete
//   and not stale, so a torn copy is never part of an object. With --offload_on_evict nothing is
//   queued at PutEnd; eviction queues what it picks. An object whose DISK replica went with its SSD
//   segment (store service dead or unmounted) while a memory replica remains is queued again.
// - Memory eviction (evictFromMemory): an object with a DISK replica loses only its memory
//   replicas and moves to the disk eviction list (FLAG_DISK_ONLY); one without is, with offload
//   on, copied first (its memory freed once the copy is in: the eviction round moves on to other
//   candidates meanwhile), unless offload cannot place it (no SSD segment, disk full) or
//   --offload_force_evict and it was picked again before its copy finished (counted).
// - Disk quota (--quota_bytes, 0: 90% of the SSD segments' capacity): past it, with
//   --enable_disk_eviction, SSD-only objects are removed least recently used first, then the DISK
//   replicas of objects also in memory; leases and pins are respected as for memory. Without it,
//   offload stops placing (counted).
// - Promotion (--promotion_on_hit): a read of an SSD-only object counted past
//   --promotion_admission_threshold by a count-min sketch queues a copy to a memory placement
//   (at most --promotion_queue_limit queued or in flight); the read itself is served from disk.
import { CountMinSketch } from '../../common/count-min-sketch.js';
import { ErrorCode } from '../../common/error-code.js';
import type { ReplicaCopy__Output } from '../../proto/gen/store/ReplicaCopy.js';
import type { CoreShared } from './core-shared.js';
import { SWEEP_EVICTION_BATCH } from './eviction.js';
import { FLAG_CXL, FLAG_DISK_ONLY, HANDLE_FIELDS, type ObjectMeta } from './object-meta.js';
import type { CopyPurpose } from './re-replication.js';
import { freeHandles } from './replica-placement.js';
import type { Segment } from './segment-registry.js';

/** Objects waiting for an offload copy, at most (more are counted as dropped). */
export const OFFLOAD_QUEUE_MAX = 100_000;
/**
 * Directed copies (offload and promotion) handed to one client per Ping, at most, and bytes of
 * them (at least one copy). One Ping and one BatchReplicaCopied per 128 offloads of 64 KiB instead
 * of 64: each is a round trip for master and copier (measured, docs/tiers.md); the byte bound keeps
 * a batch of large objects from holding their memory until all of it is written.
 */
export const DIRECTED_PER_PING = 128;
export const DIRECTED_BYTES_PER_PING = 32 * 1024 * 1024;
/** Queued keys looked at per Ping: a Ping stays O(1). */
const SCAN_PER_PING = 256;
/** Failed offload copies of one object before it is left without a DISK replica (eviction still queues it when it picks it). */
export const OFFLOAD_ATTEMPTS = 5;
/** Default quota: this share of the SSD segments' capacity. */
export const DEFAULT_QUOTA_RATIO = 0.9;
/**
 * A client that offered to copy within this long gets the copies of the objects it holds: it
 * copies between its own segments by memcpy, where another copier would move the bytes twice
 * over the network.
 */
const COPIER_FRESH_MS = 3_000;
/** Counters per row of the promotion sketch. */
const SKETCH_WIDTH = 1 << 16;

export interface DiskTierStats {
  diskCapacityBytes: number;
  diskUsedBytes: number;
  diskQuotaBytes: number;
  offloadsQueued: number;
  offloadsInFlight: number;
  offloadsDone: number;
  offloadsFailed: number;
  /** Completed writes not queued: the queue was full. */
  offloadsDropped: number;
  /** Offloads not placed: no SSD segment had room within the quota. */
  offloadsSkippedFull: number;
  /** Objects queued for offload again after their DISK replica was lost with its SSD segment. */
  offloadsRequeued: number;
  promotionsQueued: number;
  promotionsInFlight: number;
  promotionsDone: number;
  promotionsFailed: number;
  /** Objects or DISK replicas removed to stay within the disk quota. */
  diskEvictions: number;
  /** Objects evicted from memory without a disk copy (--offload_force_evict, or offload unable to place). */
  forcedEvictions: number;
}

/** How the tier removes a whole object (object-lifecycle.ts). */
export interface DiskTierEnds {
  deleteObject(key: string, meta: ObjectMeta): void;
}

export class DiskTier {
  /** Keys waiting for an offload copy, oldest first. */
  private readonly offloadQueue = new Set<string>();
  /** Keys eviction picked that wait for their copy: their memory goes once it is in. */
  private readonly evictAfter = new Set<string>();
  /** Keys whose memory replicas may go now (their copy joined; checked for leases at the next sweep). */
  private readonly freeable = new Set<string>();
  private readonly promoteQueue = new Set<string>();
  /** Failed offload copies per key, of keys queued or in flight again after a failure (few: only failing keys). */
  private readonly failures = new Map<string, number>();
  private readonly sketch: CountMinSketch | undefined;
  private offloadsInFlight = 0;
  private promotionsInFlight = 0;
  private offloadsDone = 0;
  private offloadsFailed = 0;
  private offloadsDropped = 0;
  private offloadsSkippedFull = 0;
  private offloadsRequeued = 0;
  private promotionsDone = 0;
  private promotionsFailed = 0;
  private diskEvictions = 0;
  private forcedEvictions = 0;

  constructor(
    private readonly s: CoreShared,
    private readonly ends: DiskTierEnds,
  ) {
    const c = s.config;
    this.sketch = c.promotionOnHit && c.promotionAdmissionThreshold > 1 ? new CountMinSketch(SKETCH_WIDTH) : undefined;
  }

  /** Whether the object has a replica on an SSD segment. */
  hasDiskReplica(meta: ObjectMeta): boolean {
    const segments = this.s.segments;
    for (let k = 0, n = meta.handleCount; k < n; k++) if (segments.byId(meta.segAt(k))?.disk === true) return true;
    return false;
  }

  /** Whether every replica of the object is on SSD segments (and it has one). */
  onDiskOnly(meta: ObjectMeta): boolean {
    const segments = this.s.segments;
    const n = meta.handleCount;
    for (let k = 0; k < n; k++) if (segments.byId(meta.segAt(k))?.disk !== true) return false;
    return n > 0;
  }

  /** Whether completed writes are offloaded (--enable_offload without --offload_on_evict). */
  private get atPutEnd(): boolean {
    const c = this.s.config;
    return c.enableOffload && !c.offloadOnEvict;
  }

  /** A write became complete (PutEnd, UpsertEnd): queued for offload when offload runs at PutEnd. */
  completed(meta: ObjectMeta): void {
    if (this.atPutEnd) this.queueOffload(meta);
  }

  /**
   * The object lost its DISK replica with an SSD segment (its store service died or unmounted it:
   * membership.ts) and still has a memory replica: queued for offload again, as a completed write
   * is, so it keeps a copy beyond DRAM. (An SSD-only object that lost its only replica is gone.)
   * With --offload_on_evict, eviction queues it when it picks it, as any object.
   */
  lostDiskReplica(meta: ObjectMeta): void {
    if (!this.atPutEnd || !meta.complete || this.hasDiskReplica(meta)) return;
    if (this.queueOffload(meta)) this.offloadsRequeued++;
  }

  private queueOffload(meta: ObjectMeta): boolean {
    const key = meta.key;
    if (this.offloadQueue.has(key)) return true;
    if (this.offloadQueue.size >= OFFLOAD_QUEUE_MAX) {
      this.offloadsDropped++;
      return false;
    }
    this.offloadQueue.add(key);
    this.s.copiers.wake(this.ownerOf(meta)); // the copier hears of it now, not at its next heartbeat
    return true;
  }

  /** The client holding the object's first replica (the copier preferred for it). */
  private ownerOf(meta: ObjectMeta): string | undefined {
    return meta.handleCount > 0 ? this.s.segments.byId(meta.segAt(0))?.clientId : undefined;
  }

  /**
   * Memory eviction picked `meta` (complete, not leased, not hard-pinned). Frees its memory
   * replicas when a DISK replica holds it, else (offload on) has it copied first (false: nothing
   * freed now), else deletes it.
   */
  evictFromMemory(meta: ObjectMeta): boolean {
    const key = meta.key;
    if (this.hasDiskReplica(meta)) {
      this.evictAfter.delete(key);
      this.dropMemoryReplicas(meta);
      return true;
    }
    const c = this.s.config;
    if (c.enableOffload && this.canPlace(meta.bytes() / Math.max(1, meta.replicaCount))) {
      if (!this.evictAfter.has(key)) {
        if (this.queueOffload(meta)) {
          this.evictAfter.add(key);
          this.awaitCopy(meta);
          return false;
        }
      } else if (!c.offloadForceEvict) {
        this.awaitCopy(meta); // its copy is on the way
        return false;
      }
    }
    if (c.enableOffload) this.forcedEvictions++;
    this.evictAfter.delete(key);
    this.ends.deleteObject(key, meta);
    return true;
  }

  /**
   * `meta` waits for its offload copy before its memory may go: off the eviction lists meanwhile
   * (eviction.ts `park`), unless --offload_force_evict, whose second pick must see it again.
   */
  private awaitCopy(meta: ObjectMeta): void {
    if (!this.s.config.offloadForceEvict) this.s.order.park(meta);
  }

  /** `key` no longer waits for an offload copy before its memory goes (it came, or cannot come). */
  private copyAwaited(key: string, meta: ObjectMeta, arrived: boolean): void {
    if (!this.evictAfter.delete(key)) return;
    if (arrived) this.freeable.add(key);
    this.s.order.unpark(meta); // the next to go: eviction frees it (arrived) or deletes it
  }

  /** Keeps only the DISK replicas of `meta` (its memory space freed) and moves it to the disk list. */
  private dropMemoryReplicas(meta: ObjectMeta): void {
    const s = this.s;
    const h = meta.h;
    const stride = meta.slices * HANDLE_FIELDS;
    const kept: number[] = [];
    for (let r = 0; r < h.length; r += stride) {
      const replica = h.slice(r, r + stride);
      if (s.segments.byId(replica[0])?.disk === true) kept.push(...replica);
      else freeHandles(s.segments, replica);
    }
    if (kept.length === 0) {
      this.ends.deleteObject(meta.key, meta);
      return;
    }
    s.rereplicator.invalidate(meta.key); // a copy may be reading a replica just freed
    s.order.remove(meta);
    meta.h = kept;
    meta.flags = (meta.flags & ~FLAG_CXL) | FLAG_DISK_ONLY; // while unlisted: the list follows the flag
    s.order.add(meta);
    if (s.sink !== undefined) s.emitObject(meta);
  }

  /** A read of a complete object: an SSD-only one counts toward its promotion. */
  read(meta: ObjectMeta): void {
    if ((meta.flags & FLAG_DISK_ONLY) === 0) return;
    const c = this.s.config;
    if (!c.promotionOnHit) return;
    const key = meta.key;
    if (this.promoteQueue.has(key)) return;
    const count = this.sketch === undefined ? c.promotionAdmissionThreshold : this.sketch.add(key);
    if (count < c.promotionAdmissionThreshold) return;
    if (this.promoteQueue.size + this.promotionsInFlight >= c.promotionQueueLimit) return;
    this.promoteQueue.add(key);
    this.s.copiers.wake(this.ownerOf(meta));
  }

  /** Copies for a client that can make them (Ping): promotions first, then offloads. `gen`: the targets' write generation. */
  assign(clientId: string, now: number, gen: number, out: ReplicaCopy__Output[]): void {
    if (this.promoteQueue.size > 0) this.drain(this.promoteQueue, 'promote', clientId, now, gen, out);
    if (this.offloadQueue.size > 0 && this.s.segments.diskAllocatable().length > 0) this.drain(this.offloadQueue, 'offload', clientId, now, gen, out);
  }

  private drain(queue: Set<string>, purpose: CopyPurpose, clientId: string, now: number, gen: number, out: ReplicaCopy__Output[]): void {
    const s = this.s;
    let scanned = 0;
    let bytes = 0;
    const later: string[] = [];
    for (const key of queue) {
      if (out.length >= DIRECTED_PER_PING || bytes >= DIRECTED_BYTES_PER_PING || scanned++ >= SCAN_PER_PING) break;
      const meta = s.objects.get(key);
      if (meta !== undefined && !this.copiesFor(clientId, meta, now)) continue; // left for its owner
      queue.delete(key);
      if (meta === undefined) {
        this.evictAfter.delete(key); // removed meanwhile
        this.failures.delete(key);
        continue;
      }
      if (!meta.complete) {
        later.push(key); // an upsert in flight: after it ends
        continue;
      }
      const wanted = purpose === 'offload' ? !this.hasDiskReplica(meta) : (meta.flags & FLAG_DISK_ONLY) !== 0;
      if (!wanted) {
        if (purpose === 'offload') {
          this.copyAwaited(key, meta, true); // it has one already
          this.failures.delete(key);
        }
        continue;
      }
      const target = purpose === 'offload' ? this.placeOnDisk(meta, now) : this.placeInMemory(meta, now);
      if (target === undefined) {
        if (purpose === 'promote') this.promotionsFailed++;
        else {
          this.copyAwaited(key, meta, false); // nowhere to go: eviction may delete it
          this.failures.delete(key);
        }
        continue;
      }
      const copy = s.rereplicator.directPlaced(purpose, key, meta, target, clientId, now, gen);
      if (copy === undefined) {
        freeHandles(s.segments, target); // never handed out: nothing can arrive
        later.push(key);
        continue;
      }
      if (purpose === 'offload') this.offloadsInFlight++;
      else this.promotionsInFlight++;
      bytes += meta.bytes() / Math.max(1, meta.replicaCount);
      out.push(copy);
    }
    for (const key of later) queue.add(key);
  }

  /** Whether `clientId` should copy `meta`: it owns the source replica, or its owner is no copier now. */
  private copiesFor(clientId: string, meta: ObjectMeta, now: number): boolean {
    const owner = this.s.segments.byId(meta.segAt(0))?.clientId;
    if (owner === undefined || owner === clientId) return true;
    return !this.s.copiers.fresh(owner, now, COPIER_FRESH_MS); // silent since (forgotten) or never a copier: anyone copies
  }

  /** Whether offloads or promotions wait to be handed out. */
  get waiting(): boolean {
    return this.offloadQueue.size > 0 || this.promoteQueue.size > 0;
  }

  /** A directed copy ended (re-replication.ts): `meta` the object it joined, undefined when it did not. */
  copyEnded(purpose: CopyPurpose, key: string, meta: ObjectMeta | undefined): void {
    const s = this.s;
    if (purpose === 'promote') {
      this.promotionsInFlight--;
      if (meta === undefined) {
        this.promotionsFailed++;
        return;
      }
      this.promotionsDone++;
      if ((meta.flags & FLAG_DISK_ONLY) !== 0) {
        // back in memory: on the memory eviction list again
        s.order.remove(meta);
        meta.flags &= ~FLAG_DISK_ONLY;
        s.order.add(meta);
      }
      return;
    }
    this.offloadsInFlight--;
    if (meta === undefined) {
      this.offloadsFailed++;
      const again = s.objects.get(key);
      if (again === undefined) {
        this.evictAfter.delete(key); // removed meanwhile
        this.failures.delete(key);
      } else if (this.evictAfter.has(key)) {
        if (!this.queueOffload(again)) this.copyAwaited(key, again, false); // still to be evicted: try again, or let eviction delete it
      } else if (this.atPutEnd) {
        // Its target went with its SSD segment, or the copier failed: tried again elsewhere (the
        // segments the copier could not reach are suspect for a while), a few times at most.
        const failed = (this.failures.get(key) ?? 0) + 1;
        if (failed < OFFLOAD_ATTEMPTS && this.queueOffload(again)) this.failures.set(key, failed);
        else this.failures.delete(key);
      }
      return;
    }
    this.failures.delete(key);
    this.offloadsDone++;
    this.copyAwaited(key, meta, true);
  }

  /**
   * Housekeeping (the core's sweep): frees the memory of evicted objects whose copy is in (those
   * not leased), and keeps disk use within the quota. Bounded per call.
   */
  sweep(now: number): void {
    const s = this.s;
    if (this.evictAfter.size > 0 && s.segments.diskAllocatable().length === 0) {
      // No SSD segment takes copies any more: what waits for one is evicted without it, as before the wait.
      for (const key of this.evictAfter) {
        const meta = s.objects.get(key);
        if (meta === undefined) this.evictAfter.delete(key);
        else this.copyAwaited(key, meta, false);
      }
    }
    let n = 0;
    for (const key of this.freeable) {
      if (n++ >= SWEEP_EVICTION_BATCH) break;
      const meta = s.objects.get(key);
      if (meta !== undefined && meta.leased(now)) continue; // the next round picks it again
      this.freeable.delete(key);
      if (meta !== undefined && meta.complete && !meta.hardPinned && (meta.flags & FLAG_DISK_ONLY) === 0 && this.hasDiskReplica(meta)) this.dropMemoryReplicas(meta);
    }
    const over = this.diskUsage().used - this.quota();
    if (over > 0 && s.config.enableDiskEviction) this.evictFromDisk(over, now);
  }

  /** Disk bytes used and capacity (SSD segments). */
  diskUsage(): { used: number; capacity: number } {
    let used = 0;
    let capacity = 0;
    for (const seg of this.s.segments.all()) {
      if (!seg.disk) continue;
      used += seg.allocator.used;
      capacity += seg.allocator.capacity;
    }
    return { used, capacity };
  }

  quota(): number {
    const q = this.s.config.quotaBytes;
    return q > 0 ? q : Math.floor(this.diskUsage().capacity * DEFAULT_QUOTA_RATIO);
  }

  /** Whether a replica of `bytes` could be placed on disk (room within the quota, or room to make). */
  private canPlace(bytes: number): boolean {
    if (this.s.segments.diskAllocatable().length === 0) return false;
    const u = this.diskUsage();
    if (u.used + bytes <= this.quota()) return true;
    return this.s.config.enableDiskEviction && this.s.order.disk.size > 0;
  }

  /**
   * Frees at least `bytes` of disk, least recently used first: SSD-only objects (removed), then
   * the DISK replicas of objects also in memory. Leased, hard-pinned and (unless allowed)
   * soft-pinned objects are skipped. Returns the bytes freed.
   */
  private evictFromDisk(bytes: number, now: number): number {
    const s = this.s;
    const c = s.config;
    let freed = 0;
    let n = 0;
    const ok = (m: ObjectMeta): boolean => m.complete && !m.hardPinned && !m.leased(now) && (c.allowEvictSoftPinnedObjects || !m.softPinned(now, c.defaultKvSoftPinTtlMs));
    for (let m = s.order.disk.head; m !== null && freed < bytes && n < SWEEP_EVICTION_BATCH;) {
      const next = m.next;
      n++;
      if (ok(m)) {
        freed += m.bytes();
        this.diskEvictions++;
        this.ends.deleteObject(m.key, m);
      }
      m = next;
    }
    for (const list of [s.order.plain, s.order.soft]) {
      for (let m = list.head; m !== null && freed < bytes && n < SWEEP_EVICTION_BATCH; m = m.next) {
        n++;
        if (!ok(m) || !this.hasDiskReplica(m)) continue;
        freed += this.dropDiskReplicas(m);
        this.diskEvictions++;
      }
    }
    return freed;
  }

  /** Drops the DISK replicas of an object that also has memory ones; returns the bytes freed. */
  private dropDiskReplicas(meta: ObjectMeta): number {
    const s = this.s;
    const h = meta.h;
    const stride = meta.slices * HANDLE_FIELDS;
    const kept: number[] = [];
    let freed = 0;
    for (let r = 0; r < h.length; r += stride) {
      const replica = h.slice(r, r + stride);
      if (s.segments.byId(replica[0])?.disk !== true) {
        kept.push(...replica);
        continue;
      }
      for (let i = 2; i < replica.length; i += HANDLE_FIELDS) freed += replica[i];
      freeHandles(s.segments, replica);
    }
    if (kept.length === 0) return 0; // not reached: callers pass objects with a memory replica
    s.rereplicator.invalidate(meta.key);
    meta.h = kept;
    if (s.sink !== undefined) s.emitObject(meta);
    return freed;
  }

  /**
   * A DISK replica's placement for `meta` (one buffer per slice, on SSD segments, the owner of its
   * first replica preferred), or undefined (counted) when no room within the quota can be had.
   */
  private placeOnDisk(meta: ObjectMeta, now: number): number[] | undefined {
    const s = this.s;
    const lengths = meta.sliceLengths();
    const bytes = lengths.reduce((a, b) => a + b, 0);
    const over = this.diskUsage().used + bytes - this.quota();
    if (over > 0 && (!s.config.enableDiskEviction || this.evictFromDisk(over, now) < over)) {
      this.offloadsSkippedFull++;
      return undefined;
    }
    const owner = s.segments.byId(meta.segAt(0))?.clientId;
    const open = s.segments.diskAllocatable();
    const order: Segment[] = [...open.filter((g) => g.clientId === owner), ...open.filter((g) => g.clientId !== owner)];
    const h: number[] = [];
    for (const length of lengths) {
      let placed = false;
      for (const seg of order) {
        const handle = seg.allocator.allocate(length);
        if (handle === null) continue;
        h.push(seg.id, handle.block, length);
        placed = true;
        break;
      }
      if (!placed) {
        freeHandles(s.segments, h);
        this.offloadsSkippedFull++;
        return undefined;
      }
    }
    return h;
  }

  /**
   * A memory placement for a promotion (the core's allocation strategy; memory full: an eviction
   * round makes room, as for a PutStart), or undefined.
   */
  private placeInMemory(meta: ObjectMeta, now: number): number[] | undefined {
    const placer = this.s.placer;
    const lengths = meta.sliceLengths();
    let placed = placer.place(lengths, 1, []) === ErrorCode.OK;
    if (!placed) this.s.eviction.makeRoom(now, meta.bytes(), () => (placed = placer.place(lengths, 1, []) === ErrorCode.OK));
    return placed ? placer.handles() : undefined;
  }

  stats(): DiskTierStats {
    const u = this.diskUsage();
    return {
      diskCapacityBytes: u.capacity,
      diskUsedBytes: u.used,
      diskQuotaBytes: this.quota(),
      offloadsQueued: this.offloadQueue.size,
      offloadsInFlight: this.offloadsInFlight,
      offloadsDone: this.offloadsDone,
      offloadsFailed: this.offloadsFailed,
      offloadsDropped: this.offloadsDropped,
      offloadsSkippedFull: this.offloadsSkippedFull,
      offloadsRequeued: this.offloadsRequeued,
      promotionsQueued: this.promoteQueue.size,
      promotionsInFlight: this.promotionsInFlight,
      promotionsDone: this.promotionsDone,
      promotionsFailed: this.promotionsFailed,
      diskEvictions: this.diskEvictions,
      forcedEvictions: this.forcedEvictions,
    };
  }
}
