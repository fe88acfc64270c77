// Properties of the offset allocator: no overlap, bounds, exact accounting, full coalescing.
import fc from 'fast-check';
import { OffsetAllocator, binCeil, binFloor, binLowerBound, NUM_BINS } from './offset-allocator.js';
import type { AllocHandle } from './buffer-allocator.js';

type Op = { kind: 'alloc'; size: number } | { kind: 'free'; pick: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('alloc' as const), size: fc.oneof(fc.integer({ min: 1, max: 64 }), fc.integer({ min: 1, max: 5000 })) }),
  fc.record({ kind: fc.constant('free' as const), pick: fc.nat() }),
);

function checkNoOverlap(live: AllocHandle[], alloc: OffsetAllocator, base: number, size: number): void {
  const spans = live.map((h) => [h.address, h.address + alloc.reservedSize(h.block)] as const).sort((a, b) => a[0] - b[0]);
  for (let i = 0; i < spans.length; i++) {
    const [start, end] = spans[i];
    expect(start).toBeGreaterThanOrEqual(base);
    expect(end).toBeLessThanOrEqual(base + size);
    expect((start - base) % 8).toBe(0);
    if (i > 0) expect(start).toBeGreaterThanOrEqual(spans[i - 1][1]);
  }
}

describe('bins', () => {
  it('maps every size to a bin whose bounds contain it', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }), (s) => {
        const b = binFloor(s);
        expect(b).toBeGreaterThanOrEqual(0);
        expect(b).toBeLessThan(NUM_BINS);
        expect(binLowerBound(b)).toBeLessThanOrEqual(s);
        if (b + 1 < NUM_BINS) expect(binLowerBound(b + 1)).toBeGreaterThan(s);
        expect(binLowerBound(binCeil(s))).toBeGreaterThanOrEqual(s);
      }),
    );
  });
});

describe('OffsetAllocator', () => {
  it('keeps live allocations disjoint, inside the region, and accounts used bytes exactly', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 1 << 40 }).map((b) => b * 8),
        fc.integer({ min: 8, max: 200_000 }),
        fc.array(opArb, { maxLength: 300 }),
        (base, size, ops) => {
          const alloc = new OffsetAllocator('seg', base, size);
          const live: AllocHandle[] = [];
          for (const op of ops) {
            if (op.kind === 'alloc') {
              const h = alloc.allocate(op.size);
              if (h) {
                expect(h.size).toBe(op.size);
                expect(h.address).toBe(base + h.offset);
                live.push(h);
              }
            } else if (live.length > 0) {
              const [h] = live.splice(op.pick % live.length, 1);
              alloc.free(h);
            }
            const expectedUsed = live.reduce((sum, h) => sum + Math.ceil(h.size / 8) * 8, 0);
            expect(alloc.used).toBe(expectedUsed);
          }
          checkNoOverlap(live, alloc, base, size);
          for (const h of live) alloc.free(h);
          expect(alloc.used).toBe(0);
          expect(alloc.freeBlockCount).toBe(1);
          expect(alloc.largestFree).toBe(alloc.capacity);
          expect(alloc.allocate(alloc.capacity)).not.toBeNull();
        },
      ),
      { numRuns: 150 },
    );
  });

  it('fills completely, then freeing everything in any order coalesces back to one block', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 512 }), { minLength: 1, maxLength: 200 }), fc.nat(), (sizes, seed) => {
        const total = sizes.reduce((s, x) => s + Math.ceil(x / 8) * 8, 0);
        const alloc = new OffsetAllocator('seg', 4096, total);
        const live = sizes.map((s) => alloc.allocate(s));
        expect(live.every((h) => h !== null)).toBe(true);
        expect(alloc.used).toBe(total);
        expect(alloc.largestFree).toBe(0);
        expect(alloc.allocate(1)).toBeNull();
        // free in a seed-shuffled order
        const order = live.map((h, i) => ({ h: h!, k: (i * 2654435761 + seed) % 1000003 })).sort((a, b) => a.k - b.k);
        for (const { h } of order) alloc.free(h);
        expect(alloc.used).toBe(0);
        expect(alloc.freeBlockCount).toBe(1);
        const whole = alloc.allocate(total);
        expect(whole).not.toBeNull();
        expect(whole!.offset).toBe(0);
      }),
      { numRuns: 100 },
    );
  });

  it('rounds sizes to 8 bytes and the region down to a multiple of 8', () => {
    const alloc = new OffsetAllocator('seg', 0, 1003);
    expect(alloc.capacity).toBe(1000);
    const a = alloc.allocate(3)!;
    const b = alloc.allocate(9)!;
    expect(a.offset).toBe(0);
    expect(b.offset).toBe(8);
    expect(alloc.used).toBe(24);
  });

  it('refuses non-positive, fractional and oversized requests', () => {
    const alloc = new OffsetAllocator('seg', 0, 1024);
    expect(alloc.allocate(0)).toBeNull();
    expect(alloc.allocate(-8)).toBeNull();
    expect(alloc.allocate(1.5)).toBeNull();
    expect(alloc.allocate(1032)).toBeNull();
    expect(alloc.used).toBe(0);
  });

  it('throws on double free', () => {
    const alloc = new OffsetAllocator('seg', 0, 1024);
    const h = alloc.allocate(100)!;
    alloc.free(h);
    expect(() => alloc.free(h)).toThrow(/not live/);
  });

  it('handles segments larger than 4 GiB', () => {
    const tb = 2 ** 40;
    const alloc = new OffsetAllocator('big', 2 ** 44, tb);
    const a = alloc.allocate(2 ** 39)!;
    const b = alloc.allocate(2 ** 39)!;
    expect(b.offset).toBe(2 ** 39);
    expect(alloc.allocate(8)).toBeNull();
    alloc.free(a);
    alloc.free(b);
    expect(alloc.allocate(tb)).not.toBeNull();
  });

  it('keeps every block exact past tens of thousands of blocks (node storage grows in chunks)', () => {
    const alloc = new OffsetAllocator('many', 0x1000, 1 << 30);
    const n = 40_000; // past the first small chunk and two full ones
    const hs: AllocHandle[] = [];
    for (let i = 0; i < n; i++) hs.push(alloc.allocate(8 + (i % 5) * 8)!);
    expect(new Set(hs.map((h) => h.offset)).size).toBe(n);
    for (let i = 1; i < n; i++) expect(hs[i].offset).toBe(hs[i - 1].offset + 8 + ((i - 1) % 5) * 8);
    for (let i = 0; i < n; i += 2) alloc.free(hs[i]);
    for (let i = 1; i < n; i += 2) expect(alloc.addressOf(hs[i].block)).toBe(0x1000 + hs[i].offset);
    for (let i = 1; i < n; i += 2) alloc.free(hs[i]);
    expect(alloc.used).toBe(0);
    expect(alloc.freeBlockCount).toBe(1);
    expect(alloc.allocate(1 << 30)).not.toBeNull();
  });
});
