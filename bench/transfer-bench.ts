// Store transfer benchmark (`npm run bench:transfer` after `npm run build`); not a test, asserts
// nothing. Three processes on 127.0.0.1: a store_master, one store_service holding the memory, and
// this process as the client. Put and Get of 4 KiB .. 16 MiB, single ops with 1 and 8 in flight
// and batches of 8, with GB/s, ops/s, p50/p99. In the same run, the peers: (a) the native raw TCP
// pump between two processes, (b) memcpy of the same sizes, (c) redis-benchmark SET/GET against a
// redis-server started here; then the ratios the targets are stated in. memcpy is given twice:
// cache-hot (one pair of buffers, fits the LLC) and cold (cycling over 256 MiB, above the LLC, as a
// Get of a value last touched long ago); the ratios use the cold figure. Every figure is bytes
// (or ops) over the elapsed wall time of its row. A warm-up (JIT, connections, shm grants) runs
// first and is not measured; objects are removed between sizes so every row has room. Whatever
// way it stops (the end, an error, SIGINT to it alone, its output closed), it stops the processes
// it started (bench-lifecycle.ts).
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { cpus, loadavg } from 'node:os';
import { createServer } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { addon } from '../native/addon.js';
import { Client } from '../client/client.js';
import { LocalCluster } from '../sidecar/local-cluster.js';
import { fmtSize, KiB, measure, memcpyGbps, MiB, type Row } from './bench-util.js';
import { benchArgs, BenchLifecycle } from './bench-lifecycle.js';

const SIZES = [4 * KiB, 64 * KiB, MiB, 4 * MiB, 16 * MiB];
const BATCH = 8;
const BYTES_PER_ROW = Number(process.env.BENCH_BYTES ?? 192 * MiB);
/** The store service's segment (--global_segment_size). */
const SEGMENT_SIZE = process.env.BENCH_SEGMENT_SIZE ?? '3GB';
const USAGE = `Usage: npm run bench:transfer   (after npm run build; no arguments)

Starts a store_master and a store_service on 127.0.0.1 (and redis-server when installed), measures
Put/Get of 4 KiB .. 16 MiB from this process against them and the peers (raw TCP pump, memcpy,
redis), prints the figures, and stops everything it started, also on SIGINT or when its output is
closed. Environment:
  BENCH_BYTES          bytes moved per row (default ${192 * MiB})
  BENCH_SEGMENT_SIZE   the store service's segment (default 3GB)`;
/** memcpy 'cold': the span it cycles over, well above this machine's LLC (32 MiB here). */
const COLD_SPAN = 256 * MiB;
/** Read-lease TTL of the bench's master: objects read are removable (to make room) this long after. */
const LEASE_TTL_MS = 2000;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const run = promisify(execFile);

const opsFor = (size: number) => Math.max(24, Math.min(3000, Math.floor(BYTES_PER_ROW / size)));

async function freePort(): Promise<number> {
  const s = createServer().listen(0, '127.0.0.1');
  await once(s, 'listening');
  const p = (s.address() as { port: number }).port;
  s.close();
  return p;
}

/** Pump peer: a separate process holding the raw C++ pump listener. */
function runPumpPeer(): void {
  const port = addon().rawPumpListen('127.0.0.1');
  process.stdout.write(`${port}\n`);
  process.stdin.on('data', () => {});
  process.stdin.on('end', () => process.exit(0));
}

async function pumpGbps(endpoint: string, size: number): Promise<number> {
  const count = Math.max(20, Math.floor((256 * MiB) / size));
  await addon().rawPumpRun(endpoint, size, Math.min(count, 50), 'stream');
  const s = await addon().rawPumpRun(endpoint, size, count, 'stream');
  return (size * count) / s / 1e9;
}

