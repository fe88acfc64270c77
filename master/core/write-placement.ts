// Where a new write's space comes from, for PutStart and UpsertStart alike: the preferred
// segments, placement (with an eviction round making room when nothing fits), the new object
// created on the placement, when an unfinished write may be taken over, and the segments a
// writer reported unreachable, which get no new placement for a while.
//
// Within a batch of PutStarts (write-path.ts), once eviction found nothing left to evict for a
// request that still finds no room, the batch's later requests of the same shape that find no
// room are refused without an eviction round: nothing can have been freed meanwhile, so another
// round (what one PutStart after another does) finds nothing either. A batch refused while memory
// is full of objects awaiting their offload copies paid a round per request.
import { ErrorCode } from '../../common/error-code.js';
import type { CoreShared } from './core-shared.js';
import { ObjectMeta } from './object-meta.js';

const NO_PREFERENCE: readonly string[] = Object.freeze([]);
/** The handles of a record about to be given its placement (ReplicaPlacer.into). */
const NO_HANDLES: number[] = Object.freeze([]) as unknown as number[];

/** Segment names a report may name as unreachable (the rest of a longer list is ignored). */
const SUSPECTS_PER_REPORT = 64;

export class WritePlacement {
  /** The preferred list of a write naming one segment (reused: strategies only read it during the call). */
  private readonly onePreferred: string[] = [''];
  /** The cxl strategy's default preference: the allocatable segments of protocol cxl, for `cxlOf`. */
  private cxlSegments: readonly string[] = NO_PREFERENCE;
  private cxlOf: readonly unknown[] | null = null;
  /** In a batch: the placement eviction could free nothing for, and the removals count then. */
  private noRoom: { lengths: readonly number[]; replicas: number; preferred: string; removals: number } | undefined;
  private inBatch = false;

  constructor(private readonly s: CoreShared) {}

  /** A batch of writes begins (end it with `endBatch`, in a finally). */
  beginBatch(): void {
    this.inBatch = true;
    this.noRoom = undefined;
  }

  endBatch(): void {
    this.inBatch = false;
    this.noRoom = undefined;
  }

  /** An unfinished write may be taken over once the discard timeout has passed. */
  preemptible(meta: ObjectMeta, now: number): boolean {
    return now - meta.lastAccess > this.s.config.putStartDiscardTimeoutMs;
  }

  /**
   * Places an object: ErrorCode.OK with its handles in the placer (h, cxl), or the failure.
   * When nothing fits, the eviction round makes room for it (bounded, see eviction-round.ts) and
   * placement is retried; but not for an object that would not fit even in empty segments, for
   * which evicting would only lose objects. The heap near its limit: no placement at all.
   */
  place(sliceLengths: readonly number[], replicaNum: number, preferredSegment: string, now: number): number {
    const s = this.s;
    if (s.heap.full) return ErrorCode.NO_AVAILABLE_HANDLE;
    const preferred = this.preferredFor(preferredSegment);
    const placer = s.placer;
    let code = placer.place(sliceLengths, replicaNum, preferred);
    if (code === ErrorCode.NO_AVAILABLE_HANDLE && s.segments.suspects > 0) {
      // Only suspect segments had room: better than no placement (the writer may reach them).
      s.segments.includeSuspects = placer.allowSuspect = true;
      try {
        code = placer.place(sliceLengths, replicaNum, preferred);
      } finally {
        s.segments.includeSuspects = placer.allowSuspect = false;
      }
    }
    if (code !== ErrorCode.NO_AVAILABLE_HANDLE) return code;
    // (The placements above ran all the same: they draw from the rng as one PutStart after another would.)
    if (this.noRoom !== undefined && this.refusedAlready(sliceLengths, replicaNum, preferredSegment)) return code;
    let bytes = 0;
    for (let j = 0; j < sliceLengths.length; j++) bytes += sliceLengths[j];
    if (!this.fitsWhenEmpty(sliceLengths, bytes)) return code;
    this.noRoom = undefined; // an eviction may free room for any shape
    const exhausted = s.eviction.makeRoom(now, bytes * replicaNum, () => {
      code = placer.place(sliceLengths, replicaNum, preferred);
      return code === ErrorCode.OK;
    });
    if (code === ErrorCode.NO_AVAILABLE_HANDLE && exhausted && this.inBatch) {
      this.noRoom = { lengths: sliceLengths, replicas: replicaNum, preferred: preferredSegment, removals: s.removals };
    }
    return code;
  }

