// Failover benchmark (`npm run bench:failover` after `npm run build`); not a test, asserts nothing.
// Per HA backend found on the machine (etcd, redis-server) and per --ha_commit_acks (1, then 0):
// a backend process and three store_master processes on 127.0.0.1, two clients with a segment
// each (checksums on) putting BENCH_OBJECTS objects (default 1000) of 4 KiB with two replicas,
// one at a time (put latency p50/p99). Then the leader is SIGKILLed and the clients go on: the
// time from the kill to the first successful put, and to the first successful get of an object
// put before, and how many of the committed objects are unreadable or wrong on the new leader.
// The failover time is mostly the election's: the old leader's lease must run out (5 s, or
// BENCH_HA_LEASE_MS passed as --ha_lease_ms).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '../client/client.js';
import { clusterEnv, distRoot, track, type ProcessHandle } from '../sidecar/local-cluster.js';

const OBJECTS = Number(process.env.BENCH_OBJECTS ?? 1000);
const LEASE_MS = Number(process.env.BENCH_HA_LEASE_MS ?? 5000);
const SIZE = 4096;
const have = (bin: string): boolean => spawnSync('sh', ['-c', `command -v ${bin}`]).status === 0;

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

interface Backend {
  name: string;
  masterArgs: string[];
  discovery: string;
}

class Run {
  readonly procs: ChildProcess[] = [];
  readonly dirs: string[] = [];

  start(name: string, cmd: string, args: string[]): ProcessHandle {
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: clusterEnv() });
    this.procs.push(p);
    return track(name, p);
  }

  async stop(): Promise<void> {
    const running = this.procs.filter((p) => p.exitCode === null && p.signalCode === null);
    for (const p of running) p.kill('SIGKILL');
    await Promise.all(running.map((p) => once(p, 'exit')));
    for (const d of this.dirs) rmSync(d, { recursive: true, force: true });
  }
}

async function etcd(run: Run): Promise<Backend> {
  const dir = mkdtempSync(join(tmpdir(), 'failover-bench-etcd-'));
  run.dirs.push(dir);
  const [client, peer] = [await freePort(), await freePort()];
  const endpoint = `127.0.0.1:${client}`;
  await run
    .start('etcd', 'etcd', [
      '--name=bench',
      `--data-dir=${dir}`,
      `--listen-client-urls=http://${endpoint}`,
      `--advertise-client-urls=http://${endpoint}`,
      `--listen-peer-urls=http://127.0.0.1:${peer}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${peer}`,
      `--initial-cluster=bench=http://127.0.0.1:${peer}`,
    ])
    .waitFor(/ready to serve client requests/);
  return { name: 'etcd', masterArgs: [`--etcd_endpoints=${endpoint}`, '--cluster_id=bench_etcd'], discovery: `etcd://${endpoint}/bench_etcd` };
}

async function redis(run: Run): Promise<Backend> {
  const port = await freePort();
  await run.start('redis', 'redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no']).waitFor(/Ready to accept connections/);
  const url = `redis://127.0.0.1:${port}`;
  return { name: 'redis', masterArgs: ['--ha_backend_type=redis', `--ha_backend_connstring=${url}`, '--cluster_id=bench_redis'], discovery: `${url}/bench_redis` };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? NaN;
}

/** Retries `op` until it succeeds; resolves with the ms from `t0`. */
async function firstSuccess(t0: number, op: () => Promise<unknown>): Promise<number> {
  for (;;) {
    try {
      await op();
      return performance.now() - t0;
    } catch {
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

async function scenario(makeBackend: (run: Run) => Promise<Backend>, acks: number): Promise<void> {
  const run = new Run();
  const clients: Client[] = [];
  try {
    const backend = await makeBackend(run);
    const main = join(distRoot(), 'master', 'main.js');
    const masters: ProcessHandle[] = [];
    for (let i = 0; i < 3; i++) {
      const h = run.start(`master-${i}`, process.execPath, [
        main,
        '--enable_ha=true',
        '--rpc_address=127.0.0.1',
        '--rpc_port=0',
        '--metrics_port=0',
        '--enable_metric_reporting=false',
        `--ha_commit_acks=${acks}`,
        `--ha_lease_ms=${LEASE_MS}`,
        ...backend.masterArgs,
      ]);
      await h.waitFor(/store_master listening/);
      masters.push(h);
    }
    const leader = masters[await Promise.race(masters.map((m, i) => m.waitFor(/HA: elected leader/).then(() => i)))];
    await leader.waitFor(/HA: standby .* synced[\s\S]*HA: standby .* synced/);
    for (let c = 0; c < 2; c++) {
      clients.push(
        await Client.setup(
          {
            local_hostname: '127.0.0.1',
            metadata_server: 'P2PHANDSHAKE',
            global_segment_size: Math.max(64, Math.ceil((OBJECTS * SIZE * 2.5) / 2 ** 20)) << 20,
            local_buffer_size: 16 << 20,
            protocol: 'tcp',
            master_server_address: backend.discovery,
          },
          { checksums: true, heartbeatIntervalMs: 200, log: () => {} },
        ),
      );
    }
    const values: Buffer[] = [];
    const lat: number[] = [];
    for (let i = 0; i < OBJECTS; i++) {
      const v = randomBytes(SIZE);
      const t = performance.now();
      await clients[i % 2].put(`obj-${i}`, v, { replica_num: 2 });
      lat.push((performance.now() - t) * 1000);
      values.push(v);
    }
    lat.sort((a, b) => a - b);
    const t0 = performance.now();
    leader.proc.kill('SIGKILL');
    const [putMs, getMs] = await Promise.all([firstSuccess(t0, () => clients[0].put('after-kill', Buffer.from('x'))), firstSuccess(t0, () => clients[1].get('obj-0'))]);
    let unreadable = 0;
    let wrong = 0;
    for (let i = 0; i < OBJECTS; i++) {
      const got = await clients[(i + 1) % 2].get(`obj-${i}`).catch(() => undefined);
      if (got === undefined) unreadable++;
      else if (!got.equals(values[i])) wrong++;
    }
    const us = (n: number): string => `${Math.round(n).toLocaleString('en-US')} us`;
    console.log(
      `${backend.name.padEnd(5)} --ha_commit_acks=${acks}: put (4 KiB, 2 replicas, 1 in flight) p50 ${us(percentile(lat, 0.5))} p99 ${us(percentile(lat, 0.99))}; ` +
        `after the leader's SIGKILL: first put ${(putMs / 1000).toFixed(2)} s, first get of an old object ${(getMs / 1000).toFixed(2)} s; ` +
        `lost ${unreadable} of ${OBJECTS} committed, wrong bytes in ${wrong}`,
    );
  } finally {
    for (const c of clients) await c.close().catch(() => undefined);
    await run.stop();
  }
}

async function main(): Promise<void> {
  console.log(`failover bench: ${OBJECTS} objects per run, --ha_lease_ms=${LEASE_MS}; load average ${loadavg()[0].toFixed(1)}; node ${process.version}`);
  const backends: [string, (run: Run) => Promise<Backend>][] = [];
  if (have('etcd')) backends.push(['etcd', etcd]);
  else console.log('etcd: not installed (apt-get install etcd-server): skipped');
  if (have('redis-server')) backends.push(['redis', redis]);
  else console.log('redis: not installed (apt-get install redis-server): skipped');
  for (const [, make] of backends) for (const acks of [1, 0]) await scenario(make, acks);
}

main().then(
  () => process.exit(0),
  (e: Error) => {
    console.error(`failover-bench failed: ${e.stack ?? e.message}`);
    process.exit(1);
  },
);
