// What a dummy client's hop to its real client costs, per process (`npm run bench:dummy-hop`
// after `npm run build`; not a test). The calls that need the real client (puts, first reads,
// isExist) are made by the embedded Client, the TS DummyClient and the Python DummyClient
// against the cluster of bench:sidecar (master, store_service A: the dummies' real client, B: the
// segment the objects go to, BENCH_PLACEMENT=A to place them in A), and each row prints the rate
// and the CPU time per object of every process on the path (/proc schedstat, all threads):
// master, A, B and the calling process ("self": this bench's process for the embedded client and
// the TS dummy, the Python process for Python). A dummy's row against the embedded one shows what
// the hop costs: A's and self's CPU beyond the embedded client's own. Rows run ROUNDS times
// (BENCH_ROUNDS, default 3), alternating clients, and the median round is printed.
//
// A long-running client's caches of read locations (the real client's replica lists, a dummy's
// local-read locations: 65,536 each by default) are full. So the bench puts a pool of BENCH_POOL
// objects (default 120,000, 4 KiB) once, every client reads it once before its rows (not
// reported), and the last row reads the whole pool again in batches of 128: first reads (the
// reads before are older than the reuse window) at a sustained rate, with every cache at its
// bound and turning over.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Client } from '../client/client.js';
import { DummyClient } from '../client/dummy-client.js';
import type { StoreClient } from '../client/store-client.js';
import { sidecarCluster } from './sidecar-cluster.js';
import { KiB, measure, MiB } from './bench-util.js';
import { formatCpu, minorFaults, ProcessCpu } from './process-cpu.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const PLACEMENT = process.env.BENCH_PLACEMENT === 'A' ? 'A' : 'B';
const SCALE = Number(process.env.BENCH_SCALE ?? 1);
const POOL = Number(process.env.BENCH_POOL ?? 120_000);
const POOL_ROW = 'get batch 128 x 4 KiB (first read, pool)';

interface HopCase {
  name: string;
  inflight: number;
  batch: number;
  /** Objects per row. */
  n: number;
}

const CASES: HopCase[] = [
  { name: 'isExist x1', inflight: 1, batch: 1, n: 3000 },
  { name: 'put 4 KiB x1', inflight: 1, batch: 1, n: 3000 },
  { name: 'get 4 KiB x1 (first read)', inflight: 1, batch: 1, n: 3000 },
  { name: 'put 4 KiB x64', inflight: 64, batch: 1, n: 6400 },
  { name: 'get 4 KiB x64 (first read)', inflight: 64, batch: 1, n: 6400 },
  { name: 'put batch 128 x 4 KiB', inflight: 1, batch: 128, n: 8192 },
  { name: 'get batch 128 x 4 KiB (first read)', inflight: 1, batch: 128, n: 8192 },
]
  .map((c) => ({ ...c, n: Math.max(c.batch * 4, Math.round(c.n * SCALE)) }))
  .concat(POOL > 0 ? [{ name: POOL_ROW, inflight: 1, batch: 128, n: POOL }] : []);

