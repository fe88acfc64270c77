// Shared by the benchmarks: timing a workload over several lanes in flight, percentiles, and the
// native memcpy peer (hot: one pair of buffers; cold: cycling over a span above the LLC).
import { addon } from '../native/addon.js';

export const KiB = 1024;
export const MiB = 1024 * KiB;

export const fmtSize = (n: number): string => (n >= MiB ? `${n / MiB} MiB` : `${n / KiB} KiB`);
export const pct = (sorted: number[], p: number): number => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] : NaN);

export interface Row {
  gbps: number;
  opsPerSec: number;
  p50ms: number;
  p99ms: number;
}

/** Runs ops 0..n-1 with `inflight` lanes; each call of `op` handles `per` objects. */
export async function measure(n: number, size: number, inflight: number, per: number, op: (first: number) => Promise<void>): Promise<Row> {
  const lat: number[] = [];
  let next = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: inflight }, async () => {
      while (next < n) {
        const first = next;
        next += per;
        const t = performance.now();
        await op(first);
        lat.push(performance.now() - t);
      }
    }),
  );
  const s = (performance.now() - start) / 1000;
  lat.sort((a, b) => a - b);
  return { gbps: (n * size) / s / 1e9, opsPerSec: n / s, p50ms: pct(lat, 0.5), p99ms: pct(lat, 0.99) };
}

/** memcpy GB/s: hot = the same two buffers every time; cold = cycling over `span` bytes of buffers. */
export async function memcpyGbps(size: number, span = 0): Promise<number> {
  const iters = Math.max(10, Math.floor((1024 * MiB) / size));
  await addon().memcpyRun(size, 10, span);
  const s = await addon().memcpyRun(size, iters, span);
  return (size * iters) / s / 1e9;
}
