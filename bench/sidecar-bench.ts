// Dummy-client benchmark (`npm run bench:sidecar` after `npm run build`); not a test, asserts
// nothing. Processes on 127.0.0.1: a store_master, store_service A (the real client the dummy
// clients talk to, over its Unix socket) and store_service B (another memory holder). Clients: the
// embedded TS Client in this process (the peer), a TS DummyClient in this process, and the Python
// dummy client (clients/python, its bench script in a child process) when its venv exists. Every
// object is placed either in A's own segment or in B's (preferred_segment), and values live in
// memory from allocBuffer (shared with A for dummy clients: no copy in either process).
// Gets are measured twice: the first read of each key (a master round trip) and a repeated read
// while the read lease holds (the embedded client and the real client reuse the replica list:
// client/replica-cache.ts; dummy clients copy same-host memory themselves: their local reads,
// counted below; STORE_DUMMY_LOCAL_READS=0 turns those off for a comparison, and a dummy's first
// reads of same-host memory are looked up at the master by the dummy itself:
// STORE_DUMMY_DIRECT_READS=0 turns that off).
// In the same run: memcpy (cold). Ratios: dummy / embedded per row, 4 MiB vs memcpy.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Client } from '../client/client.js';
import { DummyClient } from '../client/dummy-client.js';
import type { StoreClient } from '../client/store-client.js';
import { sidecarCluster } from './sidecar-cluster.js';
import { KiB, measure, memcpyGbps, MiB, type Row } from './bench-util.js';
import { untilIdle } from './process-cpu.js';

const LEASE_TTL_MS = 2000;
const BYTES_PER_ROW = Number(process.env.BENCH_BYTES ?? 96 * MiB);
const COLD_SPAN = 256 * MiB;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

interface Case {
  name: string;
  size: number;
  inflight: number;
  batch: number;
}

const CASES: Case[] = [
  { name: '4 KiB x1', size: 4 * KiB, inflight: 1, batch: 1 },
  { name: '4 KiB x64', size: 4 * KiB, inflight: 64, batch: 1 },
  { name: '64 KiB x1', size: 64 * KiB, inflight: 1, batch: 1 },
  { name: '1 MiB x1', size: MiB, inflight: 1, batch: 1 },
  { name: '4 MiB x1', size: 4 * MiB, inflight: 1, batch: 1 },
  { name: 'batch 128 x 4 KiB', size: 4 * KiB, inflight: 1, batch: 128 },
];

const count = (c: Case) => Math.max(c.batch * 4, Math.min(c.batch > 1 ? 8192 : 3000, Math.floor(BYTES_PER_ROW / c.size)));

interface Result {
  client: string;
  placement: string;
  row: string;
  r: Row;
}

/** Puts then reads (first and repeated) every case through `client`, values in allocBuffer memory. */
async function runClient(name: string, client: StoreClient, placement: string, segment: string, out: Result[], tag: string): Promise<void> {
  for (const c of CASES) {
    const n = count(c);
    const lanes = await Promise.all(Array.from({ length: c.inflight }, () => client.allocBuffer(c.size * c.batch)));
    for (const l of lanes) for (let i = 0; i < l.buffer.length; i += 4096) l.buffer[i] = (i >> 12) & 0xff;
    const key = (i: number) => `${tag}-${c.name.replace(/\W+/g, '')}-${i}`;
    let lane = 0;
    const nextLane = () => lanes[lane++ % lanes.length].buffer;
    const config = { preferred_segment: segment };
    const put = await measure(n, c.size, c.inflight, c.batch, async (first) => {
      const buf = nextLane();
      if (c.batch === 1) return client.put(key(first), buf.subarray(0, c.size), config);
      const items = Array.from({ length: Math.min(c.batch, n - first) }, (_, k) => ({ key: key(first + k), value: buf.subarray(k * c.size, (k + 1) * c.size), config }));
      const r = await client.putBatch(items);
      const bad = r.find((x) => x.error)?.error;
      if (bad) throw bad;
    });
    const read = () =>
      measure(n, c.size, c.inflight, c.batch, async (first) => {
        const buf = nextLane();
        if (c.batch === 1) return void (await client.getInto(key(first), buf.subarray(0, c.size)));
        const items = Array.from({ length: Math.min(c.batch, n - first) }, (_, k) => ({ key: key(first + k), target: buf.subarray(k * c.size, (k + 1) * c.size) }));
        const r = await client.getIntoBatch(items);
        const bad = r.find((x) => x.error)?.error;
        if (bad) throw bad;
      });
    const first = await read();
    const again = await read();
    out.push({ client: name, placement, row: `put ${c.name}`, r: put });
    out.push({ client: name, placement, row: `get ${c.name} (first read)`, r: first });
    out.push({ client: name, placement, row: `get ${c.name} (repeated)`, r: again });
    for (const l of lanes) l.release();
    printRows(out.slice(-3));
  }
  await sleep(LEASE_TTL_MS + 100); // the reads' leases must run out before the objects can go
  await client.removeByRegex(`^${tag}-`);
}

