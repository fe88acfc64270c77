// Rules of the three allocation strategies, each with a seeded RNG.
import { ErrorCode } from '../../common/error-code.js';
import { MemoryType } from '../../proto/gen/store/MemoryType.js';
import type { AllocationRequest, AllocationResult } from './allocation-strategy.js';
import { CxlStrategy } from './cxl-strategy.js';
import { FreeRatioFirstStrategy } from './free-ratio-first-strategy.js';
import { RandomStrategy } from './random-strategy.js';
import { SeededRng } from './rng.js';
import { SegmentRegistry } from './segment-registry.js';

function pool(count: number, size = 1 << 20): SegmentRegistry {
  const reg = new SegmentRegistry();
  for (let i = 0; i < count; i++) reg.add(`seg-${i}`, `id-${i}`, 'client-a', i * 2 ** 32, size, `10.0.0.${i}:1`, 'tcp');
  return reg;
}

/** Counts allocate() calls made on every segment of the pool. */
function countAttempts(reg: SegmentRegistry): () => number {
  let calls = 0;
  for (const seg of reg.all()) {
    const original = seg.allocator.allocate.bind(seg.allocator);
    seg.allocator.allocate = (size: number) => {
      calls++;
      return original(size);
    };
  }
  return () => calls;
}

function fill(reg: SegmentRegistry, name: string): void {
  const seg = reg.byName(name)!;
  seg.allocator.allocate(seg.allocator.capacity);
}

function req(partial: Partial<AllocationRequest>): AllocationRequest {
  return { sliceLength: 1024, replicaNum: 1, preferred: [], excluded: new Set(), ...partial };
}

function names(r: AllocationResult): string[] {
  if (!r.ok) throw new Error(`allocation failed with ${r.code}`);
  return r.buffers.map((b) => b.segment.name);
}

describe.each([
  ['random', () => new RandomStrategy(), 0],
  ['free_ratio_first', () => new FreeRatioFirstStrategy(), 6],
])('%s strategy', (_name, make, candidateAttempts) => {
  it('places each replica of a slice on a different segment', () => {
    const reg = pool(5);
    const got = names(make().allocate(reg, req({ replicaNum: 4 }), new SeededRng(1)));
    expect(got).toHaveLength(4);
    expect(new Set(got).size).toBe(4);
  });

  it('uses preferred segments first, in order, one replica each', () => {
    const reg = pool(6);
    const got = names(make().allocate(reg, req({ replicaNum: 3, preferred: ['seg-4', 'seg-2'] }), new SeededRng(7)));
    expect(got.slice(0, 2)).toEqual(['seg-4', 'seg-2']);
    expect(got).toHaveLength(3);
    expect(new Set(got).size).toBe(3);
  });

  it('finishes early when preferred segments satisfy the request', () => {
    const reg = pool(6);
    expect(names(make().allocate(reg, req({ replicaNum: 1, preferred: ['seg-5'] }), new SeededRng(3)))).toEqual(['seg-5']);
  });

  it('falls back to other segments when the preferred one is full or unknown', () => {
    const reg = pool(4);
    fill(reg, 'seg-1');
    for (const preferred of [['seg-1'], ['no-such-segment']]) {
      const got = names(make().allocate(reg, req({ preferred }), new SeededRng(5)));
      expect(got).toHaveLength(1);
      expect(got[0]).not.toBe('seg-1');
    }
  });

  it('never uses excluded segments', () => {
    const reg = pool(4);
    const excluded = new Set([reg.byName('seg-0')!.id, reg.byName('seg-3')!.id]);
    for (let seed = 0; seed < 20; seed++) {
      const r = make().allocate(reg, req({ replicaNum: 4, excluded, preferred: ['seg-0'] }), new SeededRng(seed));
      const got = names(r);
      expect(got.sort()).toEqual(['seg-1', 'seg-2']);
      if (r.ok) for (const b of r.buffers) b.segment.allocator.free(b.handle);
    }
  });

  it('returns a partial result when fewer segments have space', () => {
    const reg = pool(3);
    fill(reg, 'seg-0');
    const got = names(make().allocate(reg, req({ replicaNum: 3 }), new SeededRng(9)));
    expect(got.sort()).toEqual(['seg-1', 'seg-2']);
  });

  it('fails with NO_AVAILABLE_HANDLE when no replica fits, and with INVALID_PARAMS for a bad request', () => {
    const reg = pool(2, 4096);
    expect(make().allocate(reg, req({ sliceLength: 8192 }), new SeededRng(1))).toEqual({ ok: false, code: ErrorCode.NO_AVAILABLE_HANDLE });
    expect(make().allocate(pool(0), req({}), new SeededRng(1))).toEqual({ ok: false, code: ErrorCode.NO_AVAILABLE_HANDLE });
    expect(make().allocate(reg, req({ replicaNum: 0 }), new SeededRng(1))).toEqual({ ok: false, code: ErrorCode.INVALID_PARAMS });
    expect(make().allocate(reg, req({ sliceLength: 0 }), new SeededRng(1))).toEqual({ ok: false, code: ErrorCode.INVALID_PARAMS });
    for (const seg of reg.all()) expect(seg.allocator.used).toBe(0);
  });

  it('never allocates on a segment in its unmount grace period', () => {
    const reg = pool(3);
    reg.beginUnmount(reg.byName('seg-1')!, 1000);
    for (let seed = 0; seed < 10; seed++) {
      const r = make().allocate(reg, req({ replicaNum: 3, preferred: ['seg-1'] }), new SeededRng(seed));
      expect(names(r).sort()).toEqual(['seg-0', 'seg-2']);
    }
  });

  it('scans at most 100 segments', () => {
    const reg = pool(150, 64);
    for (const seg of reg.all()) fill(reg, seg.name);
    const attempts = countAttempts(reg);
    expect(make().allocate(reg, req({ sliceLength: 8 }), new SeededRng(11)).ok).toBe(false);
    // The random scan visits 100 positions; free_ratio_first first tries its 6 candidates, which
    // the scan then skips if it meets them again.
    expect(attempts()).toBeGreaterThanOrEqual(100);
    expect(attempts()).toBeLessThanOrEqual(100 + candidateAttempts);
  });

  it('makes at most 10 attempts over different segments when a preferred segment is named', () => {
    const reg = pool(30, 64);
    for (const seg of reg.all()) fill(reg, seg.name);
    const attempts = countAttempts(reg);
    expect(make().allocate(reg, req({ sliceLength: 8, preferred: ['seg-7'] }), new SeededRng(2)).ok).toBe(false);
    expect(attempts()).toBe(10);
  });

  it('spreads placements over segments with a varying random start', () => {
    const reg = pool(8);
    const rng = new SeededRng(42);
    const seen = new Set<string>();
    for (let i = 0; i < 40; i++) {
      const r = make().allocate(reg, req({ sliceLength: 8 }), rng);
      seen.add(names(r)[0]);
    }
    expect(seen.size).toBeGreaterThan(4);
  });
});

