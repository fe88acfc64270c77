// Bin-based O(1) offset allocator (TLSF-style) for one segment.
//
// Free blocks live in size bins laid out like a tiny floating-point number: 3 mantissa bits per
// power of two (sizes 0..15 map one-to-one, then 8 bins per octave up to 2^53). A two-level bitmap
// (13 words of 32 bins + one summary word) finds the first non-empty bin >= a request with two
// bit scans. Allocation takes a block from a bin whose lower bound is >= the request (so any block
// there fits), splits off the tail, and returns it; free coalesces with both physical neighbours.
// When no such bin exists, the request's own bin is searched first-fit (bounded) so that an exact
// fit (e.g. the whole segment) is never missed.
//
// Alignment: every allocation is rounded up to a multiple of 8 bytes and starts at an offset that
// is a multiple of 8 from the base address; the region size is rounded down to a multiple of 8.
// Blocks are kept in parallel typed arrays indexed by block id (no object per block), in chunks
// of CHUNK nodes added as needed and never copied. Doubling whole arrays instead made four
// segments (which cross 2^k blocks at the same moment) allocate ~70 MB of external memory in one
// go at 2^20 objects, which V8 answered with an atomic, compacting full GC of 700-950 ms in the
// middle of the put path; a chunk at a time is 128 KiB, spread over the inserts.
import type { AllocHandle, BufferAllocator, MutableAllocHandle } from './buffer-allocator.js';

export const ALIGNMENT = 8;
const MANTISSA_BITS = 3;
const MANTISSA = 1 << MANTISSA_BITS;
const LINEAR = MANTISSA * 2; // sizes below 16 have a bin each
export const NUM_BINS = (52 - MANTISSA_BITS + 1) * MANTISSA + MANTISSA; // 408: sizes < 2^53
const WORDS = Math.ceil(NUM_BINS / 32);
const EXACT_FIT_SCAN = 64;
const CHUNK_BITS = 14;
/** Nodes per chunk of every node array. */
const CHUNK = 1 << CHUNK_BITS;
const CHUNK_MASK = CHUNK - 1;

const NODE_UNUSED = 0;
const NODE_FREE = 1;
const NODE_USED = 2;

function log2floor(s: number): number {
  if (s < 4294967296) return 31 - Math.clz32(s);
  return 63 - Math.clz32(Math.floor(s / 4294967296));
}

function ctz(x: number): number {
  return 31 - Math.clz32(x & -x);
}

/** 2^i for i in 0..63: exact doubles, a table lookup instead of a pow per call. */
const POW2 = Float64Array.from({ length: 64 }, (_, i) => 2 ** i);

/** The bin holding a free block of size s (rounded down). */
export function binFloor(s: number): number {
  if (s < LINEAR) return s;
  const e = log2floor(s);
  const m = Math.floor(s / POW2[e - MANTISSA_BITS]) - MANTISSA;
  return (e - MANTISSA_BITS + 1) * MANTISSA + m;
}

/** Smallest size a block in bin b can have. */
export function binLowerBound(b: number): number {
  if (b < LINEAR) return b;
  const e = (b >> MANTISSA_BITS) + MANTISSA_BITS - 1;
  return (MANTISSA + (b & (MANTISSA - 1))) * POW2[e - MANTISSA_BITS];
}

/** The first bin whose every block is >= s. */
export function binCeil(s: number): number {
  const b = binFloor(s);
  return binLowerBound(b) === s ? b : b + 1;
}

export function alignUp(size: number): number {
  return Math.ceil(size / ALIGNMENT) * ALIGNMENT;
}

function copyInto<T extends Float64Array | Int32Array | Uint8Array>(to: T, from: T): T {
  to.set(from);
  return to;
}

export class OffsetAllocator implements BufferAllocator {
  readonly capacity: number;
  private usedBytes = 0;
  private freeCount = 0;

  // node n's field is X[n >>> CHUNK_BITS][n & CHUNK_MASK]
  private readonly offsets: Float64Array[] = [];
  private readonly sizes: Float64Array[] = [];
  private readonly prevPhys: Int32Array[] = [];
  private readonly nextPhys: Int32Array[] = [];
  private readonly prevFree: Int32Array[] = [];
  private readonly nextFree: Int32Array[] = []; // also chains unused node ids
  private readonly state: Uint8Array[] = [];
  private nodeCapacity = 0;
  private unusedHead = -1;
  private nodeCount = 0;

