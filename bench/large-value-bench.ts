// Where a large Put and Get go (`npm run bench:large` after `npm run build`); not a test, asserts
// nothing. The cluster of bench:sidecar (a store_master, store_service A: the dummy clients' real
// client, store_service B), and in this process: an embedded Client without a segment (objects in
// A's or B's segment: the same-host shm transport), an embedded Client with a segment of its own
// (objects there: the own-segment memcpy, the path A takes for a dummy client's object "in A"), and
// a TS DummyClient of A. Values in allocBuffer memory, one in flight. With the own segment, objects
// move through the engine's loopback (the default) or, with MC_STORE_MEMCPY=1, by the client's own
// copy on the JS thread (a second client with that setting).
// Per row: the p50 of each operation and of its phases: the master calls (PutStart, PutEnd,
// GetReplicaList), the bytes (an engine transfer, or the fused copy with CRC-32C on the JS thread),
// and what is left (JS between them; for a dummy client, its hop to A and back, which is also shown
// by itself: a dummy's isExist against the embedded client's). In the same run: memcpy (cold), the
// peer the targets name. BENCH_SIZES (comma list of bytes) and BENCH_OPS tune it.
import { readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { Client } from '../client/client.js';
import { DummyClient } from '../client/dummy-client.js';
import type { StoreClient } from '../client/store-client.js';
import { sidecarCluster } from './sidecar-cluster.js';
import { fmtSize, KiB, memcpyGbps, MiB, pct } from './bench-util.js';

const SIZES = (process.env.BENCH_SIZES ?? `${MiB},${4 * MiB}`).split(',').map(Number);
const OPS = Number(process.env.BENCH_OPS ?? 60);
const LEASE_TTL_MS = 500;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const now = () => performance.now();

/** Time spent per phase name during the operation in flight (one at a time). */
class PhaseClock {
  current = new Map<string, number>();
  add(name: string, ms: number): void {
    this.current.set(name, (this.current.get(name) ?? 0) + ms);
  }
}

/** Wraps an embedded Client's master calls, engine transfers and fused copies with `clock`. */
function instrument(client: Client, clock: PhaseClock): void {
  // The bench reaches into the client (bracket access to private members) to time its parts.
  const c = client as unknown as {
    rpcThen: <T, R>(what: string, call: () => Promise<T>, then: (v: T) => R | PromiseLike<R>) => Promise<R>;
    engine: { transfer: (ops: unknown[]) => Promise<unknown> };
    native: Record<string, unknown> & { copyWithCrc32c: (dst: Uint8Array, src: Uint8Array) => number };
  };
  const rpcThen = c.rpcThen.bind(client);
  c.rpcThen = (what, call, then) => {
    const t = now();
    return rpcThen(what, call, (v) => {
      clock.add(what, now() - t);
      return then(v);
    });
  };
  const engine = c.engine;
  const transfer = engine.transfer.bind(engine);
  engine.transfer = (ops) => {
    const t = now();
    return transfer(ops).finally(() => clock.add('transfer', now() - t));
  };
  const native = c.native;
  c.native = {
    ...native,
    copyWithCrc32c: (dst: Uint8Array, src: Uint8Array) => {
      const t = now();
      const r = native.copyWithCrc32c(dst, src);
      clock.add('copy+crc', now() - t);
      return r;
    },
  };
}

interface Row {
  name: string;
  p50: number;
  gbps: number;
  phases: Map<string, number>;
  /** Per operation, over this process and the cluster's: minor page faults, CPU us (user + system). */
  faults: number;
  cpuUs: number;
}

/** Processes whose page faults and CPU time are counted (this one and the cluster's). */
const pids: number[] = [process.pid];

/** Minor faults and CPU microseconds so far of every process in `pids` (/proc; Linux only). */
function usage(): { faults: number; cpuUs: number } {
  let faults = 0;
  let ticks = 0;
  for (const pid of pids) {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    faults += Number(f[7]);
    ticks += Number(f[11]) + Number(f[12]);
  }
  return { faults, cpuUs: (ticks * 1e6) / 100 };
}

/** `n` operations one at a time: p50 of the whole and of each phase `clock` saw. */
async function timed(name: string, size: number, n: number, clock: PhaseClock | undefined, op: (i: number) => Promise<unknown>): Promise<Row> {
  const totals: number[] = [];
  const phases = new Map<string, number[]>();
  const u0 = usage();
  const start = now();
  for (let i = 0; i < n; i++) {
    if (clock) clock.current = new Map();
    const t = now();
    await op(i);
    totals.push(now() - t);
    if (clock) for (const [k, v] of clock.current) (phases.get(k) ?? phases.set(k, []).get(k)!).push(v);
  }
  const seconds = (now() - start) / 1000;
  const u1 = usage();
  const med = (xs: number[]) =>
    pct(
      [...xs].sort((a, b) => a - b),
      0.5,
    );
  return {
    name,
    p50: med(totals),
    gbps: (n * size) / seconds / 1e9,
    phases: new Map([...phases].map(([k, v]) => [k, med(v)])),
    faults: (u1.faults - u0.faults) / n,
    cpuUs: (u1.cpuUs - u0.cpuUs) / n,
  };
}

function print(r: Row): void {
  const known = [...r.phases.values()].reduce((a, b) => a + b, 0);
  const parts = [...r.phases].map(([k, v]) => `${k} ${(v * 1000).toFixed(0)}`);
  if (r.phases.size > 0) parts.push(`rest ${((r.p50 - known) * 1000).toFixed(0)}`);
  const per = `${r.faults.toFixed(0).padStart(5)} faults ${r.cpuUs.toFixed(0).padStart(5)} cpu us`;
  console.log(
    ` ${r.name.padEnd(36)} ${r.gbps.toFixed(2).padStart(6)} GB/s  p50 ${(r.p50 * 1000).toFixed(0).padStart(4)} us  ${per}${parts.length ? `  p50s: ${parts.join(' + ')} us` : ''}`,
  );
}

/** Puts then reads (first read) `OPS` values of `size` through `client` into `segment`. */
async function rows(label: string, client: StoreClient, segment: string, size: number, clock: PhaseClock | undefined, tag: string): Promise<Row[]> {
  const lane = await client.allocBuffer(size);
  for (let i = 0; i < size; i += 4096) lane.buffer[i] = (i >> 12) & 0xff;
  const value = lane.buffer.subarray(0, size);
  const key = (i: number) => `${tag}-${size}-${i}`;
  const config = { preferred_segment: segment };
  // Warm-up: connections, grants, JIT.
  for (let i = 0; i < 3; i++) await client.put(`${key(i)}-w`, value, config);
  for (let i = 0; i < 3; i++) await client.getInto(`${key(i)}-w`, value);
  const put = await timed(`${label} put ${fmtSize(size)}`, size, OPS, clock, (i) => client.put(key(i), value, config));
  const get = await timed(`${label} get ${fmtSize(size)} (first read)`, size, OPS, clock, (i) => client.getInto(key(i), value));
  lane.release();
  return [put, get];
}

async function main(): Promise<void> {
  const cluster = await sidecarCluster(LEASE_TTL_MS);
  const [a, b] = cluster.services;
  pids.push(cluster.master.proc.pid!, a.proc.pid!, b.proc.pid!);
  const embedded = await Client.setup(cluster.clientConfig({ local_buffer_size: 256 * MiB }));
  const ownerConfig = cluster.clientConfig({ local_buffer_size: 256 * MiB, global_segment_size: 768 * MiB });
  const owner = await Client.setup(ownerConfig, { prefaultSegment: true });
  const copier = await Client.setup(ownerConfig, { prefaultSegment: true, env: { ...process.env, MC_STORE_MEMCPY: '1' } });
  const dummy = await DummyClient.connect({ socketPath: a.socket, bufferSize: 256 * MiB });
  const clocks = { embedded: new PhaseClock(), owner: new PhaseClock(), copier: new PhaseClock() };
  instrument(embedded, clocks.embedded);
  instrument(owner, clocks.owner);
  instrument(copier, clocks.copier);
  try {
    console.log(
      `large-value bench: ${cpus().length} cores, load average ${loadavg()
        .map((x) => x.toFixed(1))
        .join(' ')}; ${OPS} ops per row, 1 in flight`,
    );
    console.log(
      'per op: minor page faults and CPU time of all processes (this one, the master, A, B); p50s of the phases, "rest" = p50 of the whole minus theirs (JS between them)\n',
    );

    // Warm-up, not reported: the master's and clients' JIT, connections, shm grants.
    let warm = 0;
    for (const [c, segment] of [
      [embedded, a.segment],
      [embedded, b.segment],
      [owner, owner.mountedSegments[0].name],
      [copier, copier.mountedSegments[0].name],
      [dummy, a.segment],
      [dummy, b.segment],
    ] as const) {
      await rows('', c, segment, 64 * KiB, undefined, `warm${warm++}`);
    }
    for (const size of SIZES) {
      const out: Row[] = [];
      out.push(...(await rows('embedded   in A', embedded, a.segment, size, clocks.embedded, 'ea')));
      out.push(...(await rows('embedded   in B', embedded, b.segment, size, clocks.embedded, 'eb')));
      out.push(...(await rows('embedded   own segment', owner, owner.mountedSegments[0].name, size, clocks.owner, 'eo')));
      out.push(...(await rows('embedded   own, MC_STORE_MEMCPY=1', copier, copier.mountedSegments[0].name, size, clocks.copier, 'ec')));
      out.push(...(await rows('ts-dummy   in A', dummy, a.segment, size, undefined, 'da')));
      out.push(...(await rows('ts-dummy   in B', dummy, b.segment, size, undefined, 'db')));
      for (const r of out) print(r);
      // What A does for a dummy's object is the embedded row of the same path: its own segment
      // through its engine ("in A"), or another store service's ("in B"); the rest is the hop.
      for (const [dummyRow, likeRow] of [
        ['ts-dummy   in A', 'embedded   own segment'],
        ['ts-dummy   in B', 'embedded   in B'],
      ]) {
        for (const verb of ['put', 'get']) {
          const d = out.find((r) => r.name.startsWith(`${dummyRow} ${verb}`))!;
          const e = out.find((r) => r.name.startsWith(`${likeRow} ${verb}`))!;
          console.log(
            ` ${d.name}: p50 ${(d.p50 * 1000).toFixed(0)} us = A's part ~${(e.p50 * 1000).toFixed(0)} us (as "${e.name}") + the hop ~${((d.p50 - e.p50) * 1000).toFixed(0)} us`,
          );
        }
      }
      console.log();
    }
    // The dummy's hop by itself: a call that is one master round trip for the embedded client.
    const hop = async (c: StoreClient) => (await timed('', 0, 500, undefined, () => c.isExist('no-such-key'))).p50;
    const e = await hop(embedded);
    const d = await hop(dummy);
    console.log(`isExist p50: embedded ${(e * 1000).toFixed(0)} us, ts-dummy ${(d * 1000).toFixed(0)} us: the dummy's hop ~${((d - e) * 1000).toFixed(0)} us`);
    const cold = await memcpyGbps(4 * MiB, 256 * MiB);
    console.log(`memcpy 4 MiB cold ${cold.toFixed(2)} GB/s: 4 MiB in ${((4 * MiB) / cold / 1e3).toFixed(0)} us (load average now ${loadavg()[0].toFixed(1)})`);
    await sleep(LEASE_TTL_MS + 100);
  } finally {
    await dummy.close().catch(() => {});
    await copier.close().catch(() => {});
    await owner.close().catch(() => {});
    await embedded.close().catch(() => {});
    await cluster.stop();
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`large-value-bench: ${(e as Error).stack ?? e}\n`);
    process.exit(1);
  },
);
