// Mounted segments: one buffer allocator each, a small integer id per segment (what object
// metadata stores instead of the name), lookup by name and by id, and the list of segments open
// for new allocations (MOUNTED, not in an unmount grace period) in mount order. A segment
// imported from another master's state is RESTORED until its owner mounts it again (docs/ha.md):
// its objects are kept but neither served nor placed on. A segment mounted with protocol `ssd` is
// a store service's offload segment (docs/tiers.md, "SSD tier"): disk, never in `allocatable`
// (memory placement), listed by `diskAllocatable` for the disk tier (disk-tier.ts).
import { OffsetAllocator } from '../../common/offset-allocator.js';
import type { BufferAllocator } from '../../common/buffer-allocator.js';
import { WriteFence } from './write-fence.js';

/** The protocol a store service mounts its offload (SSD) segments with. */
export const DISK_PROTOCOL = 'ssd';

export type SegmentStatus = 'MOUNTED' | 'UNMOUNTING' | 'RESTORED';

export class Segment {
  status: SegmentStatus = 'MOUNTED';
  /** Monotonic ms at which an UNMOUNTING segment is finally unmounted, or a RESTORED one dropped. */
  unmountAt = 0;
  /** A writer reported it unreachable: no new placement on it before this time (monotonic ms). */
  suspectUntil = 0;
  readonly allocator: BufferAllocator;
  /** Space of given-up writes held until the owner fences them (write-fence.ts). */
  readonly fence = new WriteFence();
  /** An offload segment (a file on the owner's SSD): holds DISK replicas only. */
  readonly disk: boolean;

  constructor(
    readonly id: number,
    readonly name: string,
    readonly segmentId: string,
    readonly clientId: string,
    readonly baseAddress: number,
    readonly size: number,
    readonly teEndpoint: string,
    readonly protocol: string,
    /** The owner engine's registration of the memory (0: not checked by transfers). */
    readonly incarnation: number = 0,
    allocator?: BufferAllocator,
  ) {
    this.allocator = allocator ?? new OffsetAllocator(name, baseAddress, size);
    this.disk = protocol === DISK_PROTOCOL;
  }

  /** free bytes / capacity, 0 for an empty region. */
  get freeRatio(): number {
    const cap = this.allocator.capacity;
    return cap === 0 ? 0 : (cap - this.allocator.used) / cap;
  }
}

/** What allocation strategies see: the allocatable segments and lookup by name. */
export interface SegmentPool {
  /** MOUNTED segments in mount order. */
  allocatable(): readonly Segment[];
  byName(name: string): Segment | undefined;
}

export class SegmentRegistry implements SegmentPool {
  private readonly byNameMap = new Map<string, Segment>();
  /** Indexed by segment id (small, never reused): the hottest lookup, once per handle read. */
  private readonly byIdArr: (Segment | undefined)[] = [undefined];
  private readonly bySegmentId = new Map<string, Segment>();
  private nextId = 1;
  private openCache: Segment[] | null = null;
  private diskCache: Segment[] | null = null;
  private withSuspects = false;
  private restoredCount = 0;

  get size(): number {
    return this.byNameMap.size;
  }

  add(name: string, segmentId: string, clientId: string, base: number, size: number, teEndpoint: string, protocol: string, incarnation = 0): Segment {
    const seg = new Segment(this.nextId++, name, segmentId, clientId, base, size, teEndpoint, protocol, incarnation);
    this.byNameMap.set(name, seg);
    this.byIdArr[seg.id] = seg;
    this.bySegmentId.set(segmentId, seg);
    this.openCache = this.diskCache = null;
    return seg;
  }

  /**
   * A segment of an imported state (its allocator already holds its objects' ranges): RESTORED,
   * so neither served nor placed on, until its owner mounts it again (revive) or `dropAt` passes.
   */
  addRestored(
    name: string,
    segmentId: string,
    clientId: string,
    base: number,
    size: number,
    teEndpoint: string,
    protocol: string,
    incarnation: number,
    allocator: BufferAllocator,
    dropAt: number,
  ): Segment {
    const seg = new Segment(this.nextId++, name, segmentId, clientId, base, size, teEndpoint, protocol, incarnation, allocator);
    seg.status = 'RESTORED';
    seg.unmountAt = dropAt;
    this.byNameMap.set(name, seg);
    this.byIdArr[seg.id] = seg;
    this.bySegmentId.set(segmentId, seg);
    this.restoredCount++;
    this.openCache = this.diskCache = null;
    return seg;
  }

