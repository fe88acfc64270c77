// Small Get results carved out of a shared slab, the way Node's own Buffer pool serves values under
// 4 KiB: one ArrayBuffer per slab instead of one per result (a fresh ArrayBuffer per 4 KiB Get
// measured ~1 us of allocation and GC tracking on a ~50 us operation). Results never overlap; a
// result kept alive pins its slab, so slabs are small and only small results come from them.
// Slabs come from the result arena when there is one: its ranges do not count toward V8's external
// memory, and 64 KiB of fresh counted memory every 16 Gets measured 11 full mark-compacts per 23K
// 4 KiB Gets (vs 2 with arena slabs; ~10 us of client CPU per Get). Slabs from the arena are
// registered memory, so the engine can read into those results directly.

/** Slab size; a retained result pins at most this much. */
export const RESULT_SLAB_BYTES = 64 * 1024;
/** Largest result served from a slab (larger ones get their own buffer). */
export const RESULT_SLAB_MAX_ITEM = 8 * 1024;

/** Where slabs come from before Node's allocator (the result arena); undefined when it is full. */
export interface SlabSource {
  take(length: number): Buffer | undefined;
  /** Address of a Buffer take() returned (registered with the engine). */
  addressOf(view: Buffer): number;
}

/** A result and, when it lies in registered memory, its address. */
export interface SlabResult {
  out: Buffer;
  address: number | undefined;
}

export class ResultSlab {
  private slab: Buffer | undefined;
  /** Address of `slab` when it came from the source, else undefined. */
  private slabAddress: number | undefined;
  private used = 0;

  constructor(
    private readonly slabBytes = RESULT_SLAB_BYTES,
    private readonly maxItem = RESULT_SLAB_MAX_ITEM,
    private readonly source?: SlabSource,
  ) {}

  /** A Buffer of `size` bytes (contents unspecified) that no other result shares. */
  alloc(size: number): Buffer {
    return this.take(size).out;
  }

  /** Like alloc(), with the result's address when it lies in registered memory (a slab from the source). */
  take(size: number): SlabResult {
    if (size > this.maxItem || size > this.slabBytes) return { out: Buffer.allocUnsafe(size), address: undefined };
    if (!this.slab || this.used + size > this.slab.length) this.refill();
    const at = this.used;
    const out = this.slab!.subarray(at, at + size);
    this.used += (size + 7) & ~7; // 8-byte aligned starts, as typed-array views of results expect
    return { out, address: this.slabAddress === undefined ? undefined : this.slabAddress + at };
  }

  private refill(): void {
    const fromSource = this.source?.take(this.slabBytes);
    if (fromSource && fromSource.length >= this.slabBytes) {
      this.slab = fromSource;
      this.slabAddress = this.source!.addressOf(fromSource);
    } else {
      this.slab = Buffer.allocUnsafeSlow(this.slabBytes);
      this.slabAddress = undefined;
    }
    this.used = 0;
  }
}
