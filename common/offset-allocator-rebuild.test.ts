// OffsetAllocator.fromUsed: an allocator rebuilt from the ranges another one handed out holds
// exactly those ranges (a restored segment, docs/ha.md): the same used bytes, every range live
// at its offset, the gaps free and allocatable, nothing allocatable twice, and bad ranges refused.
import fc from 'fast-check';
import { alignUp, OffsetAllocator } from './offset-allocator.js';
import type { AllocHandle } from './buffer-allocator.js';

const BASE = 1 << 20;

/** An allocator after a random sequence of allocations and frees, with its live handles. */
function randomlyUsed(size: number, ops: { alloc: boolean; n: number }[]): { alloc: OffsetAllocator; live: AllocHandle[] } {
  const alloc = new OffsetAllocator('seg', BASE, size);
  const live: AllocHandle[] = [];
  for (const op of ops) {
    if (op.alloc) {
      const h = alloc.allocate(op.n);
      if (h) live.push(h);
    } else if (live.length > 0) {
      const [h] = live.splice(op.n % live.length, 1);
      alloc.free(h);
    }
  }
  return { alloc, live };
}

function usedRanges(live: readonly AllocHandle[]): number[] {
  const sorted = [...live].sort((a, b) => a.offset - b.offset);
  return sorted.flatMap((h) => [h.offset, alignUp(h.size)]);
}

const opsArb = fc.array(fc.record({ alloc: fc.boolean(), n: fc.integer({ min: 1, max: 3000 }) }), { maxLength: 200 });

describe('OffsetAllocator.fromUsed', () => {
  it('holds exactly the ranges of the allocator it was rebuilt from', () => {
    fc.assert(
      fc.property(opsArb, (ops) => {
        const size = 16 * 1024 + 5;
        const { alloc, live } = randomlyUsed(size, ops);
        const sorted = [...live].sort((a, b) => a.offset - b.offset);
        const { allocator: copy, blocks } = OffsetAllocator.fromUsed('seg', BASE, size, usedRanges(live));
        expect(copy.capacity).toBe(alloc.capacity);
        expect(copy.used).toBe(alloc.used);
        expect(blocks).toHaveLength(sorted.length);
        sorted.forEach((h, i) => {
          expect(copy.addressOf(blocks[i])).toBe(h.address);
          expect(copy.reservedSize(blocks[i])).toBe(alignUp(h.size));
        });
        // Whatever is free is allocatable, and never inside a used range (one mark per 8 bytes).
        const taken = new Uint8Array(copy.capacity / 8);
        for (const h of sorted) taken.fill(1, h.offset / 8, (h.offset + alignUp(h.size)) / 8);
        let got: AllocHandle | null;
        let clashes = 0;
        while ((got = copy.allocate(8)) !== null) clashes += taken[got.offset / 8];
        expect(clashes).toBe(0);
        expect(copy.used).toBe(copy.capacity);
      }),
      { numRuns: 100 },
    );
  });

  it('frees back to one block: the gaps coalesce with freed ranges', () => {
    fc.assert(
      fc.property(opsArb, (ops) => {
        const size = 32 * 1024;
        const { live } = randomlyUsed(size, ops);
        const { allocator, blocks } = OffsetAllocator.fromUsed('seg', BASE, size, usedRanges(live));
        for (const b of blocks) allocator.freeBlock(b);
        expect(allocator.used).toBe(0);
        expect(allocator.freeBlockCount).toBe(size > 0 ? 1 : 0);
        expect(allocator.largestFree).toBe(size);
      }),
      { numRuns: 200 },
    );
  });

  it('rebuilds a full region, an empty one and a region of 100,000 ranges (more than one node chunk)', () => {
    const full = OffsetAllocator.fromUsed('seg', BASE, 4096, [0, 4096]);
    expect(full.allocator.used).toBe(4096);
    expect(full.allocator.allocate(8)).toBeNull();
    const empty = OffsetAllocator.fromUsed('seg', BASE, 4096, []);
    expect(empty.allocator.used).toBe(0);
    expect(empty.allocator.allocate(4096)?.offset).toBe(0);
    const ranges: number[] = [];
    for (let i = 0; i < 100_000; i++) ranges.push(i * 32, 16); // 16 used, 16 free
    const many = OffsetAllocator.fromUsed('seg', BASE, 100_000 * 32, ranges);
    expect(many.allocator.used).toBe(1_600_000);
    expect(many.allocator.freeBlockCount).toBe(100_000);
    expect(many.allocator.addressOf(many.blocks[99_999])).toBe(BASE + 99_999 * 32);
    const h = many.allocator.allocate(16)!;
    expect(h.offset % 32).toBe(16);
  });

  it('refuses ranges that overlap, are out of order, misaligned, empty or past the region', () => {
    expect(() => OffsetAllocator.fromUsed('seg', BASE, 4096, [0, 64, 32, 64])).toThrow(RangeError);
    expect(() => OffsetAllocator.fromUsed('seg', BASE, 4096, [128, 8, 0, 8])).toThrow(/out of order|overlaps/);
    expect(() => OffsetAllocator.fromUsed('seg', BASE, 4096, [4, 8])).toThrow(/aligned/);
    expect(() => OffsetAllocator.fromUsed('seg', BASE, 4096, [0, 12])).toThrow(/aligned/);
    expect(() => OffsetAllocator.fromUsed('seg', BASE, 4096, [0, 0])).toThrow(/aligned/);
    expect(() => OffsetAllocator.fromUsed('seg', BASE, 4096, [4088, 16])).toThrow(/capacity/);
    expect(() => OffsetAllocator.fromUsed('seg', BASE, 4096, [0])).toThrow(/pairs/);
  });
});