  /**
   * The owner of a RESTORED segment mounted it again: the same segment (id, allocator, objects)
   * under the new registration, MOUNTED. A new Segment object, because replies cache a segment's
   * wire fields per object (master/replica-wire.ts).
   */
  revive(old: Segment, teEndpoint: string, protocol: string, incarnation: number): Segment {
    const seg = new Segment(old.id, old.name, old.segmentId, old.clientId, old.baseAddress, old.size, teEndpoint, protocol, incarnation, old.allocator);
    this.byNameMap.set(seg.name, seg);
    this.byIdArr[seg.id] = seg;
    this.bySegmentId.set(seg.segmentId, seg);
    if (old.status === 'RESTORED') this.restoredCount--;
    this.openCache = this.diskCache = null;
    return seg;
  }

  /** Segments still RESTORED (0 almost always: readers check nothing then). */
  get restored(): number {
    return this.restoredCount;
  }

  delete(seg: Segment): void {
    if (seg.status === 'RESTORED' && this.byIdArr[seg.id] === seg) this.restoredCount--;
    this.byNameMap.delete(seg.name);
    this.byIdArr[seg.id] = undefined;
    this.bySegmentId.delete(seg.segmentId);
    this.openCache = this.diskCache = null;
  }

  /** Closes a segment to new allocations until `at` (the grace period of an unmount). */
  beginUnmount(seg: Segment, at: number): void {
    seg.status = 'UNMOUNTING';
    seg.unmountAt = at;
    this.openCache = this.diskCache = null;
  }

  /** Takes a segment out of placement until `until` (a writer could not reach it). */
  suspect(seg: Segment, until: number): void {
    if (seg.suspectUntil >= until) return;
    seg.suspectUntil = until;
    this.openCache = this.diskCache = null;
  }

  /** Ends suspicions that ran out by `now`; whether any did. */
  clearSuspects(now: number): boolean {
    let changed = false;
    for (const seg of this.byNameMap.values()) {
      if (seg.suspectUntil !== 0 && seg.suspectUntil <= now) {
        seg.suspectUntil = 0;
        changed = true;
      }
    }
    if (changed) this.openCache = this.diskCache = null;
    return changed;
  }

  /** While true, suspect segments are placed on too (nothing else had room). */
  set includeSuspects(v: boolean) {
    if (this.withSuspects !== v) this.openCache = this.diskCache = null;
    this.withSuspects = v;
  }

  get suspects(): number {
    let n = 0;
    for (const seg of this.byNameMap.values()) if (seg.suspectUntil !== 0) n++;
    return n;
  }

  byName(name: string): Segment | undefined {
    return this.byNameMap.get(name);
  }

  byId(id: number): Segment | undefined {
    return id > 0 && id < this.byIdArr.length ? this.byIdArr[id] : undefined;
  }

  hasSegmentId(segmentId: string): boolean {
    return this.bySegmentId.has(segmentId);
  }

  all(): IterableIterator<Segment> {
    return this.byNameMap.values();
  }

  /** Memory segments open for placement (offload segments never are: disk-tier.ts places there). */
  allocatable(): readonly Segment[] {
    if (this.openCache === null) this.openCache = [...this.byNameMap.values()].filter((s) => !s.disk && s.status === 'MOUNTED' && (this.withSuspects || s.suspectUntil === 0));
    return this.openCache;
  }

  /** Offload (SSD) segments open for placement, in mount order. */
  diskAllocatable(): readonly Segment[] {
    if (this.diskCache === null) this.diskCache = [...this.byNameMap.values()].filter((s) => s.disk && s.status === 'MOUNTED' && s.suspectUntil === 0);
    return this.diskCache;
  }
}
