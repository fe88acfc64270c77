#!/usr/bin/env node
// The main job (`make run`): starts a store_master (with its HTTP metadata server) and two
// store_service processes on 127.0.0.1, runs a put/get workload from an embedded client (2,000 x
// 1 MiB and 20,000 x 4 KiB by default, zero-copy from and into registered buffers, every value
// checked by CRC-32), shows a progress bar, prints throughput and p50/p99 latency, and stops
// everything it started on exit or Ctrl-C.
import { randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { performance } from 'node:perf_hooks';
import { FlagError, FlagTable, HelpRequested } from '../common/flags.js';
import { Client } from '../client/client.js';
import { LocalCluster } from '../sidecar/local-cluster.js';

const flags = new FlagTable('run', [
  { name: 'large_count', kind: 'int', default: 2000, min: 0, help: 'number of large objects' },
  { name: 'large_size', kind: 'size', default: 1024 * 1024, defaultText: '1MB', help: 'size of a large object' },
  { name: 'small_count', kind: 'int', default: 20000, min: 0, help: 'number of small objects' },
  { name: 'small_size', kind: 'size', default: 4096, defaultText: '4KB', help: 'size of a small object' },
  { name: 'concurrency', kind: 'int', default: 4, min: 1, max: 256, help: 'operations in flight' },
  { name: 'replicas', kind: 'int', default: 1, min: 1, max: 2, help: 'replicas per object (two store services)' },
  { name: 'segment_size', kind: 'size', default: 0, defaultText: 'enough for the workload', help: 'global segment of each store service' },
]);

const tty = process.stderr.isTTY;

/** One progress line, redrawn in place on a terminal; every 10% otherwise. */
class Progress {
  private last = -1;
  private readonly start = performance.now();
  constructor(
    private readonly label: string,
    private readonly total: number,
    private readonly bytesEach: number,
  ) {}
  update(done: number): void {
    const pct = this.total === 0 ? 100 : Math.floor((done * 100) / this.total);
    if (!tty && (pct === this.last || pct % 10 !== 0)) return;
    if (tty && pct === this.last && done !== this.total) return;
    this.last = pct;
    const width = 30;
    const fill = Math.round((pct / 100) * width);
    const secs = (performance.now() - this.start) / 1000;
    const rate = secs > 0 ? done / secs : 0;
    const gbps = (rate * this.bytesEach) / 1e9;
    const bar = `\x1b[32m${'█'.repeat(fill)}\x1b[2m${'░'.repeat(width - fill)}\x1b[0m`;
    const text = `${this.label.padEnd(18)} ${bar} ${String(pct).padStart(3)}% ${done}/${this.total}  ${rate.toFixed(0)} ops/s  ${gbps.toFixed(2)} GB/s`;
    process.stderr.write(tty ? `\r\x1b[2K${text}` : `${text.replace(/\u001b\[[0-9;]*m/g, '')}\n`);
  }
  done(): void {
    this.update(this.total);
    if (tty) process.stderr.write('\n');
  }
}

interface PhaseResult {
  name: string;
  ops: number;
  bytes: number;
  seconds: number;
  latenciesMs: number[];
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** Runs `count` operations with `concurrency` in flight, recording each one's latency. */
async function phase(name: string, count: number, size: number, concurrency: number, op: (i: number, worker: number) => Promise<(() => void) | void>): Promise<PhaseResult> {
  const progress = new Progress(name, count, size);
  const latenciesMs: number[] = new Array(count);
  let next = 0;
  let done = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async (_, worker) => {
      while (next < count) {
        const i = next++;
        const t = performance.now();
        const check = await op(i, worker);
        latenciesMs[i] = performance.now() - t; // the store operation alone, not the checksum
        check?.();
        progress.update(++done);
      }
    }),
  );
  progress.done();
  return { name, ops: count, bytes: count * size, seconds: (performance.now() - start) / 1000, latenciesMs };
}

/** Deterministic distinct values: a random base with the index stamped into it. */
function makeValue(base: Buffer, i: number, out: Buffer): Buffer {
  base.copy(out);
  out.writeUInt32LE(i, 0);
  out.writeUInt32LE(Math.imul(i, 2654435761) >>> 0, out.length - 4 >= 4 ? out.length - 4 : 0);
  return out;
}

