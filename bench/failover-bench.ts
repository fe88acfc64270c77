// Failover benchmark (`npm run bench:failover` after `npm run build`); not a test, asserts nothing.
// Per HA backend (etcd and redis-server when installed; the test Kubernetes API server, in this
// process, always; BENCH_BACKENDS=etcd,redis,k8s picks some) and per --ha_commit_acks (1, then 0):
// three store_master processes on 127.0.0.1 electing through the backend (e2e/ha-backends.ts),
// two clients with a segment each (checksums on, the leader discovered through the backend)
// putting BENCH_OBJECTS objects (default 1000) of 4 KiB with two replicas, one at a time (put
// latency p50/p99). Then the leader is SIGKILLed and the clients go on: the time from the kill to
// the new leader's election (its log line), to its serving (after its in-sync record), to the
// first successful put and to the first successful get of an object put before, and how many of
// the committed objects are unreadable or wrong on the new leader. The failover time is mostly
// the election's: the old leader's lease must run out (the default 4 s, or BENCH_HA_LEASE_MS as --ha_lease_ms).
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { Client } from '../client/client.js';
import { clusterEnv, distRoot, type ProcessHandle } from '../sidecar/local-cluster.js';
import { have, Processes, type HaBackend } from '../e2e/ha-backends.js';
import { DEFAULT_TIMINGS } from '../master/ha/election.js';

const OBJECTS = Number(process.env.BENCH_OBJECTS ?? 1000);
const LEASE_MS = Number(process.env.BENCH_HA_LEASE_MS ?? DEFAULT_TIMINGS.leaseDurationMs);
const SIZE = 4096;

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

async function scenario(name: string, makeBackend: (ps: Processes) => Promise<HaBackend>, acks: number): Promise<void> {
  const ps = new Processes();
  const clients: Client[] = [];
  try {
    const backend = await makeBackend(ps);
    const main = join(distRoot(), 'master', 'main.js');
    const masters: ProcessHandle[] = [];
    for (let i = 0; i < 3; i++) {
      const h = ps.start(
        `master-${i}`,
        process.execPath,
        [
          main,
          '--enable_ha=true',
          '--rpc_address=127.0.0.1',
          '--rpc_port=0',
          '--metrics_port=0',
          '--enable_metric_reporting=false',
          `--ha_commit_acks=${acks}`,
          `--ha_lease_ms=${LEASE_MS}`,
          ...backend.masterArgs,
        ],
        backend.env,
      );
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
          { checksums: true, heartbeatIntervalMs: 200, env: { ...process.env, ...backend.env }, log: () => {} },
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
    const load = loadavg()[0];
    const t0 = performance.now();
    leader.proc.kill('SIGKILL');
    const others = masters.filter((m) => m !== leader);
    const at = (pattern: RegExp) => Promise.race(others.map((m) => m.waitFor(pattern).then(() => performance.now() - t0)));
    const [electedMs, servingMs, putMs, getMs] = await Promise.all([
      at(/HA: (took over the followed state|elected without a complete copy)/),
      at(/HA: elected leader/),
      firstSuccess(t0, () => clients[0].put('after-kill', Buffer.from('x'))),
      firstSuccess(t0, () => clients[1].get('obj-0')),
    ]);
    let unreadable = 0;
    let wrong = 0;
    for (let i = 0; i < OBJECTS; i++) {
      const got = await clients[(i + 1) % 2].get(`obj-${i}`).catch(() => undefined);
      if (got === undefined) unreadable++;
      else if (!got.equals(values[i])) wrong++;
    }
    const us = (n: number): string => `${Math.round(n).toLocaleString('en-US')} us`;
    const s = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;
    console.log(
      `${name.padEnd(5)} --ha_commit_acks=${acks}: put (4 KiB, 2 replicas, 1 in flight) p50 ${us(percentile(lat, 0.5))} p99 ${us(percentile(lat, 0.99))}; ` +
        `after the leader's SIGKILL: elected ${s(electedMs)}, serving ${s(servingMs)}, first put ${s(putMs)}, first get of an old object ${s(getMs)}; ` +
        `lost ${unreadable} of ${OBJECTS} committed, wrong bytes in ${wrong}; load average ${load.toFixed(1)}`,
    );
  } finally {
    for (const c of clients) await c.close().catch(() => undefined);
    await ps.stopAll();
  }
}

async function main(): Promise<void> {
  clusterEnv(); // the cluster secret the masters and the clients share (in process.env)
  console.log(`failover bench: ${OBJECTS} objects per run, --ha_lease_ms=${LEASE_MS}; load average ${loadavg()[0].toFixed(1)}; node ${process.version}`);
  const wanted = new Set((process.env.BENCH_BACKENDS ?? 'etcd,redis,k8s').split(',').map((b) => b.trim()));
  const backends: [string, string, (ps: Processes) => Promise<HaBackend>][] = [
    ['etcd', have('etcd') ? '' : 'not installed (apt-get install etcd-server)', (ps) => ps.etcd('bench_etcd')],
    ['redis', have('redis-server') ? '' : 'not installed (apt-get install redis-server)', (ps) => ps.redis('bench_redis')],
    ['k8s', '', (ps) => ps.k8s('bench_k8s')], // the test API server, in this process
  ];
  for (const [name, missing, make] of backends) {
    if (!wanted.has(name)) continue;
    if (missing) console.log(`${name}: ${missing}: skipped`);
    else for (const acks of [1, 0]) await scenario(name, make, acks);
  }
}

main().then(
  () => process.exit(0),
  (e: Error) => {
    console.error(`failover-bench failed: ${e.stack ?? e.message}`);
    process.exit(1);
  },
);
