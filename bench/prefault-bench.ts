// Segment pre-faulting benchmark (`npm run build && npm run bench:prefault`): how fast a store pod's
// segment is backed at startup. For each method, a fresh memfd region of BENCH_PREFAULT_GIB GiB
// (default 2) is mapped, pre-faulted and released: the JS fill the client used before (64 MiB
// zero fills on the JS thread), then MemoryRegion.populate() on 1 thread and on the default
// (one per core, at most 8). BENCH_HUGEPAGE=1 maps 2 MiB huge pages (needs a hugetlb pool).
// Prints GB/s and ratios; asserts nothing.
import { cpus } from 'node:os';
import { mapMemory } from '../native/index.js';

const GiB = 1024 ** 3;
const SIZE = Number(process.env.BENCH_PREFAULT_GIB ?? 2) * GiB;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const HUGEPAGE = process.env.BENCH_HUGEPAGE === '1';

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function timed(fill: (r: ReturnType<typeof mapMemory>) => Promise<string>): Promise<{ gbps: number; how: string }> {
  const runs: number[] = [];
  let how = '';
  for (let i = 0; i < ROUNDS; i++) {
    const r = mapMemory({ size: SIZE, hugepage: HUGEPAGE });
    try {
      const t0 = performance.now();
      how = await fill(r);
      runs.push(SIZE / ((performance.now() - t0) / 1000) / 1e9);
    } finally {
      r.release();
    }
  }
  return { gbps: median(runs), how };
}

async function main(): Promise<void> {
  if (process.argv.includes('--help')) {
    console.log('usage: npm run bench:prefault   (env: BENCH_PREFAULT_GIB=2, BENCH_ROUNDS=3, BENCH_HUGEPAGE=1)');
    return;
  }
  console.log(`prefault of a ${SIZE / GiB} GiB memfd segment${HUGEPAGE ? ' (2 MiB huge pages)' : ''}, ${cpus().length} cores, median of ${ROUNDS}`);
  const js = await timed(async (r) => {
    const chunk = 64 * 1024 * 1024;
    for (let off = 0; off < r.size; off += chunk) r.view(off, Math.min(chunk, r.size - off)).fill(0);
    return 'JS fill, 1 thread';
  });
  const one = await timed(async (r) => {
    const h = await r.populate(1);
    return `populate (${h.method}), ${h.threads} thread`;
  });
  const all = await timed(async (r) => {
    const h = await r.populate();
    return `populate (${h.method}), ${h.threads} threads`;
  });
  for (const row of [js, one, all]) {
    console.log(
      `  ${row.how.padEnd(34)} ${row.gbps.toFixed(2).padStart(6)} GB/s  ${(row.gbps / js.gbps).toFixed(2)}x the JS fill  (${(GiB / 1e9 / row.gbps).toFixed(2)} s per GiB)`,
    );
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