  private readonly heads = new Int32Array(NUM_BINS).fill(-1);
  private readonly bitmap = new Uint32Array(WORDS);
  private summary = 0;

  constructor(
    readonly segmentName: string,
    readonly baseAddress: number,
    size: number,
  ) {
    if (!Number.isSafeInteger(size) || size < 0) throw new RangeError(`invalid segment size ${size}`);
    if (!Number.isSafeInteger(baseAddress) || baseAddress < 0) throw new RangeError(`invalid base address ${baseAddress}`);
    this.capacity = Math.floor(size / ALIGNMENT) * ALIGNMENT;
    if (this.capacity > 0) {
      const n = this.newNode();
      this.offsets[n >>> CHUNK_BITS][n & CHUNK_MASK] = 0;
      this.sizes[n >>> CHUNK_BITS][n & CHUNK_MASK] = this.capacity;
      this.prevPhys[n >>> CHUNK_BITS][n & CHUNK_MASK] = -1;
      this.nextPhys[n >>> CHUNK_BITS][n & CHUNK_MASK] = -1;
      this.insertFree(n);
    }
  }

  /**
   * An allocator of the region (name, base, size) holding exactly the `used` ranges and nothing
   * else: [offset, reserved size] pairs, sorted by offset, not overlapping, each offset a multiple
   * of ALIGNMENT and each size a positive multiple of it (what allocate reserves: alignUp(size)),
   * all within the region. Built in one pass (used blocks and the free gaps between them, linked
   * in address order), so a restored segment's allocator holds what the previous master had
   * handed out, no more and no less. Returns the allocator and each range's block id, in the
   * order given. Throws RangeError on ranges that break these rules (nothing is guessed).
   */
  static fromUsed(segmentName: string, baseAddress: number, size: number, used: readonly number[]): { allocator: OffsetAllocator; blocks: number[] } {
    const a = new OffsetAllocator(segmentName, baseAddress, size);
    if (a.capacity > 0) {
      // the constructor's one free block of the whole region goes; the blocks are laid out below
      a.removeFree(0);
      a.releaseNode(0);
    }
    if (used.length % 2 !== 0) throw new RangeError('used ranges come in [offset, size] pairs');
    const blocks: number[] = [];
    let at = 0;
    let prev = -1;
    const link = (n: number, offset: number, len: number): void => {
      a.offsets[n >>> CHUNK_BITS][n & CHUNK_MASK] = offset;
      a.sizes[n >>> CHUNK_BITS][n & CHUNK_MASK] = len;
      a.prevPhys[n >>> CHUNK_BITS][n & CHUNK_MASK] = prev;
      a.nextPhys[n >>> CHUNK_BITS][n & CHUNK_MASK] = -1;
      if (prev >= 0) a.nextPhys[prev >>> CHUNK_BITS][prev & CHUNK_MASK] = n;
      prev = n;
    };
    for (let i = 0; i < used.length; i += 2) {
      const offset = used[i];
      const len = used[i + 1];
      if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(len) || len <= 0 || offset % ALIGNMENT !== 0 || len % ALIGNMENT !== 0) {
        throw new RangeError(`segment ${segmentName}: used range [${offset}, +${len}) is not aligned to ${ALIGNMENT}`);
      }
      if (offset < at) throw new RangeError(`segment ${segmentName}: used range at ${offset} overlaps the one before or is out of order`);
      if (offset + len > a.capacity) throw new RangeError(`segment ${segmentName}: used range [${offset}, +${len}) runs past the capacity ${a.capacity}`);
      if (offset > at) {
        const f = a.newNode();
        link(f, at, offset - at);
        a.insertFree(f);
      }
      const n = a.newNode();
      link(n, offset, len);
      a.state[n >>> CHUNK_BITS][n & CHUNK_MASK] = NODE_USED;
      a.usedBytes += len;
      blocks.push(n);
      at = offset + len;
    }
    if (at < a.capacity) {
      const f = a.newNode();
      link(f, at, a.capacity - at);
      a.insertFree(f);
    }
    return { allocator: a, blocks };
  }

  get used(): number {
    return this.usedBytes;
  }

  /** Number of free blocks (1 when everything is free: all neighbours coalesced). */
  get freeBlockCount(): number {
    return this.freeCount;
  }

  get largestFree(): number {
    for (let w = WORDS - 1; w >= 0; w--) {
      const bits = this.bitmap[w];
      if (bits === 0) continue;
      const bin = w * 32 + 31 - Math.clz32(bits);
      let best = 0;
      for (let n = this.heads[bin]; n >= 0; n = this.nextFree[n >>> CHUNK_BITS][n & CHUNK_MASK]!) best = Math.max(best, this.sizes[n >>> CHUNK_BITS][n & CHUNK_MASK]);
      return best;
    }
    return 0;
  }

  allocate(size: number, into?: MutableAllocHandle): AllocHandle | null {
    if (!Number.isSafeInteger(size) || size <= 0) return null;
    const s = alignUp(size);
    if (s > this.capacity - this.usedBytes) return null;
    let n = -1;
    const bin = this.findFreeBin(binCeil(s));
    if (bin >= 0) {
      n = this.heads[bin]!;
    } else {
      let k = 0;
      for (let m = this.heads[binFloor(s)]; m >= 0 && k < EXACT_FIT_SCAN; m = this.nextFree[m >>> CHUNK_BITS][m & CHUNK_MASK]!, k++) {
        if (this.sizes[m >>> CHUNK_BITS][m & CHUNK_MASK] >= s) {
          n = m;
          break;
        }
      }
      if (n < 0) return null;
    }
    const whole = this.sizes[n >>> CHUNK_BITS][n & CHUNK_MASK];
    const rest = whole - s;
    if (rest > 0 && binFloor(rest) === binFloor(whole)) {
      // The usual case with a big free block: what is left stays in the same bin, so the free
      // block keeps its list place and only moves its start; the allocation is a new node in
      // front of it (same offset as splitting the other way, without two list updates).
      const m = this.newNode();
      const offset = this.offsets[n >>> CHUNK_BITS][n & CHUNK_MASK];
      const prev = this.prevPhys[n >>> CHUNK_BITS][n & CHUNK_MASK];
      this.offsets[m >>> CHUNK_BITS][m & CHUNK_MASK] = offset;
      this.sizes[m >>> CHUNK_BITS][m & CHUNK_MASK] = s;
      this.prevPhys[m >>> CHUNK_BITS][m & CHUNK_MASK] = prev;
      this.nextPhys[m >>> CHUNK_BITS][m & CHUNK_MASK] = n;
      if (prev >= 0) this.nextPhys[prev >>> CHUNK_BITS][prev & CHUNK_MASK] = m;
      this.prevPhys[n >>> CHUNK_BITS][n & CHUNK_MASK] = m;
      this.offsets[n >>> CHUNK_BITS][n & CHUNK_MASK] = offset + s;
      this.sizes[n >>> CHUNK_BITS][n & CHUNK_MASK] = rest;
      this.state[m >>> CHUNK_BITS][m & CHUNK_MASK] = NODE_USED;
      this.usedBytes += s;
      return this.handleOf(m, offset, size, into);
    }
    this.removeFree(n);
    if (rest > 0) {
      const r = this.newNode();
      this.offsets[r >>> CHUNK_BITS][r & CHUNK_MASK] = this.offsets[n >>> CHUNK_BITS][n & CHUNK_MASK] + s;
      this.sizes[r >>> CHUNK_BITS][r & CHUNK_MASK] = rest;
      const next = this.nextPhys[n >>> CHUNK_BITS][n & CHUNK_MASK];
      this.nextPhys[r >>> CHUNK_BITS][r & CHUNK_MASK] = next;
      this.prevPhys[r >>> CHUNK_BITS][r & CHUNK_MASK] = n;
      if (next >= 0) this.prevPhys[next >>> CHUNK_BITS][next & CHUNK_MASK] = r;
      this.nextPhys[n >>> CHUNK_BITS][n & CHUNK_MASK] = r;
      this.sizes[n >>> CHUNK_BITS][n & CHUNK_MASK] = s;
      this.insertFree(r);
    }
    this.state[n >>> CHUNK_BITS][n & CHUNK_MASK] = NODE_USED;
    this.usedBytes += s;
    return this.handleOf(n, this.offsets[n >>> CHUNK_BITS][n & CHUNK_MASK], size, into);
  }

  private handleOf(block: number, offset: number, size: number, into: MutableAllocHandle | undefined): AllocHandle {
    if (into === undefined) return { block, offset, address: this.baseAddress + offset, size };
    into.block = block;
    into.offset = offset;
    into.address = this.baseAddress + offset;
    into.size = size;
    return into;
  }

  free(handle: AllocHandle): void {
    const n = handle.block;
    if (!this.isLive(n) || this.offsets[n >>> CHUNK_BITS][n & CHUNK_MASK] !== handle.offset) {
      throw new Error(`segment ${this.segmentName}: free of a handle that is not live (offset ${handle.offset})`);
    }
    this.freeBlock(n);
  }

  freeBlock(block: number): void {
    if (!this.isLive(block)) throw new Error(`segment ${this.segmentName}: free of block ${block} that is not live`);
    let n = block;
    this.usedBytes -= this.sizes[n >>> CHUNK_BITS][n & CHUNK_MASK];
    this.state[n >>> CHUNK_BITS][n & CHUNK_MASK] = NODE_FREE;
    const p = this.prevPhys[n >>> CHUNK_BITS][n & CHUNK_MASK];
    if (p >= 0 && this.state[p >>> CHUNK_BITS][p & CHUNK_MASK] === NODE_FREE) {
      this.removeFree(p);
      this.sizes[p >>> CHUNK_BITS][p & CHUNK_MASK] = this.sizes[p >>> CHUNK_BITS][p & CHUNK_MASK] + this.sizes[n >>> CHUNK_BITS][n & CHUNK_MASK];
      this.unlinkPhys(n, p);
      this.releaseNode(n);
      n = p;
    }
    const q = this.nextPhys[n >>> CHUNK_BITS][n & CHUNK_MASK];
    if (q >= 0 && this.state[q >>> CHUNK_BITS][q & CHUNK_MASK] === NODE_FREE) {
      this.removeFree(q);
      this.sizes[n >>> CHUNK_BITS][n & CHUNK_MASK] = this.sizes[n >>> CHUNK_BITS][n & CHUNK_MASK] + this.sizes[q >>> CHUNK_BITS][q & CHUNK_MASK];
      this.unlinkPhys(q, n);
      this.releaseNode(q);
    }
    this.insertFree(n);
  }

  addressOf(block: number): number {
    if (!this.isLive(block)) throw new Error(`segment ${this.segmentName}: block ${block} is not live`);
    return this.baseAddress + this.offsets[block >>> CHUNK_BITS][block & CHUNK_MASK];
  }

  /** Reserved size (after alignment) of a live block. */
  reservedSize(block: number): number {
    if (!this.isLive(block)) throw new Error(`segment ${this.segmentName}: block ${block} is not live`);
    return this.sizes[block >>> CHUNK_BITS][block & CHUNK_MASK];
  }

  private isLive(n: number): boolean {
    return Number.isInteger(n) && n >= 0 && n < this.nodeCount && this.state[n >>> CHUNK_BITS][n & CHUNK_MASK] === NODE_USED;
  }

  /** Removes physical node `gone` whose space was merged into its previous neighbour `into`. */
  private unlinkPhys(gone: number, into: number): void {
    const next = this.nextPhys[gone >>> CHUNK_BITS][gone & CHUNK_MASK];
    this.nextPhys[into >>> CHUNK_BITS][into & CHUNK_MASK] = next;
    if (next >= 0) this.prevPhys[next >>> CHUNK_BITS][next & CHUNK_MASK] = into;
  }

  private findFreeBin(from: number): number {
    if (from >= NUM_BINS) return -1;
    const w = from >>> 5;
    const bits = (this.bitmap[w] & ((0xffffffff << (from & 31)) >>> 0)) >>> 0;
    if (bits !== 0) return w * 32 + ctz(bits);
    const higher = (this.summary & ((0xffffffff << (w + 1)) >>> 0)) >>> 0;
    if (w + 1 >= 32 || higher === 0) return -1;
    const w2 = ctz(higher);
    return w2 * 32 + ctz(this.bitmap[w2]);
  }

  private insertFree(n: number): void {
    const b = binFloor(this.sizes[n >>> CHUNK_BITS][n & CHUNK_MASK]);
    const head = this.heads[b];
    this.prevFree[n >>> CHUNK_BITS][n & CHUNK_MASK] = -1;
    this.nextFree[n >>> CHUNK_BITS][n & CHUNK_MASK] = head;
    if (head >= 0) this.prevFree[head >>> CHUNK_BITS][head & CHUNK_MASK] = n;
    this.heads[b] = n;
    this.state[n >>> CHUNK_BITS][n & CHUNK_MASK] = NODE_FREE;
    this.bitmap[b >>> 5] = (this.bitmap[b >>> 5] | (1 << (b & 31))) >>> 0;
    this.summary = (this.summary | (1 << (b >>> 5))) >>> 0;
    this.freeCount++;
  }

  private removeFree(n: number): void {
    const b = binFloor(this.sizes[n >>> CHUNK_BITS][n & CHUNK_MASK]);
    const prev = this.prevFree[n >>> CHUNK_BITS][n & CHUNK_MASK];
    const next = this.nextFree[n >>> CHUNK_BITS][n & CHUNK_MASK];
    if (prev >= 0) this.nextFree[prev >>> CHUNK_BITS][prev & CHUNK_MASK] = next;
    else this.heads[b] = next;
    if (next >= 0) this.prevFree[next >>> CHUNK_BITS][next & CHUNK_MASK] = prev;
    if (this.heads[b] < 0) {
      const w = b >>> 5;
      this.bitmap[w] = (this.bitmap[w] & ~(1 << (b & 31))) >>> 0;
      if (this.bitmap[w] === 0) this.summary = (this.summary & ~(1 << w)) >>> 0;
    }
    this.freeCount--;
  }

  private newNode(): number {
    if (this.unusedHead >= 0) {
      const n = this.unusedHead;
      this.unusedHead = this.nextFree[n >>> CHUNK_BITS][n & CHUNK_MASK]!;
      return n;
    }
    if (this.nodeCount === this.nodeCapacity) this.grow();
    return this.nodeCount++;
  }

  private releaseNode(n: number): void {
    this.state[n >>> CHUNK_BITS][n & CHUNK_MASK] = NODE_UNUSED;
    this.nextFree[n >>> CHUNK_BITS][n & CHUNK_MASK] = this.unusedHead;
    this.unusedHead = n;
  }

  /** One more chunk of node slots (a small segment's first chunk is small: 16 nodes, then CHUNK). */
  private grow(): void {
    const first = this.nodeCapacity === 0 ? 16 : 0;
    if (this.nodeCapacity === 16) {
      // the small first chunk becomes a full one
      this.offsets[0] = copyInto(new Float64Array(CHUNK), this.offsets[0]);
      this.sizes[0] = copyInto(new Float64Array(CHUNK), this.sizes[0]);
      this.prevPhys[0] = copyInto(new Int32Array(CHUNK), this.prevPhys[0]);
      this.nextPhys[0] = copyInto(new Int32Array(CHUNK), this.nextPhys[0]);
      this.prevFree[0] = copyInto(new Int32Array(CHUNK), this.prevFree[0]);
      this.nextFree[0] = copyInto(new Int32Array(CHUNK), this.nextFree[0]);
      this.state[0] = copyInto(new Uint8Array(CHUNK), this.state[0]);
      this.nodeCapacity = CHUNK;
      return;
    }
    const n = first || CHUNK;
    this.offsets.push(new Float64Array(n));
    this.sizes.push(new Float64Array(n));
    this.prevPhys.push(new Int32Array(n));
    this.nextPhys.push(new Int32Array(n));
    this.prevFree.push(new Int32Array(n));
    this.nextFree.push(new Int32Array(n));
    this.state.push(new Uint8Array(n));
    this.nodeCapacity += n;
  }
}
