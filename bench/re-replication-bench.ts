// Re-replication benchmark (`npm run bench:rereplication` after `npm run build`); not a test,
// asserts nothing. Processes on 127.0.0.1: a store_master (--client_ttl=2s) and three store
// services. This process's client puts objects with replica_num 2, one service is killed
// (SIGKILL), and the time from the master noticing (the "lost a replica" log line) to the last
// copy reported ("re-replication done") gives the copy rate. That time includes the wait for the
// live clients' next heartbeat (up to 1 s: copies are handed out in Ping replies), so more objects
// give a truer rate. Sizes: BENCH_OBJECTS (default 1500) objects of BENCH_SIZE bytes (default 1 MiB);
// segments are sized to fit (about 2 GB each at the defaults). BENCH_DEBUG=1 echoes the processes'
// logs and prints the master's summary.
// In the same run, the peer: the same client putting the same bytes with replica_num 1 at 16 in
// flight (a put moves each byte once; a copy reads it from one segment and writes it to another).
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { Client } from '../client/client.js';
import { LocalCluster } from '../sidecar/local-cluster.js';
import { measure, MiB } from './bench-util.js';

const OBJECTS = Number(process.env.BENCH_OBJECTS ?? 1500);
const SIZE = Number(process.env.BENCH_SIZE ?? MiB);

async function main(): Promise<void> {
  const segment = Math.ceil((OBJECTS * SIZE * 2.5) / MiB / 2); // room for 2 replicas + the peer's puts over 2 live segments
  const cluster = await LocalCluster.start({
    storeServices: 3,
    segmentSize: `${segment}MB`,
    masterArgs: ['--client_ttl=2s'],
    echo: process.env.BENCH_DEBUG ? (l) => console.log(l) : undefined,
  });
  let client: Client | undefined;
  try {
    client = await Client.setup(cluster.clientConfig({ local_buffer_size: 64 * MiB }));
    const value = randomBytes(SIZE);
    const c = client;
    await measure(OBJECTS, SIZE, 16, 1, (i) => c.put(`obj-${i}`, value, { replica_num: 2 }));
    const peer = await measure(OBJECTS, SIZE, 16, 1, (i) => c.put(`peer-${i}`, value, { replica_num: 1 }));
    await c.removeAll();
    await measure(OBJECTS, SIZE, 16, 1, (i) => c.put(`obj-${i}`, value, { replica_num: 2 }));

    const dead = cluster.services[0];
    dead.proc.kill('SIGKILL');
    await cluster.master.waitFor(/objects lost a replica/);
    const start = performance.now();
    const lost = Number(/(\d+) objects lost a replica/.exec(cluster.master.output())![1]);
    await cluster.master.waitFor(/re-replication done/);
    const seconds = (performance.now() - start) / 1000;
    const summary = await cluster.admin('/metrics/summary');
    const copied = Number(/(\d+) copied/.exec(summary)![1]);
    const rate = (copied * SIZE) / seconds / 1e9;

    console.log(`re-replication: ${OBJECTS} objects of ${SIZE / MiB} MiB, replica_num 2, 3 store services, one killed (load ${loadavg()[0].toFixed(1)})`);
    console.log(`  objects that lost a replica: ${lost}; copied: ${copied} in ${seconds.toFixed(2)} s (from the master's notice to the last report; sweeps every 200 ms)`);
    console.log(`  copy rate:             ${rate.toFixed(2)} GB/s`);
    console.log(`  peer, put replica_num 1 x16: ${peer.gbps.toFixed(2)} GB/s`);
    console.log(`  ratio copy / put:      ${(rate / peer.gbps).toFixed(2)}x`);
    if (process.env.BENCH_DEBUG) console.log(summary);
  } finally {
    await client?.close();
    await cluster.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
