// Placing a whole object: one strategy call per slice (each slice's replicas on different
// segments), then the replica count is the smallest number any slice got; surplus buffers are
// returned. One placer serves every put of a core and keeps the placement in scratch arrays, so
// placing allocates nothing; `into` writes it into the object's handles (object-meta.ts) only when
// the caller keeps the placement.
import { ErrorCode } from '../../common/error-code.js';
import { MemoryType } from '../../proto/gen/store/MemoryType.js';
import type { AllocationStrategy } from './allocation-strategy.js';
import { SliceAllocation } from './allocation-strategy.js';
import { HANDLE_FIELDS, type ObjectMeta } from './object-meta.js';
import type { Rng } from './rng.js';
import type { SegmentRegistry } from './segment-registry.js';

export class ReplicaPlacer {
  /** Whether a buffer of the last placement sits in CXL memory. */
  cxl = false;
  /** Whether segments reported unreachable may be placed on (segment-registry.ts `suspect`). */
  allowSuspect = false;
  /** Replicas and slices of the last placement. */
  private replicas = 0;
  private slices = 0;
  private readonly work = new SliceAllocation();
  /** Buffers of the slices placed so far: slice j, replica r at j * stride + r. */
  private stride = 0;
  private readonly segIds: number[] = [];
  private readonly blocks: number[] = [];
  private readonly counts: number[] = [];
  private readonly lengths: number[] = [];

  constructor(
    private readonly strategy: AllocationStrategy,
    private readonly segments: SegmentRegistry,
    private readonly rng: Rng,
  ) {}

  /**
   * Places `replicaNum` replicas of slices of `sliceLengths` (best effort: fewer replicas when
   * segments run short). ErrorCode.OK, the placement then being this placer's until the next
   * call (see `handles` and `free`), or the code of the failure (nothing left allocated).
   * `sliceLengths` and `preferred` are only read during the call.
   */
  place(sliceLengths: readonly number[], replicaNum: number, preferred: readonly string[], excluded?: readonly ReadonlySet<number>[]): number {
    const slices = sliceLengths.length;
    const p = this.work;
    let count = replicaNum;
    let cxl = false;
    this.stride = replicaNum;
    for (let j = 0; j < slices; j++) {
      const length = sliceLengths[j];
      p.reset(length, replicaNum, preferred, excluded?.[j]);
      p.allowSuspect = this.allowSuspect;
      const code = this.strategy.place(this.segments, p, this.rng);
      if (code !== ErrorCode.OK) {
        p.forget();
        this.release(j, 0);
        return code;
      }
      const c = p.count;
      const at = j * replicaNum;
      for (let r = 0; r < c; r++) {
        this.segIds[at + r] = p.segs[r]!.id;
        this.blocks[at + r] = p.blocks[r]!;
      }
      this.counts[j] = c;
      this.lengths[j] = length;
      if (c < count) count = c;
      if (p.memoryType === MemoryType.CXL) cxl = true;
      p.forget();
    }
    if (count === 0) {
      this.release(slices, 0);
      return ErrorCode.NO_AVAILABLE_HANDLE;
    }
    this.release(slices, count); // the surplus of slices that got more replicas
    for (let j = 0; j < slices; j++) this.counts[j] = count;
    this.replicas = count;
    this.slices = slices;
    this.cxl = cxl;
    return ErrorCode.OK;
  }

  /** Gives `meta` the last placement as its handles (one handle is held inline, no array). */
  into(meta: ObjectMeta): void {
    if (this.replicas * this.slices === 1) meta.setHandle(this.segIds[0], this.blocks[0], this.lengths[0]);
    else meta.h = this.handles();
  }

  /** The last placement as a handle array, replica-major. */
  handles(): number[] {
    const replicas = this.replicas;
    const slices = this.slices;
    // Sized up front: a pushed-to array would carry spare capacity in every object's metadata.
    const h = new Array<number>(replicas * slices * HANDLE_FIELDS);
    let i = 0;
    for (let r = 0; r < replicas; r++) {
      for (let j = 0; j < slices; j++) {
        h[i++] = this.segIds[j * this.stride + r]!;
        h[i++] = this.blocks[j * this.stride + r]!;
        h[i++] = this.lengths[j]!;
      }
    }
    return h;
  }

  /** Returns the last placement's space (its object was not created after all). */
  free(): void {
    this.release(this.slices, 0);
  }

  /** Frees the buffers of the first `slices` slices from replica index `from` on, slice by slice. */
  private release(slices: number, from: number): void {
    for (let j = 0; j < slices; j++) {
      const at = j * this.stride;
      for (let r = from; r < this.counts[j]; r++) this.segments.byId(this.segIds[at + r])?.allocator.freeBlock(this.blocks[at + r]);
    }
  }
}
