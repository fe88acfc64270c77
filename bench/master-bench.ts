// Master throughput benchmark (`npm run bench:master`; not a test): starts a store_master on
// 127.0.0.1 (or uses --master host:port), mounts fake segments, and through MasterClient prints
// PutStart+PutEnd pairs/s (also with a Remove after each), GetReplicaList/s, ExistKey/s and batch keys/s (the put pair, and its
// BatchPutStart and BatchPutEnd each alone) at 1 and 64 calls in flight with p50/p99 latency; the
// same framing against a bare echo process for comparison; batched 64 KiB puts into masters of
// their own whose memory has room, is full (every put evicts), and is full with the SSD tier's
// offload copies reported by a copier of this process (`fullMemory`: keys/s and the master's CPU
// per key; not with --master); and the master heap per object after
// 1,000,000 objects, measured on MasterCore in this process. `--snapshots` starts the master with
// --enable_snapshot (change log in a temporary STORE_SNAPSHOT_LOCAL_PATH; `--change-log-sync
// interval` to pass that policy) to show what the log costs the put path; `--objects 0` skips the
// heap phase.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';
import { MasterClient } from '../client/master-client.js';
import { ErrorCode } from '../common/error-code.js';
import { CHANNEL_MAGIC, FrameDecoder, FrameKind, FrameWriter } from '../common/channel-frame.js';
import { encodeMessage, masterMethodByName } from '../common/master-proto.js';
import { MasterCore, defaultMasterCoreConfig } from '../master/core/master-core.js';
import { clusterEnv } from '../sidecar/local-cluster.js';
import { clientSecret, serverHandshake } from '../common/cluster-secret.js';

const TB = 1024 ** 4;
const CLIENT = '00000000-0000-4000-8000-00000000b1c0';
const SEGMENTS = 4;
const VALUE = 4096;

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  if (i >= 0 && i + 1 < process.argv.length) return process.argv[i + 1];
  const eq = process.argv.find((a) => a.startsWith(`--${name}=`));
  return eq ? eq.slice(name.length + 3) : fallback;
}

const PHASE_MS = Number(arg('phase-ms', '2500'));
const HEAP_OBJECTS = Number(arg('objects', '1000000'));
const SNAPSHOTS = process.argv.includes('--snapshots');
const LOG_SYNC = arg('change-log-sync', 'placement');

/** A store_master child on free ports; resolves with its RPC address. */
function startMaster(extraArgs: string[] = []): Promise<{ proc: ChildProcess; address: string }> {
  const main = fileURLToPath(new URL('../master/main.js', import.meta.url));
  const args = [main, '--rpc_address=127.0.0.1', '--rpc_port=0', '--metrics_port=0', '--enable_metric_reporting=false', ...extraArgs];
  // an authenticated master (a secret in a temp dir unless the environment names one)
  const env = clusterEnv({ ...process.env });
  if (SNAPSHOTS) {
    const dir = mkdtempSync(join(tmpdir(), 'bench-snapshots-'));
    args.push('--enable_snapshot', '--snapshot_object_store_type=local', `--change_log_sync=${LOG_SYNC}`);
    env.STORE_SNAPSHOT_LOCAL_PATH = dir;
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  }
  const proc = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'], env });
  let err = '';
  return new Promise((resolve, reject) => {
    proc.stderr.on('data', (d: Buffer) => {
      err += d.toString();
      const m = /store_master listening: rpc=(\S+)/.exec(err);
      if (m) resolve({ proc, address: m[1] });
    });
    proc.once('exit', (code) => reject(new Error(`master exited (${code}): ${err}`)));
  });
}

/**
 * Echo mode: the same framing, answering every request with one canned reply and no work; with the
 * parent's cluster secret it passes the same handshake as the master first.
 */