function printRows(rows: Result[]): void {
  for (const x of rows) {
    console.log(
      ` ${x.client.padEnd(10)} ${x.placement.padEnd(8)} ${x.row.padEnd(34)} ${x.r.opsPerSec.toFixed(0).padStart(9)} ops/s ${x.r.gbps.toFixed(3).padStart(8)} GB/s  p50 ${x.r.p50ms.toFixed(3)} ms  p99 ${x.r.p99ms.toFixed(3)} ms`,
    );
  }
}

/** The Python dummy client's bench (clients/python/bench/bench_dummy.py) in its venv, when there is one. */
async function runPython(socket: string, segment: string, placement: string, out: Result[]): Promise<boolean> {
  const python = join(process.cwd(), 'clients/python/.venv/bin/python');
  const script = join(process.cwd(), 'clients/python/bench/bench_dummy.py');
  if (!existsSync(python) || !existsSync(script)) return false;
  const child = spawn(python, [script, '--socket', socket, '--preferred-segment', segment, '--bytes-per-row', String(BYTES_PER_ROW)], { stdio: ['ignore', 'pipe', 'inherit'] });
  for await (const line of createInterface({ input: child.stdout })) {
    let j: { case?: string; ops_per_s?: number; gb_per_s?: number; p50_us?: number; p99_us?: number; local_reads?: { hits: number; fallbacks: number } };
    try {
      j = JSON.parse(line);
    } catch {
      continue;
    }
    if (j.local_reads) console.log(` python (${placement}) local reads: ${j.local_reads.hits} hits, ${j.local_reads.fallbacks} fallbacks`);
    if (!j.case) continue;
    const res: Result = {
      client: 'python',
      placement,
      row: j.case,
      r: { opsPerSec: j.ops_per_s ?? NaN, gbps: j.gb_per_s ?? NaN, p50ms: (j.p50_us ?? NaN) / 1000, p99ms: (j.p99_us ?? NaN) / 1000 },
    };
    out.push(res);
    printRows([res]);
  }
  await new Promise((r) => child.once('exit', r));
  return true;
}

