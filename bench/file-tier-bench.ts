// File-tier benchmark (`npm run bench:file-tier` after `npm run build`); not a test, asserts
// nothing. Processes on 127.0.0.1: a store_master and one store service, with and without
// --root_fs_dir (a temporary directory under BENCH_DIR, default the OS temp dir). This process's
// client puts BENCH_OBJECTS objects of 64 KiB and of 4 MiB at 4 in flight: Put throughput with
// the tier off and on (on: the Put includes the staging copy and waits when staging is full),
// the time until every file is written and reported, and then, after a full restart of master and
// store service (memory empty), Gets served from the files. Peers in the same run: the staging
// copy alone (fused memcpy + CRC-32C) and a plain write+fsync of files of the same size through
// fs/promises (what the tier's writer does, without header, rename or report). Last, the master's
// rescan at start: BENCH_SCAN_FILES (default 10,000) files of 4 KiB written by the tier's writer,
// then their headers read into a new index (files hot in the page cache).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '../client/client.js';
import { writeObjectFile } from '../client/file-tier.js';
import { encodeHeader } from '../common/file-tier-header.js';
import type { Logger } from '../common/logger.js';
import { loadFileTier } from '../master/file-tier-dir.js';
import { copyWithCrc32c, crc32c } from '../native/checksum.js';
import { LocalCluster } from '../sidecar/local-cluster.js';
import { fmtSize, KiB, measure, MiB } from './bench-util.js';

const INFLIGHT = 4;

async function cluster(root: string | undefined, segment: string): Promise<LocalCluster> {
  return LocalCluster.start({ storeServices: 1, segmentSize: segment, masterArgs: root ? [`--root_fs_dir=${root}`, '--cluster_id=bench'] : [] });
}

async function run(size: number, n: number, base: string): Promise<void> {
  const value = randomBytes(size);
  const total = size * n;
  const segment = `${Math.ceil((total * 1.5) / MiB) + 16}MB`;
  const gbps = (bytes: number, ms: number): string => ((bytes / ms) * 1e-6).toFixed(2);

  // Tier off.
  let c = await cluster(undefined, segment);
  let client = await Client.setup(c.clientConfig({ local_buffer_size: 64 * MiB }));
  const off = await measure(n, size, INFLIGHT, 1, (i) => client.put(`k-${i}`, value));
  await client.close();
  await c.stop();

  // Tier on.
  const root = mkdtempSync(join(base, 'kv-file-bench-'));
  try {
    c = await cluster(root, segment);
    client = await Client.setup(c.clientConfig({ local_buffer_size: 64 * MiB }));
    const t0 = performance.now();
    const on = await measure(n, size, INFLIGHT, 1, (i) => client.put(`k-${i}`, value));
    await client.fileTierIdle();
    const filesMs = performance.now() - t0;
    const counts = { ...client.fileTierCounts };
    await client.close();
    await c.stop();

    // Full restart: memory empty, every Get from its file.
    c = await cluster(root, segment);
    client = await Client.setup(c.clientConfig({ local_buffer_size: 64 * MiB }));
    const target = Buffer.alloc(size);
    const get = await measure(n, size, INFLIGHT, 1, async (i) => {
      await client.getInto(`k-${i}`, target);
    });
    await client.close();
    await c.stop();

    // Peers: the staging copy, and write+fsync of the same files.
    const dst = Buffer.allocUnsafe(size);
    const copies = Math.max(20, Math.floor((256 * MiB) / size));
    const tc = performance.now();
    for (let i = 0; i < copies; i++) copyWithCrc32c(dst, value);
    const copyMs = performance.now() - tc;
    const rawDir = mkdtempSync(join(base, 'kv-file-raw-'));
    const raw = await measure(n, size, INFLIGHT, 1, async (i) => {
      const fh = await open(join(rawDir, `f-${i}`), 'w');
      await fh.write(value);
      await fh.sync();
      await fh.close();
    });
    rmSync(rawDir, { recursive: true, force: true });

    console.log(`${fmtSize(size)} x ${n} (${INFLIGHT} in flight)`);
    console.log(`  put, tier off:           ${off.gbps.toFixed(2)} GB/s  ${off.opsPerSec.toFixed(0)} puts/s  p50 ${off.p50ms.toFixed(2)} ms  p99 ${off.p99ms.toFixed(2)} ms`);
    console.log(`  put, tier on:            ${on.gbps.toFixed(2)} GB/s  ${on.opsPerSec.toFixed(0)} puts/s  p50 ${on.p50ms.toFixed(2)} ms  p99 ${on.p99ms.toFixed(2)} ms`);
    console.log(
      `  all files written:       ${gbps(total, filesMs)} GB/s (${filesMs.toFixed(0)} ms from the first put; written ${counts.written}, refused ${counts.refused}, failed ${counts.failed})`,
    );
    console.log(`  raw write+fsync (peer):  ${raw.gbps.toFixed(2)} GB/s  p50 ${raw.p50ms.toFixed(2)} ms`);
    console.log(`  staging copy+CRC (peer): ${gbps(size * copies, copyMs)} GB/s (${((copyMs / copies) * 1000).toFixed(1)} us per value)`);
    console.log(`  get from files:          ${get.gbps.toFixed(2)} GB/s  ${get.opsPerSec.toFixed(0)} gets/s  p50 ${get.p50ms.toFixed(2)} ms  p99 ${get.p99ms.toFixed(2)} ms`);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

async function scan(files: number, base: string): Promise<void> {
  const dir = mkdtempSync(join(base, 'kv-file-scan-'));
  try {
    const v = Buffer.alloc(4 * KiB, 7);
    const sums = [crc32c(v)];
    for (let i = 0; i < files; i += 64) {
      await Promise.all(Array.from({ length: Math.min(64, files - i) }, (_, j) => writeObjectFile(dir, `key-${i + j}`, encodeHeader(`key-${i + j}`, [v.length], sums, crc32c), v)));
    }
    const quiet = { info() {}, warn() {}, error() {}, debug() {} } as unknown as Logger;
    const t = performance.now();
    const index = await loadFileTier(dir, Number.MAX_SAFE_INTEGER, quiet);
    const ms = performance.now() - t;
    console.log(`rescan at start: ${index.size} files of 4 KiB in ${ms.toFixed(0)} ms (${((index.size / ms) * 1000).toFixed(0)} files/s)`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const base = process.env.BENCH_DIR ?? tmpdir();
  const n = Number(process.env.BENCH_OBJECTS ?? 0);
  await run(64 * KiB, n || 2000, base);
  await run(4 * MiB, n || 64, base);
  await scan(Number(process.env.BENCH_SCAN_FILES ?? 10_000), base);
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