function runEchoServer(): void {
  const secret = clientSecret();
  const grl = masterMethodByName.get('GetReplicaList')!;
  const canned = encodeMessage(grl.responseType, {
    status_code: 0,
    lease_ttl_ms: 5000,
    replica_list: [{ status: 3, handles: [{ segment_name: 'seg-0', size: VALUE, buffer: 0x7f0000000000, status: 1, te_endpoint: '127.0.0.1:20000' }] }],
  });
  const server = createServer({ noDelay: true }, (socket) => {
    const writer = new FrameWriter((d) => socket.write(d));
    const decoder = new FrameDecoder((_kind, id, method) => writer.pushPayload(FrameKind.RESPONSE, id, method, canned));
    socket.on('error', () => undefined);
    socket.once('readable', () => {
      const head = socket.read() as Buffer;
      if (!head.subarray(0, 4).equals(CHANNEL_MAGIC)) return socket.destroy();
      const serve = (rest: Buffer): void => {
        socket.on('data', (chunk: Buffer) => decoder.push(chunk));
        if (rest.length > 0) decoder.push(rest);
        socket.resume();
      };
      if (secret === undefined) return serve(head.subarray(4));
      serverHandshake(socket, secret, 'master-channel', head.subarray(4)).then(serve, () => socket.destroy());
    });
  });
  server.listen(0, '127.0.0.1', () => {
    const a = server.address();
    process.stdout.write(`echo listening 127.0.0.1:${typeof a === 'object' && a ? a.port : 0}\n`);
  });
}

function startEcho(): Promise<{ proc: ChildProcess; address: string }> {
  const proc = spawn(process.execPath, [fileURLToPath(import.meta.url), '--echo-server'], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  return new Promise((resolve, reject) => {
    proc.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /echo listening (\S+)/.exec(out);
      if (m) resolve({ proc, address: m[1] });
    });
    proc.once('exit', (code) => reject(new Error(`echo exited (${code})`)));
  });
}

interface Result {
  ops: number;
  seconds: number;
  p50: number;
  p99: number;
}