describe('free_ratio_first', () => {
  it('picks the candidates with the highest free ratio', () => {
    const reg = pool(4, 10_000);
    // usage: seg-0 90%, seg-1 10%, seg-2 50%, seg-3 0% (all 4 are candidates: 6 x 2 >= 4)
    reg.byName('seg-0')!.allocator.allocate(9000);
    reg.byName('seg-1')!.allocator.allocate(1000);
    reg.byName('seg-2')!.allocator.allocate(5000);
    for (let seed = 0; seed < 10; seed++) {
      const r = new FreeRatioFirstStrategy().allocate(reg, req({ sliceLength: 8, replicaNum: 2 }), new SeededRng(seed));
      expect(names(r)).toEqual(['seg-3', 'seg-1']);
      if (r.ok) for (const b of r.buffers) b.segment.allocator.free(b.handle);
    }
  });

  it('falls back to the random scan when the candidates are full', () => {
    const reg = pool(20, 64);
    for (const seg of reg.all()) if (seg.name !== 'seg-13') fill(reg, seg.name);
    // 6 candidates from a random start rarely include seg-13; the fallback scan finds it.
    for (let seed = 0; seed < 10; seed++) {
      const r = new FreeRatioFirstStrategy().allocate(reg, req({ sliceLength: 8 }), new SeededRng(seed));
      expect(names(r)).toEqual(['seg-13']);
      if (r.ok) r.buffers[0].segment.allocator.free(r.buffers[0].handle);
    }
  });
});

describe('cxl strategy', () => {
  it('allocates exactly one replica on the first preferred segment, marked CXL', () => {
    const reg = pool(3);
    const r = new CxlStrategy().allocate(reg, req({ replicaNum: 3, preferred: ['seg-2', 'seg-0'] }));
    expect(names(r)).toEqual(['seg-2']);
    if (r.ok) expect(r.buffers[0].memoryType).toBe(MemoryType.CXL);
  });

  it('requires a preferred segment', () => {
    expect(new CxlStrategy().allocate(pool(3), req({}))).toEqual({ ok: false, code: ErrorCode.INVALID_PARAMS });
  });

  it('fails with NO_AVAILABLE_HANDLE when the CXL segment is full or unknown', () => {
    const reg = pool(2);
    fill(reg, 'seg-0');
    expect(new CxlStrategy().allocate(reg, req({ preferred: ['seg-0'] }))).toEqual({ ok: false, code: ErrorCode.NO_AVAILABLE_HANDLE });
    expect(new CxlStrategy().allocate(reg, req({ preferred: ['nope'] }))).toEqual({ ok: false, code: ErrorCode.NO_AVAILABLE_HANDLE });
    expect(reg.byName('seg-1')!.allocator.used).toBe(0);
  });
});
