// The space allocator interface (the spec's BufferAllocatorBase): the master has one per mounted
// segment, constructed from (segmentName, baseAddress, size); clients carve their staging
// memory and result arenas with the same allocator.

/** One live allocation. `block` is the allocator's own id for it; keep it to free the space. */
export interface AllocHandle {
  readonly block: number;
  /** Offset from the segment's base address. */
  readonly offset: number;
  /** baseAddress + offset: the address clients read and write. */
  readonly address: number;
  /** The size that was asked for (the allocator may reserve a little more, see `reservedSize`). */
  readonly size: number;
}

/** A handle an allocator may fill in (see BufferAllocator.allocate). */
export interface MutableAllocHandle {
  block: number;
  offset: number;
  address: number;
  size: number;
}

export interface BufferAllocator {
  readonly segmentName: string;
  readonly baseAddress: number;
  /** Usable bytes (the region size rounded down to the allocator's alignment). */
  readonly capacity: number;
  /** Bytes reserved by live allocations (after rounding). */
  readonly used: number;
  /** The largest single allocation that would succeed right now. */
  readonly largestFree: number;
  /**
   * Reserve `size` bytes; null when no free block fits (or size is not a positive integer).
   * With `into`, the handle is written there and `into` returned (no object per allocation, for
   * callers that only copy the fields out); without, a new handle.
   */
  allocate(size: number, into?: MutableAllocHandle): AllocHandle | null;
  /** Return an allocation's space. Throws on a handle that is not live (a bug in the caller). */
  free(handle: AllocHandle): void;
  /** Same as free, by block id (lets callers store a number instead of a handle object). */
  freeBlock(block: number): void;
  /** Address of a live block. */
  addressOf(block: number): number;
}