interface Round {
  opsPerSec: number;
  cpu: Map<string, number>;
  /** Minor page faults per object of the real client A (a first write to fresh segment pages faults there). */
  faultsA: number;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** One round of every case through `client`; objects keyed by `tag`, the pool's by `pool`. */
async function runTs(client: StoreClient, tag: string, pool: string, segment: string, cpu: ProcessCpu, aPid: number, out: Map<string, Round>): Promise<void> {
  const config = { preferred_segment: segment };
  const size = 4 * KiB;
  const lanes = await Promise.all(Array.from({ length: 64 }, () => client.allocBuffer(size * 128)));
  for (const l of lanes) l.buffer.fill(7);
  let lane = 0;
  const nextLane = () => lanes[lane++ % lanes.length].buffer;
  const key = (c: string, i: number) => (c === 'pool' ? `${pool}-${i}` : `${tag}-${c}-${i}`);
  for (const c of CASES) {
    const verb = c.name.split(' ')[0];
    // puts and reads of a case's objects: the read rows read what the put row of their shape wrote
    const shape =
      c.name === POOL_ROW
        ? 'pool'
        : c.name
            .replace(/^(put|get) /, '')
            .replace(' (first read)', '')
            .replace(/\W+/g, '');
    const before = cpu.sample();
    const faults = minorFaults(aPid);
    const r = await measure(c.n, size, c.inflight, c.batch, async (first) => {
      const buf = nextLane();
      if (verb === 'isExist') return void (await client.isExist(key('exists', first % 64)));
      if (c.batch === 1) {
        if (verb === 'put') return client.put(key(shape, first), buf.subarray(0, size), config);
        return void (await client.getInto(key(shape, first), buf.subarray(0, size)));
      }
      const k = Math.min(c.batch, c.n - first);
      if (verb === 'put') {
        const res = await client.putBatch(Array.from({ length: k }, (_, j) => ({ key: key(shape, first + j), value: buf.subarray(j * size, (j + 1) * size), config })));
        const bad = res.find((x) => x.error)?.error;
        if (bad) throw bad;
      } else {
        const res = await client.getIntoBatch(Array.from({ length: k }, (_, j) => ({ key: key(shape, first + j), target: buf.subarray(j * size, (j + 1) * size) })));
        const bad = res.find((x) => x.error)?.error;
        if (bad) throw bad;
      }
    });
    out.set(c.name, { opsPerSec: r.opsPerSec, cpu: cpu.since(before, c.n), faultsA: (minorFaults(aPid) - faults) / c.n });
  }
  for (const l of lanes) l.release();
}

/** Puts the pool's `n` objects (128 per call). */
async function putPool(client: StoreClient, pool: string, segment: string, n: number): Promise<void> {
  const size = 4 * KiB;
  const lease = await client.allocBuffer(size * 128);
  for (let first = 0; first < n; first += 128) {
    const items = Array.from({ length: Math.min(128, n - first) }, (_, j) => ({
      key: `${pool}-${first + j}`,
      value: lease.buffer.subarray(j * size, (j + 1) * size),
      config: { preferred_segment: segment },
    }));
    const bad = (await client.putBatch(items)).find((x) => x.error)?.error;
    if (bad) throw bad;
  }
  lease.release();
}

/** Reads the pool once (128 per call): the client's caches of read locations fill up. */
async function readPool(client: StoreClient, pool: string, n: number): Promise<void> {
  const size = 4 * KiB;
  const lease = await client.allocBuffer(size * 128);
  for (let first = 0; first < n; first += 128) {
    await client.getIntoBatch(
      Array.from({ length: Math.min(128, n - first) }, (_, j) => ({ key: `${pool}-${first + j}`, target: lease.buffer.subarray(j * size, (j + 1) * size) })),
    );
  }
  lease.release();
}

/** One round through the Python dummy client (clients/python/bench/bench_dummy.py --hop-cases). */
async function runPython(python: string, socket: string, segment: string, tag: string, pool: string, pids: Map<string, number>, out: Map<string, Round>): Promise<void> {
  const script = join(process.cwd(), 'clients/python/bench/bench_dummy.py');
  const child = spawn(
    python,
    [script, '--socket', socket, '--preferred-segment', segment, '--hop-cases', '--prefix', tag, '--scale', String(SCALE), '--pool', pool, '--pool-size', String(POOL)],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  // the Python process reports its own CPU (its threads end with each row, taking their /proc time)
  const cpu = new ProcessCpu(pids);
  let before = cpu.sample();
  let faults = 0;
  for await (const line of createInterface({ input: child.stdout })) {
    let j: { start?: string; case?: string; ops_per_s?: number; objects?: number; cpu_us?: number };
    try {
      j = JSON.parse(line);
    } catch {
      continue;
    }
    if (j.start) {
      before = cpu.sample();
      faults = minorFaults(pids.get('A')!);
    } else if (j.case)
      out.set(j.case, {
        opsPerSec: j.ops_per_s ?? NaN,
        cpu: cpu.since(before, j.objects ?? 1).set('self', j.cpu_us ?? NaN),
        faultsA: (minorFaults(pids.get('A')!) - faults) / (j.objects ?? 1),
      });
  }
  await new Promise((r) => child.once('exit', r));
}

async function main(): Promise<void> {
  const cluster = await sidecarCluster(2000);
  const [a, b] = cluster.services;
  const segment = PLACEMENT === 'A' ? a.segment : b.segment;
  const embedded = await Client.setup(cluster.clientConfig({ local_buffer_size: 768 * MiB }), { bufferPool: { acquireTimeoutMs: 60_000 } });
  const dummy = await DummyClient.connect({ socketPath: a.socket, bufferSize: 768 * MiB, bufferPool: { acquireTimeoutMs: 60_000 } });
  const pids = new Map([
    ['master', cluster.master.proc.pid!],
    ['A', a.proc.pid!],
    ['B', b.proc.pid!],
  ]);
  const cpu = new ProcessCpu(new Map([...pids, ['self', process.pid]]));
  const python = join(process.cwd(), 'clients/python/.venv/bin/python');
  const pool = `pool-${process.pid}`;
  const clients: [string, (tag: string, out: Map<string, Round>) => Promise<void>][] = [
    ['embedded', (tag, out) => runTs(embedded, tag, pool, segment, cpu, a.proc.pid!, out)],
    ['ts-dummy', (tag, out) => runTs(dummy, tag, pool, segment, cpu, a.proc.pid!, out)],
  ];
  if (existsSync(python)) clients.push(['python', (tag, out) => runPython(python, a.socket, segment, tag, pool, pids, out)]);
  try {
    console.log(`dummy hop bench: objects in ${PLACEMENT}; ${ROUNDS} rounds (median printed); load average ${loadavg()[0].toFixed(1)}`);
    // the pool, then a warm-up round (JIT, connections, grants), not reported; then the TS
    // clients read the pool once (the Python process is new each round: it reads it before its rows)
    await putPool(embedded, pool, segment, POOL);
    for (const [name, run] of clients) await run(`warm-${name}`, new Map());
    await readPool(embedded, pool, POOL);
    await readPool(dummy, pool, POOL);
    const rounds = new Map<string, Map<string, Round>[]>(clients.map(([name]) => [name, []]));
    for (let r = 0; r < ROUNDS; r++) {
      for (const [name, run] of clients) {
        const out = new Map<string, Round>();
        await run(`r${r}-${name}-${process.pid}`, out);
        rounds.get(name)!.push(out);
      }
      // let the reads' leases run out, then drop the round's objects
      await new Promise((res) => setTimeout(res, 2100));
      await embedded.removeByRegex(`^r${r}-`);
    }
    console.log(`load average now ${loadavg()[0].toFixed(1)}\n`);
    await embedded.removeByRegex('^(pool|warm)-');
    console.log(`${'client'.padEnd(9)} ${'row'.padEnd(41)} ${'obj/s'.padStart(8)} ${'x embedded'.padStart(10)}  CPU us per object`);
    for (const c of CASES) {
      const base = median(rounds.get('embedded')!.map((o) => o.get(c.name)?.opsPerSec ?? NaN));
      for (const [name] of clients) {
        const rs = rounds
          .get(name)!
          .map((o) => o.get(c.name))
          .filter((x): x is Round => x !== undefined);
        if (rs.length === 0) continue;
        const rate = median(rs.map((x) => x.opsPerSec));
        const per = new Map([...rs[0].cpu.keys()].map((k) => [k, median(rs.map((x) => x.cpu.get(k) ?? NaN))]));
        const total = [...per.values()].reduce((s, v) => s + v, 0);
        const faultsA = median(rs.map((x) => x.faultsA));
        console.log(
          `${name.padEnd(9)} ${c.name.padEnd(41)} ${rate.toFixed(0).padStart(8)} ${(rate / base).toFixed(2).padStart(9)}x  ${formatCpu(per)}; total ${total.toFixed(1)}; A faults ${faultsA.toFixed(2)}`,
        );
      }
    }
  } finally {
    await dummy.close().catch(() => {});
    await embedded.close().catch(() => {});
    await cluster.stop();
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`dummy-hop-bench: ${(e as Error).stack ?? e}\n`);
    process.exit(1);
  },
);
