// Small Get results carved out of a shared slab, the way Node's own Buffer pool serves values under
// 4 KiB: one ArrayBuffer per slab instead of one per result (a fresh ArrayBuffer per 4 KiB Get
// measured ~1 us of allocation and GC tracking on a ~50 us operation). Results never overlap; a
// result kept alive pins its slab, so slabs are small and only small results come from them.

/** Slab size; a retained result pins at most this much. */
export const RESULT_SLAB_BYTES = 64 * 1024;
/** Largest result served from a slab (larger ones get their own buffer). */
export const RESULT_SLAB_MAX_ITEM = 8 * 1024;

export class ResultSlab {
  private slab: Buffer | undefined;
  private used = 0;

  constructor(
    private readonly slabBytes = RESULT_SLAB_BYTES,
    private readonly maxItem = RESULT_SLAB_MAX_ITEM,
  ) {}

  /** A Buffer of `size` bytes (contents unspecified) that no other result shares. */
  alloc(size: number): Buffer {
    if (size > this.maxItem || size > this.slabBytes) return Buffer.allocUnsafe(size);
    if (!this.slab || this.used + size > this.slab.length) {
      this.slab = Buffer.allocUnsafeSlow(this.slabBytes);
      this.used = 0;
    }
    const out = this.slab.subarray(this.used, this.used + size);
    this.used += (size + 7) & ~7; // 8-byte aligned starts, as typed-array views of results expect
    return out;
  }
}