/** Runs `inFlight` sequential loops of `op(i)` for PHASE_MS (or `limit` calls); returns calls/s and latency percentiles (us). */
async function phase(inFlight: number, op: (i: number) => Promise<unknown>, limit = Infinity): Promise<Result> {
  const lat = new Float64Array(4_000_000);
  let n = 0;
  let next = 0;
  const start = performance.now();
  const end = start + PHASE_MS;
  const worker = async (): Promise<void> => {
    while (performance.now() < end && next < limit) {
      const t = performance.now();
      await op(next++);
      if (n < lat.length) lat[n] = performance.now() - t;
      n++;
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  const seconds = (performance.now() - start) / 1000;
  const sorted = lat.subarray(0, Math.min(n, lat.length)).sort();
  return { ops: n, seconds, p50: sorted[Math.floor(sorted.length * 0.5)] * 1000, p99: sorted[Math.floor(sorted.length * 0.99)] * 1000 };
}

function fmt(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

function line(label: string, inFlight: number, r: Result, unit: string, perOp = 1): string {
  const rate = (r.ops * perOp) / r.seconds;
  return `${label.padEnd(34)} in-flight ${String(inFlight).padStart(2)}  ${fmt(rate).padStart(11)} ${unit.padEnd(7)} p50 ${r.p50.toFixed(0).padStart(6)} us  p99 ${r.p99.toFixed(0).padStart(6)} us`;
}

interface Rates {
  grl: number[];
  /** Best keys/s of each batch form (over 1 and 64 in flight). */
  batchKeys: Record<string, number>;
}

async function throughput(address: string): Promise<Rates> {
  const c = await MasterClient.connect(address, { requestTimeoutMs: 30_000 });
  for (let s = 0; s < SEGMENTS; s++) {
    const r = await c.mountSegment({
      buffer: (s + 1) * 2 * TB,
      size: TB,
      segment_name: `bench-seg-${s}`,
      client_id: CLIENT,
      te_endpoint: `127.0.0.1:${20000 + s}`,
      protocol: 'tcp',
    });
    if (r.status_code !== 0 && r.status_code !== -401) throw new Error(`MountSegment failed: ${r.status_code}`);
  }
  // a real client pings well within --client_ttl; without it the master drops our segments
  const pinger = setInterval(() => void c.ping({ client_id: CLIENT }).catch(() => undefined), 1000);
  const put = (key: string) => ({ key, value_length: VALUE, slice_lengths: [VALUE], config: { replica_num: 1 } });
  const grlRates: number[] = [];
  const batchKeys: Record<string, number> = {};
  const best = (form: string, keysPerSec: number) => {
    batchKeys[form] = Math.max(batchKeys[form] ?? 0, keysPerSec);
  };
  let run = 0;
  for (const inFlight of [1, 64]) {
    const tag = `r${run++}-`;
    const p = await phase(inFlight, async (i) => {
      const k = `${tag}obj-${i}`;
      const s = await c.putStart(put(k));
      if (s.status_code !== 0) throw new Error(`PutStart ${k}: ${s.status_code}`);
      await c.putEnd({ key: k, replica_type: 0 });
    });
    console.log(line('PutStart+PutEnd', inFlight, p, 'pairs/s'));
    // Churn: every put pair followed by the removal of its key, so every PutStart follows a
    // removal (with --snapshots it waits until the change log's removals are synced).
    const churn = await phase(inFlight, async (i) => {
      const k = `${tag}churn-${i}`;
      const s = await c.putStart(put(k));
      if (s.status_code !== 0) throw new Error(`PutStart ${k}: ${s.status_code}`);
      await c.putEnd({ key: k, replica_type: 0 });
      await c.remove({ key: k });
    });
    console.log(line('PutStart+PutEnd+Remove (churn)', inFlight, churn, 'cycles/s'));
    const stored = p.ops;
    const g = await phase(inFlight, async (i) => {
      const r = await c.getReplicaList({ key: `${tag}obj-${i % stored}` });
      if (r.status_code !== 0) throw new Error(`GetReplicaList: ${r.status_code}`);
    });
    grlRates.push(g.ops / g.seconds);
    console.log(line('GetReplicaList', inFlight, g, 'calls/s'));
    const e = await phase(inFlight, (i) => c.existKey({ key: `${tag}obj-${i % stored}` }));
    console.log(line('ExistKey', inFlight, e, 'calls/s'));
    const keysAt = (i: number): string[] => Array.from({ length: 128 }, (_, j) => `${tag}obj-${(i * 128 + j) % stored}`);
    const bg = await phase(inFlight, (i) => c.batchGetReplicaList({ keys: keysAt(i) }));
    console.log(line('BatchGetReplicaList (128 keys)', inFlight, bg, 'keys/s', 128));
    best('BatchGetReplicaList', (bg.ops * 128) / bg.seconds);
    const be = await phase(inFlight, (i) => c.batchExistKey({ keys: keysAt(i) }));
    console.log(line('BatchExistKey (128 keys)', inFlight, be, 'keys/s', 128));
    best('BatchExistKey', (be.ops * 128) / be.seconds);
    const bp = await phase(inFlight, async (i) => {
      const keys = Array.from({ length: 128 }, (_, j) => `${tag}batch-${i}-${j}`);
      await c.batchPutStart({ requests: keys.map(put) });
      await c.batchPutEnd({ keys, replica_type: 0 });
    });
    console.log(line('BatchPutStart+BatchPutEnd (128)', inFlight, bp, 'keys/s', 128));
    best('BatchPutStart+BatchPutEnd', (bp.ops * 128) / bp.seconds);
    // The pair's two calls each on its own: BatchPutStart of fresh keys, then BatchPutEnd of those
    // keys (as many calls as the starts made, so it may end before PHASE_MS).
    const startedKeys: string[][] = [];
    const bs = await phase(inFlight, async (i) => {
      const keys = Array.from({ length: 128 }, (_, j) => `${tag}half-${i}-${j}`);
      startedKeys[i] = keys;
      await c.batchPutStart({ requests: keys.map(put) });
    });
    console.log(line('BatchPutStart (128 keys)', inFlight, bs, 'keys/s', 128));
    best('BatchPutStart', (bs.ops * 128) / bs.seconds);
    const bd = await phase(inFlight, (i) => c.batchPutEnd({ keys: startedKeys[i], replica_type: 0 }), startedKeys.length);
    console.log(line('BatchPutEnd (128 keys)', inFlight, bd, 'keys/s', 128));
    best('BatchPutEnd', (bd.ops * 128) / bd.seconds);
  }
  clearInterval(pinger);
  c.close();
  return { grl: grlRates, batchKeys };
}

async function echoRates(address: string): Promise<number[]> {
  const c = await MasterClient.connect(address, { requestTimeoutMs: 30_000 });
  const rates: number[] = [];
  for (const inFlight of [1, 64]) {
    const r = await phase(inFlight, (i) => c.getReplicaList({ key: `echo-${i}` }));
    rates.push(r.ops / r.seconds);
    console.log(line('echo (same framing, canned reply)', inFlight, r, 'calls/s'));
  }
  c.close();
  return rates;
}

/** CPU milliseconds process `pid` has used so far (/proc, Linux; 10 ms ticks). */
function cpuMs(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100; // utime + stime, USER_HZ 100
}

const FULL_VALUE = 64 * 1024;
const FULL_BATCH = 32;
const FULL_LANES = 4;
const FULL_MEMORY = 64 * 1024 * 1024;
const FULL_KEYS = 65_536;

/**
 * Batched puts of 64 KiB (32 per BatchPutStart + BatchPutEnd, 4 in flight, as the tiers bench's
 * writer) into a master of its own whose memory is `how`: a segment with room; a 64 MB segment,
 * full, so every put evicts; the same with the SSD tier (--enable_offload, a 4 GB SSD segment),
 * where a copier of this process takes the offload copies each Ping hands out and reports them
 * made at once (no bytes move: the master's side of the tier alone) and the writer puts again
 * what is refused for room, as the tiers bench's does. Memory is filled by an unmeasured round
 * first. Prints keys/s and the master's CPU per key (/proc).
 */
async function fullMemory(how: 'room' | 'full' | 'full, SSD tier'): Promise<void> {
  const ssd = how === 'full, SSD tier';
  const master = await startMaster(ssd ? ['--enable_offload'] : []);
  const c = await MasterClient.connect(master.address, { requestTimeoutMs: 30_000 });
  let copier: MasterClient | undefined;
  let stop = false;
  const copies: Promise<void>[] = [];
  try {
    const mount = async (m: MasterClient, name: string, size: number, buffer: number, protocol: string, client: string) => {
      const r = await m.mountSegment({ buffer, size, segment_name: name, client_id: client, te_endpoint: '127.0.0.1:20000', protocol });
      if (r.status_code !== 0) throw new Error(`MountSegment ${name}: ${r.status_code}`);
    };
    await mount(c, 'mem', how === 'room' ? TB : FULL_MEMORY, 2 * TB, 'tcp', CLIENT);
    if (ssd) {
      const COPIER = '00000000-0000-4000-8000-00000000c0b1';
      let wake: (() => void) | undefined;
      copier = await MasterClient.connect(master.address, { requestTimeoutMs: 30_000, onNotice: () => wake?.() });
      await mount(copier, 'ssd', 4 * 1024 * 1024 * 1024, 8 * TB, 'ssd', COPIER);
      const m = copier;
      copies.push(
        (async () => {
          while (!stop) {
            const r = await m.ping({ client_id: COPIER, can_copy: true, copy_push: true });
            if (r.copies.length > 0) await m.batchReplicaCopied({ client_id: COPIER, outcomes: r.copies.map((x) => ({ copy_id: x.copy_id, ok: true, failed_segments: [] })) });
            if (!r.more_copies) await new Promise<void>((res) => ((wake = res), setTimeout(res, 100)));
          }
        })(),
      );
    }
    const put = (key: string) => ({ key, value_length: FULL_VALUE, slice_lengths: [FULL_VALUE], config: { replica_num: 1 } });
    let refused = 0;
    const round = async (tag: string, keys: number) => {
      let next = 0;
      await Promise.all(
        Array.from({ length: FULL_LANES }, async () => {
          while (next < keys) {
            const first = next;
            next += FULL_BATCH;
            let left = Array.from({ length: FULL_BATCH }, (_, j) => `${tag}-${first + j}`);
            while (left.length > 0) {
              const r = await c.batchPutStart({ requests: left.map(put) });
              const ok = left.filter((_, j) => r.results[j]?.status_code === 0);
              if (ok.length > 0) await c.batchPutEnd({ keys: ok, replica_type: 0 });
              const again = left.filter((_, j) => r.results[j]?.status_code === ErrorCode.NO_AVAILABLE_HANDLE /* copies still landing */);
              if (again.length + ok.length !== left.length) throw new Error(`BatchPutStart refused: ${JSON.stringify(r.results.map((x) => x.status_code))}`);
              refused += again.length;
              left = again;
              if (left.length > 0) await new Promise((res) => setTimeout(res, 5));
            }
          }
        }),
      );
    };
    await round('fill', 2 * (FULL_MEMORY / FULL_VALUE)); // memory full, the path compiled
    refused = 0;
    const cpu0 = cpuMs(master.proc.pid!);
    const t0 = performance.now();
    await round('put', FULL_KEYS);
    const seconds = (performance.now() - t0) / 1000;
    const us = ((cpuMs(master.proc.pid!) - cpu0) * 1000) / FULL_KEYS;
    const label = `BatchPutStart+End (32 x 64 KiB), ${how}`;
    console.log(
      `${label.padEnd(50)} in-flight  ${FULL_LANES}  ${fmt(FULL_KEYS / seconds).padStart(11)} keys/s  master CPU ${us.toFixed(1)} us/key${ssd ? `, ${fmt(refused)} refused for room and put again` : ''}`,
    );
  } finally {
    stop = true;
    c.close();
    copier?.close();
    await Promise.allSettled(copies);
    master.proc.kill('SIGTERM');
  }
}

function heapPerObject(): void {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const core = new MasterCore({ ...defaultMasterCoreConfig, viewVersion: 1 });
  for (let s = 0; s < SEGMENTS; s++) {
    core.mountSegment(
      {
        buffer: (s + 1) * 2 * TB,
        size: TB,
        segment_name: `heap-seg-${s}`,
        client_id: CLIENT,
        segment_id: '',
        te_endpoint: `127.0.0.1:${20000 + s}`,
        protocol: 'tcp',
        incarnation: 0,
      },
      0,
    );
  }
  gc();
  gc();
  const before = process.memoryUsage().heapUsed;
  const t0 = performance.now();
  for (let i = 0; i < HEAP_OBJECTS; i++) {
    const key = `model/layer/block-${String(i).padStart(9, '0')}`;
    const r = core.putStart({ key, value_length: VALUE, slice_lengths: [VALUE], config: { replica_num: 1, with_soft_pin: false, with_hard_pin: false, preferred_segment: '' } }, 1);
    if (r.status_code !== 0) throw new Error(`putStart ${i}: ${r.status_code}`);
    core.putEnd({ key, replica_type: 0, slice_checksums: [] }, 1);
  }
  const secs = (performance.now() - t0) / 1000;
  gc();
  gc();
  const after = process.memoryUsage().heapUsed;
  const perObject = (after - before) / HEAP_OBJECTS;
  console.log(
    `heap per object: ${perObject.toFixed(0)} bytes (target <= 400: ${perObject <= 400 ? 'met' : 'MISSED'}) (MasterCore in this process after global.gc(), ${fmt(HEAP_OBJECTS)} objects, keys of 27 chars, 1 replica x 1 slice; includes the key strings)`,
  );
  console.log(`  in-process PutStart+PutEnd without RPC: ${fmt(HEAP_OBJECTS / secs)} pairs/s; stats: ${JSON.stringify(core.stats(2))}`);
}

async function main(): Promise<void> {
  if (process.argv.includes('--echo-server')) return runEchoServer();
  const started = performance.now();
  const given = arg('master', '');
  const master = given ? { proc: undefined, address: given } : await startMaster();
  const echo = await startEcho();
  console.log(
    `store_master bench: master ${master.address}${given ? ' (given)' : ' (started here)'}${SNAPSHOTS ? ` with --enable_snapshot --change_log_sync=${LOG_SYNC}` : ''}; echo ${echo.address}; ${PHASE_MS} ms per phase; node ${process.version}; ${availableParallelism()} CPUs, load average ${loadavg()[0].toFixed(1)}`,
  );
  try {
    const rates = await throughput(master.address);
    const grl = rates.grl;
    const ech = await echoRates(echo.address);
    console.log(`GetReplicaList vs echo: ${((100 * grl[0]) / ech[0]).toFixed(0)}% of echo at 1 in flight, ${((100 * grl[1]) / ech[1]).toFixed(0)}% at 64 in flight`);
    console.log(
      `targets: GetReplicaList >= 7,000/s (1 in flight): ${grl[0] >= 7000 ? 'met' : 'MISSED'}; >= 30,000/s (64): ${grl[1] >= 30000 ? 'met' : 'MISSED'}; batch >= 1,000,000 keys/s: ${Object.entries(
        rates.batchKeys,
      )
        .map(([form, k]) => `${form} ${k >= 1e6 ? 'met' : 'MISSED'} (${fmt(k)})`)
        .join(', ')}`,
    );
  } finally {
    master.proc?.kill('SIGTERM');
    echo.proc.kill('SIGTERM');
  }
  if (!given) for (const how of ['room', 'full', 'full, SSD tier'] as const) await fullMemory(how);
  if (HEAP_OBJECTS > 0) heapPerObject();
  console.log(`total run time ${((performance.now() - started) / 1000).toFixed(1)} s`);
}

main().catch((e: Error) => {
  console.error(`master-bench failed: ${e.stack ?? e.message}`);
  process.exit(1);
});