async function main(): Promise<number> {
  let v;
  try {
    v = flags.parse(process.argv.slice(2)).values;
  } catch (e) {
    if (e instanceof HelpRequested) {
      process.stdout.write(e.usage);
      return 0;
    }
    if (e instanceof FlagError) {
      process.stderr.write(`run: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
  const large = { count: v.large_count as number, size: v.large_size as number };
  const small = { count: v.small_count as number, size: v.small_size as number };
  const concurrency = v.concurrency as number;
  const replicas = v.replicas as number;
  const need = Math.ceil(((large.count * large.size + small.count * Math.max(small.size, 64)) * replicas * 1.3) / 2);
  const segment = (v.segment_size as number) || Math.max(64 * 1024 * 1024, need);

  process.stderr.write(`starting store_master and 2 store_service processes (segments of ${(segment / 2 ** 20).toFixed(0)} MiB) on 127.0.0.1 ...\n`);
  const cluster = await LocalCluster.start({ storeServices: 2, segmentSize: String(segment) });
  let client: Client | undefined;
  let stopping: Promise<void> | undefined;
  let interrupted = false;
  const stopAll = () =>
    (stopping ??= (async () => {
      await client?.close().catch(() => {});
      await cluster.stop();
    })());
  process.on('SIGINT', () => {
    interrupted = true;
    process.stderr.write('\ninterrupted: stopping the cluster\n');
    void stopAll().finally(() => process.exit(130));
  });
  process.on('SIGTERM', () => {
    interrupted = true;
    void stopAll().finally(() => process.exit(143));
  });
  process.on('exit', () => cluster.killAllNow());

  try {
    process.stderr.write(`master rpc=${cluster.master.rpc} metadata=${cluster.master.metadata}; store services ${cluster.services.map((s) => s.endpoint).join(', ')}\n`);
    client = await Client.setup(cluster.clientConfig({ local_buffer_size: Math.max(64 * 1024 * 1024, large.size * concurrency * 2) }));
    const c = client;
    const results: PhaseResult[] = [];
    const digests = new Map<string, number>();
    let mismatches = 0;

    for (const w of [
      { ...large, prefix: 'large' },
      { ...small, prefix: 'small' },
    ]) {
      if (w.count === 0) continue;
      const base = randomBytes(w.size);
      // One registered buffer per worker (client.allocBuffer): values are put from it and read
      // back into it with no staging copy, the way an inference engine hands over its KV blocks.
      const slots = await Promise.all(Array.from({ length: concurrency }, () => c.allocBuffer(w.size)));
      const label = w.size >= 1024 * 1024 ? `${w.size / 2 ** 20} MiB` : `${w.size / 1024} KiB`;
      results.push(
        await phase(`put ${label}`, w.count, w.size, concurrency, async (i, worker) => {
          const value = makeValue(base, i, slots[worker].buffer);
          const key = `${w.prefix}-${i}`;
          digests.set(key, crc32(value)); // CRC-32 (native zlib): cheap next to the transfer
          await c.put(key, value, { replica_num: replicas });
        }),
      );
      results.push(
        await phase(`get ${label}`, w.count, w.size, concurrency, async (i, worker) => {
          const key = `${w.prefix}-${i}`;
          const into = slots[worker].buffer;
          into.fill(0, 0, 8); // a stale slot must not pass the check
          const n = await c.getInto(key, into);
          return () => {
            if (n !== w.size || crc32(into.subarray(0, n)) !== digests.get(key)) mismatches++;
          };
        }),
      );
      for (const s of slots) s.release();
    }

    process.stdout.write('\n');
    process.stdout.write(
      `${'phase'.padEnd(14)}${'ops'.padStart(8)}${'seconds'.padStart(10)}${'ops/s'.padStart(11)}${'GB/s'.padStart(9)}${'p50 ms'.padStart(10)}${'p99 ms'.padStart(10)}\n`,
    );
    for (const r of results) {
      const sorted = r.latenciesMs.slice().sort((a, b) => a - b);
      process.stdout.write(
        `${r.name.padEnd(14)}${String(r.ops).padStart(8)}${r.seconds.toFixed(2).padStart(10)}${(r.ops / r.seconds).toFixed(0).padStart(11)}` +
          `${(r.bytes / r.seconds / 1e9).toFixed(3).padStart(9)}${percentile(sorted, 50).toFixed(3).padStart(10)}${percentile(sorted, 99).toFixed(3).padStart(10)}\n`,
      );
    }
    const checked = results.filter((r) => r.name.startsWith('get')).reduce((n, r) => n + r.ops, 0);
    process.stdout.write(`\nchecksums: ${checked - mismatches}/${checked} objects verified (CRC-32)${mismatches ? `, ${mismatches} MISMATCHED` : ''}\n`);
    return mismatches === 0 ? 0 : 1;
  } catch (e) {
    if (interrupted) return 130; // operations cut short by Ctrl-C: not a failure to report
    process.stderr.write(`\nrun failed: ${(e as Error).stack ?? e}\n`);
    process.stderr.write(`master output (tail):\n${cluster.master.output().slice(-2000)}\n`);
    return 1;
  } finally {
    await stopAll();
  }
}

main().then(
  (code) => process.exit(code),
  (e) => {
    process.stderr.write(`run: fatal: ${(e as Error).stack ?? e}\n`);
    process.exit(1);
  },
);
