// Copy and move task benchmark (`npm run bench:tasks` after `npm run build`); not a test, asserts
// nothing. Processes on 127.0.0.1: a store_master and three store services (a, b, c). This
// process's client puts BENCH_OBJECTS (default 1000) objects of BENCH_SIZE bytes (default 1 MiB)
// on a, then queues a copy task of each to b, then a move task of each from a to c, and times each
// phase from the first CreateCopyTask/CreateMoveTask to the last task seen finished (QueryTask
// polled every 20 ms: a benchmark may poll). The copies are made by the clients that offer to copy
// (the three services and this client), handed out in Ping replies like re-replication's, so the
// wait for their next heartbeat (up to 1 s) is part of the time. Also printed: the create rate
// (tasks queued per second, the master's side only) and, in the same run, the same client's put
// rate at 16 in flight as the peer. BENCH_DEBUG=1 echoes the processes' logs.
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from '../client/client.js';
import { LocalCluster } from '../sidecar/local-cluster.js';
import { measure, MiB } from './bench-util.js';

const OBJECTS = Number(process.env.BENCH_OBJECTS ?? 1000);
const SIZE = Number(process.env.BENCH_SIZE ?? MiB);

/** Queues one task per object with `create`, then waits until all finished; seconds for each part and the failures. */
async function phase(client: Client, create: (i: number) => Promise<number>): Promise<{ queued: number; total: number; failed: number }> {
  const start = performance.now();
  const ids: number[] = [];
  for (let i = 0; i < OBJECTS; i += 64) ids.push(...(await Promise.all(Array.from({ length: Math.min(64, OBJECTS - i) }, (_, j) => create(i + j)))));
  const queued = (performance.now() - start) / 1000;
  let open = ids;
  let failed = 0;
  while (open.length > 0) {
    const infos = await Promise.all(open.map((id) => client.queryTask(id)));
    failed += infos.filter((t) => t.state === 'failed').length;
    open = open.filter((_, k) => infos[k].state !== 'success' && infos[k].state !== 'failed');
    if (open.length > 0) await sleep(20);
  }
  return { queued, total: (performance.now() - start) / 1000, failed };
}

async function main(): Promise<void> {
  const segment = Math.ceil((OBJECTS * SIZE * 2.2) / MiB);
  const cluster = await LocalCluster.start({ storeServices: 3, segmentSize: `${segment}MB`, echo: process.env.BENCH_DEBUG ? (l) => console.log(l) : undefined });
  let client: Client | undefined;
  try {
    const [a, b, c] = cluster.services.map((s) => s.segment);
    client = await Client.setup(cluster.clientConfig({ local_buffer_size: 64 * MiB }));
    const cl = client;
    const value = randomBytes(SIZE);
    const peer = await measure(OBJECTS, SIZE, 16, 1, (i) => cl.put(`peer-${i}`, value, { replica_num: 1, preferred_segment: a }));
    await cl.removeAll();
    await measure(OBJECTS, SIZE, 16, 1, (i) => cl.put(`obj-${i}`, value, { replica_num: 1, preferred_segment: a }));

    const copy = await phase(cl, (i) => cl.createCopyTask(`obj-${i}`, [b]));
    const move = await phase(cl, (i) => cl.createMoveTask(`obj-${i}`, a, c));
    const gbps = (s: number): string => ((OBJECTS * SIZE) / s / 1e9).toFixed(2);

    console.log(`tasks: ${OBJECTS} objects of ${SIZE / MiB} MiB on one store service, 3 store services + this client copying (load ${loadavg()[0].toFixed(1)})`);
    console.log(
      `  copy a -> b:  queued in ${copy.queued.toFixed(2)} s (${(OBJECTS / copy.queued).toFixed(0)} tasks/s), all finished in ${copy.total.toFixed(2)} s: ${gbps(copy.total)} GB/s, ${copy.failed} failed`,
    );
    console.log(
      `  move a -> c:  queued in ${move.queued.toFixed(2)} s (${(OBJECTS / move.queued).toFixed(0)} tasks/s), all finished in ${move.total.toFixed(2)} s: ${gbps(move.total)} GB/s, ${move.failed} failed`,
    );
    console.log(`  peer, put replica_num 1 x16: ${peer.gbps.toFixed(2)} GB/s`);
    console.log(`  ratio copy / put: ${((OBJECTS * SIZE) / copy.total / 1e9 / peer.gbps).toFixed(2)}x`);
  } finally {
    await client?.close();
    await cluster.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
