// CRC-32C benchmark (`npm run build && npm run bench:checksum`): for 4 KiB .. 64 MiB, cache-hot
// (one pair of buffers) and cold (cycling over BENCH_COLD_SPAN bytes of source and of destination,
// default 512 MiB each, well past the last-level cache), the GB/s of memcpy, crc32c, memcpy
// followed by crc32c, and copyWithCrc32c, per backend, measured in C++ loops in the same run;
// then crc32c called from JS (N-API call included). Medians of BENCH_ROUNDS rounds, because the
// machine is shared. Prints figures and ratios; asserts nothing.
import { readFileSync } from 'node:fs';
import { arch, cpus } from 'node:os';
import { addon } from '../native/addon.js';
import { crc32c, crc32cImplementations, type Crc32cImplementation } from '../native/index.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const SIZES = [4 * KiB, 64 * KiB, MiB, 4 * MiB, 64 * MiB];
const COLD_SPAN = Number(process.env.BENCH_COLD_SPAN ?? 512 * MiB);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
// Bytes per loop and round: enough for the slow backend to take a measurable time, and at least
// one whole pass over the cold span.
const BYTES = Number(process.env.BENCH_BYTES ?? 1024 * MiB);
// BENCH_IMPLS=avx512,sse42 limits the backends (default: every one this CPU has).
const IMPLS = process.env.BENCH_IMPLS?.split(',') as Crc32cImplementation[] | undefined;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmtSize = (n: number) => (n >= MiB ? `${n / MiB} MiB` : `${n / KiB} KiB`);
const pad = (s: string | number, n: number) => String(s).padStart(n);

function cpuModel(): string {
  try {
    const line = readFileSync('/proc/cpuinfo', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('model name'));
    if (line) return line.split(':')[1].trim();
  } catch {
    // not Linux: fall back to os.cpus()
  }
  return cpus()[0]?.model ?? 'unknown';
}

interface Row {
  memcpy: number;
  crc32c: number;
  separate: number;
  fused: number;
}

async function measure(impl: Crc32cImplementation, size: number, cold: boolean): Promise<Row> {
  const span = cold ? Math.max(COLD_SPAN, size) : size;
  const bytes = impl === 'portable' ? BYTES / 4 : BYTES;
  const iterations = Math.max(3, Math.ceil(Math.max(bytes, cold ? span : 0) / size));
  const rounds: Row[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const t = await addon().crc32cBench(size, iterations, span, impl);
    const gbps = (s: number) => (size * iterations) / s / 1e9;
    rounds.push({ memcpy: gbps(t.memcpy), crc32c: gbps(t.crc32c), separate: gbps(t.separate), fused: gbps(t.fused) });
  }
  return {
    memcpy: median(rounds.map((x) => x.memcpy)),
    crc32c: median(rounds.map((x) => x.crc32c)),
    separate: median(rounds.map((x) => x.separate)),
    fused: median(rounds.map((x) => x.fused)),
  };
}

function fromJs(size: number): number {
  const buf = Buffer.alloc(size, 0x3c);
  const iterations = Math.max(100, Math.ceil((256 * MiB) / size));
  const runs: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    let sink = 0;
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < iterations; i++) sink ^= crc32c(buf);
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    if (sink === 0.5) console.log(''); // keep the calls
    runs.push((size * iterations) / s / 1e9);
  }
  return median(runs);
}

async function main(): Promise<void> {
  const { active, available } = crc32cImplementations();
  const hardware = active !== 'portable';
  console.log(`CPU: ${cpuModel()} (${arch()}, ${cpus().length} cores)`);
  console.log(`CRC-32C backend in use: ${active} (${hardware ? 'hardware path' : 'portable path, no hardware CRC'}); available: ${available.join(', ')}`);
  console.log(`cold = cycling over ${fmtSize(COLD_SPAN)} of source and of destination; medians of ${ROUNDS} rounds; GB/s = 1e9 bytes/s`);
  console.log('');
  const header = ['backend', 'size', 'cache', 'memcpy', 'crc32c', 'memcpy+crc32c', 'copyWithCrc32c', 'copyWithCrc32c/memcpy'];
  const widths = [8, 7, 5, 8, 8, 14, 15, 22];
  console.log(header.map((h, i) => pad(h, widths[i])).join(' '));
  const impls = (IMPLS ?? [...available].reverse()).filter((i) => available.includes(i));
  for (const impl of impls) {
    for (const size of SIZES) {
      for (const cold of [false, true]) {
        const r = await measure(impl, size, cold);
        const cells = [
          impl,
          fmtSize(size),
          cold ? 'cold' : 'hot',
          r.memcpy.toFixed(1),
          r.crc32c.toFixed(1),
          r.separate.toFixed(1),
          r.fused.toFixed(1),
          (r.fused / r.memcpy).toFixed(2),
        ];
        console.log(cells.map((c, i) => pad(c, widths[i])).join(' '));
      }
    }
  }
  console.log('');
  console.log(`crc32c() called from JS on a hot Buffer (${active}, N-API call included):`);
  for (const size of [4 * KiB, 64 * KiB, MiB]) console.log(`  ${pad(fmtSize(size), 7)}: ${fromJs(size).toFixed(1)} GB/s`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