/** Unmeasured warm-up: JIT of client and master, the engine's connections and shm grants. */
async function warmUp(client: Client): Promise<number> {
  let ops = 0;
  for (const [size, n] of [
    [4 * KiB, 600],
    [64 * KiB, 100],
    [4 * MiB, 16],
  ] as const) {
    const v = randomBytes(size);
    const lease = await client.allocBuffer(size);
    for (let i = 0; i < n; i++) {
      await client.put(`warm-${size}-${i}`, v);
      await client.get(`warm-${size}-${i}`);
      await client.getInto(`warm-${size}-${i}`, lease.buffer);
      await client.isExist(`warm-${size}-${i}`);
      ops += 4;
    }
    lease.release();
    await client.removeByRegex(`^warm-${size}-`);
  }
  return ops;
}

/** redis-benchmark SET/GET ops/s for a value size and a client count, against our own redis-server. */
async function redisOps(port: number, size: number, clients: number): Promise<{ set: number; get: number } | undefined> {
  const n = Math.max(200, Math.min(20000, Math.floor((256 * MiB) / size)));
  try {
    const { stdout } = await run('redis-benchmark', ['-p', String(port), '-d', String(size), '-t', 'set,get', '-n', String(n), '-P', '1', '-c', String(clients), '-q'], {
      maxBuffer: 16 * MiB,
    });
    const last = (name: string) => {
      const all = [...stdout.matchAll(new RegExp(`${name}: ([0-9.]+) requests per second`, 'g'))];
      return all.length ? Number(all[all.length - 1][1]) : NaN;
    };
    return { set: last('SET'), get: last('GET') };
  } catch {
    return undefined;
  }
}