  /** Whether the batch already found no room, with nothing left to evict, for a placement like this one. */
  private refusedAlready(sliceLengths: readonly number[], replicaNum: number, preferredSegment: string): boolean {
    const n = this.noRoom!;
    if (n.removals !== this.s.removals || n.replicas !== replicaNum || n.preferred !== preferredSegment || n.lengths.length !== sliceLengths.length) return false;
    for (let i = 0; i < sliceLengths.length; i++) if (sliceLengths[i] !== n.lengths[i]) return false;
    return true;
  }

  /**
   * Creates the object of a write just placed (its placement is the placer's). A spare
   * ObjectMeta is reused when there is one.
   */
  insertWrite(key: string, slices: number, flags: number, now: number): ObjectMeta {
    const s = this.s;
    let meta = s.spareMetas.pop();
    if (meta === undefined) {
      meta = ObjectMeta.create(NO_HANDLES, slices, flags, 0, now, key);
      s.placer.into(meta);
    } else {
      s.placer.into(meta);
      meta.slices = slices;
      meta.flags = flags;
      meta.leaseUntil = 0;
      meta.lastAccess = now;
      meta.key = key;
      meta.prev = null;
      meta.next = null;
      meta.checksums = null;
      meta.version = 0;
    }
    s.countPins(flags, 1);
    s.objects.set(key, meta);
    s.inFlight.add(meta);
    return meta;
  }

  /**
   * Segments a writer (or a copier) could not reach get no new placement for suspectSegmentMs (or
   * until their owner mounts again), so the writer's retry and other puts go elsewhere instead of
   * failing until client_ttl drops the segment. Placement still uses them when nothing else has room.
   */
  suspect(names: readonly string[] | undefined, now: number): void {
    const s = this.s;
    if (names === undefined || names.length === 0 || s.config.suspectSegmentMs === 0) return;
    for (const name of names.slice(0, SUSPECTS_PER_REPORT)) {
      const seg = typeof name === 'string' ? s.segments.byName(name) : undefined;
      if (seg !== undefined) s.segments.suspect(seg, now + s.config.suspectSegmentMs);
    }
  }

  private preferredFor(preferredSegment: string): readonly string[] {
    if (preferredSegment) {
      this.onePreferred[0] = preferredSegment;
      return this.onePreferred;
    }
    if (this.s.config.allocationStrategy === 'cxl') {
      // Without an explicit preference, the cxl strategy uses the segments mounted with protocol cxl.
      const open = this.s.segments.allocatable(); // a new array whenever the open segments change
      if (this.cxlOf !== open) {
        this.cxlSegments = open.filter((seg) => seg.protocol === 'cxl').map((seg) => seg.name);
        this.cxlOf = open;
      }
      return this.cxlSegments;
    }
    return NO_PREFERENCE;
  }

  /**
   * Whether one replica of the slices could be placed if the allocatable segments were empty:
   * every slice within the largest segment, and all of them within the segments together.
   */
  private fitsWhenEmpty(sliceLengths: readonly number[], bytes: number): boolean {
    let largest = 0;
    let total = 0;
    for (const seg of this.s.segments.allocatable()) {
      largest = Math.max(largest, seg.allocator.capacity);
      total += seg.allocator.capacity;
    }
    if (bytes > total) return false;
    for (let j = 0; j < sliceLengths.length; j++) if (sliceLengths[j] > largest) return false;
    return true;
  }
}