async function main(): Promise<void> {
  const cluster = await sidecarCluster(LEASE_TTL_MS);
  const [a, b] = cluster.services;
  const embedded = await Client.setup(cluster.clientConfig({ local_buffer_size: 768 * MiB }), { bufferPool: { acquireTimeoutMs: 60_000 } });
  const dummy = await DummyClient.connect({ socketPath: a.socket, bufferSize: 768 * MiB, bufferPool: { acquireTimeoutMs: 60_000 } });
  const stop = async () => {
    await dummy.close().catch(() => {});
    await embedded.close().catch(() => {});
    await cluster.stop();
  };
  process.on('SIGINT', () => void stop().finally(() => process.exit(130)));
  try {
    console.log(`sidecar bench: master ${cluster.master.rpc}; store_service A ${a.endpoint} (dummy clients' real client, socket ${a.socket}); store_service B ${b.endpoint}`);
    console.log(`placement "in A": objects in A's own segment; "in B": in the other store service's. Values in allocBuffer memory (shared with A for dummies).`);
    console.log(`machine: ${cpus().length} cores, load average ${loadavg()[0].toFixed(1)}; ${BYTES_PER_ROW / MiB} MiB or 3000 ops per row\n`);
    const out: Result[] = [];
    // Warm-up (JIT, connections, shm grants and the fill-in of their page tables, which a thread
    // does once per peer segment: docs/native.md), on both placements, not reported.
    for (const [p, seg] of [
      ['A', a.segment],
      ['B', b.segment],
    ] as const) {
      await runClient('warm-up', embedded, p, seg, [], `warm-e${p}`);
      await runClient('warm-up', dummy, p, seg, [], `warm-d${p}`);
    }
    // The TS dummy writes and reads same-host memory itself, so A has not yet served a put or a
    // first read for a dummy: its code for them would be compiled (JIT), and its own shm grants
    // of A's and B's segments made and filled in (docs/native.md), in the first measured rows
    // that go through it (the Python client's). Run them now through a dummy that sends
    // everything to A, and wait until A is idle again.
    const viaA = await DummyClient.connect({ socketPath: a.socket, bufferSize: 768 * MiB, localReads: false, bufferPool: { acquireTimeoutMs: 60_000 } });
    try {
      for (const [p, seg] of [
        ['A', a.segment],
        ['B', b.segment],
      ] as const) {
        await runClient('warm-up', viaA, p, seg, [], `warm-a${p}`);
      }
    } finally {
      await viaA.close();
    }
    if (a.proc.pid !== undefined) console.log(`(A idle ${await untilIdle(a.proc.pid)} ms after the warm-up)`);
    let python = true;
    for (const [placement, segment] of [
      ['in A', a.segment],
      ['in B', b.segment],
    ] as const) {
      await runClient('embedded', embedded, placement, segment, out, `e-${placement.slice(-1)}`);
      await runClient('ts-dummy', dummy, placement, segment, out, `d-${placement.slice(-1)}`);
      if (python) python = await runPython(a.socket, segment, placement, out);
    }
    if (!python) console.log(' (python: clients/python/.venv not found; `make test-python` creates it)');

    const memCold = await memcpyGbps(4 * MiB, COLD_SPAN);
    const memHot = await memcpyGbps(4 * MiB);
    console.log(`\nmemcpy 4 MiB: cold ${memCold.toFixed(2)} GB/s, hot ${memHot.toFixed(2)} GB/s (load average now ${loadavg()[0].toFixed(1)})`);
    console.log('\nratios [targets]:');
    const find = (client: string, placement: string, row: string) => out.find((x) => x.client === client && x.placement === placement && x.row === row)?.r;
    for (const client of ['ts-dummy', 'python']) {
      for (const placement of ['in A', 'in B']) {
        for (const row of ['put 4 MiB x1', 'get 4 MiB x1 (first read)']) {
          const r = find(client, placement, row);
          if (r) console.log(` ${client} ${placement} ${row}: ${r.gbps.toFixed(2)} GB/s = ${(r.gbps / memCold).toFixed(2)}x memcpy (cold) [>= 0.6x]`);
        }
      }
    }
    for (const client of ['ts-dummy', 'python']) {
      for (const placement of ['in A', 'in B']) {
        const ratios = out
          .filter((x) => x.client === client && x.placement === placement)
          .map((x) => {
            const e = find('embedded', placement, x.row);
            return e ? `${x.row}: ${(x.r.opsPerSec / e.opsPerSec).toFixed(2)}x` : undefined;
          })
          .filter(Boolean);
        if (ratios.length) console.log(` ${client} / embedded, ${placement} [>= 0.9x each]: ${ratios.join('; ')}`);
      }
    }
    const lr = dummy.localReadStats;
    console.log(
      ` ts-dummy local reads (no message to the real client): ${lr.hits} hits (${lr.direct} of them first reads looked up at the master here), ${lr.fallbacks} fallbacks, ${lr.directFallbacks} first reads through the real client`,
    );
    const dp = dummy.directPutStats;
    console.log(` ts-dummy puts written here (no message to the real client): ${dp.directPuts}, ${dp.directPutFallbacks} through the real client after all`);
    for (const placement of ['in A', 'in B']) {
      for (const row of ['get 4 KiB x1 (first read)', 'get 4 KiB x1 (repeated)']) {
        const r = find('python', placement, row);
        if (r) console.log(` python ${placement} ${row}: ${r.opsPerSec.toFixed(0)} ops/s [>= 10,000]`);
      }
    }
  } finally {
    await stop();
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`sidecar-bench: ${(e as Error).stack ?? e}\n`);
    process.exit(1);
  },
);