async function main(life: BenchLifecycle): Promise<void> {
  const pumpPeer = spawn(process.execPath, [fileURLToPath(import.meta.url), '--pump-peer'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const pumpExited = once(pumpPeer, 'exit');
  life.own(
    'pump peer',
    async () => {
      pumpPeer.stdin.end(); // it exits when its stdin ends
      if (pumpPeer.exitCode === null && pumpPeer.signalCode === null) await pumpExited;
    },
    () => pumpPeer.kill('SIGKILL'),
  );
  const pumpPort = await new Promise<number>((resolve, reject) => {
    createInterface({ input: pumpPeer.stdout }).once('line', (l) => resolve(Number(l)));
    pumpPeer.once('exit', (c) => reject(new Error(`pump peer exited (${c})`)));
  });
  let redis: ChildProcess | undefined;
  const redisPort = await freePort();
  try {
    redis = spawn('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'pipe'] });
    redis.on('error', () => (redis = undefined));
    await new Promise<void>((resolve) => {
      let out = '';
      redis!.stdout!.on('data', (d) => {
        out += d;
        if (/Ready to accept connections/.test(out)) resolve();
      });
      redis!.once('exit', () => resolve());
      redis!.once('error', () => resolve());
    });
    if (redis && redis.exitCode !== null) redis = undefined;
  } catch {
    redis = undefined;
  }
  if (redis) {
    const r = redis;
    const exited = once(r, 'exit');
    life.own(
      'redis-server',
      async () => {
        if (r.exitCode !== null || r.signalCode !== null) return;
        r.kill('SIGTERM');
        await exited;
      },
      () => r.kill('SIGKILL'),
    );
  }

  const cluster = await LocalCluster.start({ storeServices: 1, segmentSize: SEGMENT_SIZE, masterArgs: [`--default_kv_lease_ttl=${LEASE_TTL_MS}ms`] });
  life.own(
    'store_master and store_service',
    () => cluster.stop(),
    () => cluster.killAllNow(),
  );
  const client = await Client.setup(cluster.clientConfig({ local_buffer_size: 320 * MiB }), { bufferPool: { acquireTimeoutMs: 60_000 } });
  life.own('client', () => client.close());

  try {
    console.log(`transfer bench: master ${cluster.master.rpc}, store_service ${cluster.services[0].endpoint} (separate processes), client = this process`);
    console.log(
      `Put = PutStart + staging copy + engine WRITE + PutEnd; Get = GetReplicaList + engine READ (into a result-arena Buffer from 32 KiB, else staging + copy out); batch = ${BATCH} objects per call, 1 call in flight; zcopy = put from / getInto a registered allocBuffer lease`,
    );
    console.log(`p50/p99 are per call (a batch call moves ${BATCH} objects); machine: ${cpus().length} cores, load average ${loadavg()[0].toFixed(1)}`);
    console.log(`warm-up: ${await warmUp(client)} ops, not measured\n`);
    const results = new Map<string, Row>();
    console.log(' op    size      mode        GB/s     ops/s    p50 ms    p99 ms');
    for (const size of SIZES) {
      const value = randomBytes(size);
      const n = opsFor(size);
      const lease = await client.allocBuffer(size);
      value.copy(lease.buffer);
      for (const mode of ['single x1', 'single x8', `batch ${BATCH}`, 'zcopy x1'] as const) {
        const tag = `${size}-${mode.replace(' ', '')}`;
        const key = (i: number) => `b-${tag}-${i}`;
        const inflight = mode === 'single x8' ? 8 : 1;
        const per = mode.startsWith('batch') ? BATCH : 1;
        const zc = mode === 'zcopy x1';
        const put = await measure(n, size, inflight, per, async (first) => {
          if (per === 1) return client.put(key(first), zc ? lease.buffer : value);
          const r = await client.putBatch(Array.from({ length: Math.min(per, n - first) }, (_, k) => ({ key: key(first + k), value })));
          const bad = r.find((x) => x.error)?.error;
          if (bad) throw bad;
        });
        const get = await measure(n, size, inflight, per, async (first) => {
          if (per === 1) {
            if (zc) await client.getInto(key(first), lease.buffer);
            else await client.get(key(first));
            return;
          }
          const r = await client.getBatch(Array.from({ length: Math.min(per, n - first) }, (_, k) => key(first + k)));
          const bad = r.find((x) => x.error)?.error;
          if (bad) throw bad;
        });
        for (const [op, r] of [
          ['put', put],
          ['get', get],
        ] as const) {
          results.set(`${op}-${size}-${mode}`, r);
          console.log(
            ` ${op.padEnd(5)} ${fmtSize(size).padStart(8)}  ${mode.padEnd(10)} ${r.gbps.toFixed(3).padStart(8)} ${r.opsPerSec.toFixed(0).padStart(9)} ${r.p50ms.toFixed(3).padStart(9)} ${r.p99ms.toFixed(3).padStart(9)}`,
          );
        }
      }
      lease.release();
      // Room for the next size: the objects just read are removable once their leases ran out.
      await sleep(LEASE_TTL_MS + 100);
      await client.removeByRegex('^b-');
    }

    // A client whose own segment holds the replica: the Get is a memcpy in this process. Local
    // memcpy is off by default (MC_STORE_MEMCPY=0 per the spec), so this client alone gets
    // MC_STORE_MEMCPY=1 through its env option; the other clients keep the default.
    const local = await Client.setup(cluster.clientConfig({ global_segment_size: 1024 * MiB, local_buffer_size: 64 * MiB }), {
      env: { ...process.env, MC_STORE_MEMCPY: '1' },
    });
    const own = local.mountedSegments[0].name;
    const localRows = new Map<number, Row>();
    const localIntoRows = new Map<number, Row>();
    for (const size of SIZES) {
      const value = randomBytes(size);
      const n = Math.min(opsFor(size), Math.floor((160 * MiB) / size));
      for (let i = 0; i < n; i++) await local.put(`own-${size}-${i}`, value, { preferred_segment: own });
      // The reads cycle over the n objects several times: the span (>= 160 MiB, above the LLC) keeps
      // them cold like the memcpy peer, and enough samples keep one GC pause from deciding the row.
      const reads = Math.max(n, Math.min(5 * n, 2000));
      const target = await local.allocBuffer(size);
      await local.getInto(`own-${size}-0`, target.buffer); // warm-up (JIT of this path)
      localRows.set(size, await measure(reads, size, 1, 1, async (i) => void (await local.get(`own-${size}-${i % n}`))));
      localIntoRows.set(size, await measure(reads, size, 1, 1, async (i) => void (await local.getInto(`own-${size}-${i % n}`, target.buffer))));
      target.release();
      await sleep(LEASE_TTL_MS + 100); // the leases of the reads just made must run out first
      await local.removeByRegex('^own-');
    }
    await local.close();

    // Checksums on (the default) against off. Two clients of one process do not run alike (the
    // one set up second measured up to 20% slower here, checksums or not), so the comparison is made
    // with two pairs set up in opposite orders, in rounds whose order alternates; the cost is the
    // median of the per-round ratios over both pairs (docs/integrity.md).
    const checksumRows: { size: number; op: string; on: number; off: number; cost: number }[] = [];
    const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
    const setupPair = async (onFirst: boolean) => {
      const mk = (checksums: boolean) => Client.setup(cluster.clientConfig({ local_buffer_size: 160 * MiB }), { bufferPool: { acquireTimeoutMs: 60_000 }, checksums });
      const first = await mk(onFirst);
      const second = await mk(!onFirst);
      return onFirst ? { on: first, off: second } : { on: second, off: first };
    };
    const pairs = [await setupPair(true), await setupPair(false)];
    for (const size of [64 * KiB, 4 * MiB]) {
      const value = randomBytes(size);
      const n = Math.min(opsFor(size), 250);
      const gbps = { put: { on: [] as number[], off: [] as number[] }, get: { on: [] as number[], off: [] as number[] } };
      for (let round = 0; round < 6; round++) {
        const pair = pairs[round % 2];
        const order = (round >> 1) % 2 === 0 ? (['on', 'off'] as const) : (['off', 'on'] as const);
        for (const mode of order) {
          const c = pair[mode];
          const tag = `cs-${size}-${round}-${mode}`;
          gbps.put[mode].push((await measure(n, size, 1, 1, (i) => c.put(`${tag}-${i}`, value))).gbps);
          gbps.get[mode].push((await measure(n, size, 1, 1, async (i) => void (await c.get(`${tag}-${i}`)))).gbps);
        }
        await sleep(LEASE_TTL_MS + 100);
        await pair.on.removeByRegex('^cs-');
      }
      for (const op of ['put', 'get'] as const) {
        const { on, off } = gbps[op];
        checksumRows.push({ size, op, on: median(on), off: median(off), cost: median(on.map((x, i) => 1 - x / off[i])) });
      }
    }
    for (const p of pairs) {
      await p.on.close();
      await p.off.close();
    }

    console.log('\npeers measured in this run:');
    const pump = new Map<number, number>();
    const mem = new Map<number, number>();
    const memHot = new Map<number, number>();
    const red = new Map<number, { c1?: { set: number; get: number }; c8?: { set: number; get: number } }>();
    for (const size of SIZES) {
      pump.set(size, await pumpGbps(`127.0.0.1:${pumpPort}`, size));
      memHot.set(size, await memcpyGbps(size));
      mem.set(size, await memcpyGbps(size, COLD_SPAN));
      if (redis) red.set(size, { c1: await redisOps(redisPort, size, 1), c8: await redisOps(redisPort, size, 8) });
    }
    console.log(' size      pump GB/s  memcpy hot/cold GB/s  redis SET c1/c8 GB/s   redis GET c1/c8 GB/s');
    for (const size of SIZES) {
      const r = red.get(size);
      const g = (x?: number) => (x === undefined || Number.isNaN(x) ? '   -  ' : ((x * size) / 1e9).toFixed(3).padStart(6));
      console.log(
        ` ${fmtSize(size).padStart(8)} ${pump.get(size)!.toFixed(3).padStart(10)} ${memHot.get(size)!.toFixed(3).padStart(10)} / ${mem.get(size)!.toFixed(3).padStart(7)}   ${g(r?.c1?.set)} / ${g(r?.c8?.set)}        ${g(r?.c1?.get)} / ${g(r?.c8?.get)}`,
      );
    }
    if (!redis) console.log(' (redis-server not found: Redis columns skipped)');

    console.log(`\nratios (targets in brackets; memcpy = cold; load average now ${loadavg()[0].toFixed(1)}):`);
    const M4 = 4 * MiB;
    for (const op of ['get', 'put'] as const) {
      for (const mode of ['single x1', 'single x8', `batch ${BATCH}`, 'zcopy x1']) {
        const r = results.get(`${op}-${M4}-${mode}`)!;
        const rr = red.get(M4)?.[mode === 'single x8' ? 'c8' : 'c1'];
        const redisGbps = rr ? ((op === 'get' ? rr.get : rr.set) * M4) / 1e9 : NaN;
        console.log(
          ` 4 MiB ${op} ${mode.padEnd(10)}: ${(r.gbps / pump.get(M4)!).toFixed(2)}x pump [>= 0.8x], ${Number.isNaN(redisGbps) ? '-' : (r.gbps / redisGbps).toFixed(2)}x redis ${op === 'get' ? 'GET' : 'SET'} (${mode === 'single x8' ? '8' : '1'} client${mode === 'single x8' ? 's' : ''}) [>= 1x]`,
        );
      }
    }
    for (const op of ['get', 'put'] as const) {
      for (const mode of ['single x1', 'zcopy x1']) {
        const r = results.get(`${op}-${M4}-${mode}`)!;
        console.log(` same host, 4 MiB ${op} ${mode.padEnd(10)}: ${(r.gbps / mem.get(M4)!).toFixed(2)}x memcpy [>= 0.5x]`);
      }
    }
    for (const r of checksumRows) {
      console.log(
        ` checksums, ${fmtSize(r.size)} ${r.op} x1: on ${r.on.toFixed(3)} GB/s, off ${r.off.toFixed(3)} GB/s (medians): cost ${(r.cost * 100).toFixed(1)}% [< 5%] (median of 6 rounds' ratios, two client pairs)`,
      );
    }
    const small = results.get(`get-${4 * KiB}-single x1`)!;
    console.log(` 4 KiB get, 1 in flight: ${small.opsPerSec.toFixed(0)} ops/s [>= 8000], p99 ${small.p99ms.toFixed(3)} ms [< 1 ms]`);
    const smallZc = results.get(`get-${4 * KiB}-zcopy x1`)!;
    console.log(` 4 KiB getInto registered, 1 in flight: ${smallZc.opsPerSec.toFixed(0)} ops/s, p99 ${smallZc.p99ms.toFixed(3)} ms`);
    for (const size of SIZES) {
      const r = localRows.get(size)!;
      const i = localIntoRows.get(size)!;
      console.log(
        ` own-segment (MC_STORE_MEMCPY=1) ${fmtSize(size).padStart(8)}: getInto ${i.gbps.toFixed(3)} GB/s = ${(i.gbps / mem.get(size)!).toFixed(2)}x memcpy [>= 0.7x] (p50 ${i.p50ms.toFixed(3)} ms); ` +
          `get() ${r.gbps.toFixed(3)} GB/s = ${(r.gbps / mem.get(size)!).toFixed(2)}x (new result Buffer each call)`,
      );
    }
  } finally {
    await life.stop();
  }
}

if (process.argv.includes('--pump-peer')) runPumpPeer();
else {
  benchArgs('transfer-bench', USAGE, process.argv.slice(2));
  const life = new BenchLifecycle('transfer-bench');
  main(life).then(
    () => life.exit(0),
    (e) => {
      process.stderr.write(`transfer-bench: ${(e as Error).stack ?? e}\n`);
      void life.exit(1);
    },
  );
}
