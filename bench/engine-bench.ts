// Transfer-engine benchmark (`npm run bench:engine` after `npm run build`): two processes on
// 127.0.0.1, READ and WRITE of 4 KiB .. 16 MiB with 1 and 8 in flight, against a raw C++ TCP
// pump between the same two processes and against memcpy, measured in the same run; the cost of
// per-op CRC-32C (`checksum`) at 64 KiB and 4 MiB, on and off alternating in the same run; then
// the CPU cost per op of the 4 KiB inline paths (with and without incarnation/generation checks
// and checksums). Prints figures and ratios; asserts nothing. BENCH_SECTIONS (comma list of tcp,
// shm, local, checksum, inline; default all) runs a part. BENCH_AUTH=1 gives every engine of both
// processes the same authSecret (the connection handshake; its per-transfer cost should be zero).
// The `connect` section (run only when named) measures what a new connection costs with and
// without the secret: the first 4 KiB READ of a fresh engine (connect + handshake + the READ)
// against the next one on the same connection, in this process over loopback TCP.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { addon } from '../native/addon.js';
import { copyWithCrc32c, mapMemory, TransferEngine, type MemoryRegion, type TransferOp } from '../native/index.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const SIZES = [4 * KiB, 64 * KiB, MiB, 4 * MiB, 16 * MiB];
const INFLIGHT = [1, 8];
const REGION = 8 * 16 * MiB + MiB; // 8 slots of the largest size
const BUDGET_MS = Number(process.env.BENCH_MS ?? 250); // per round of a case
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const PORTS = { minPort: 20000, maxPort: 32000 };
const SECTIONS = new Set((process.env.BENCH_SECTIONS ?? 'tcp,shm,local,large,checksum,inline').split(',').map((x) => x.trim()));
const LARGE_SIZES = [256 * KiB, MiB, 4 * MiB, 16 * MiB];
const COLD_SPAN = 512 * MiB; // the peer's second region: destinations of the large section cycle over it
const CONNECT_ROUNDS = 200;
const CHECKSUM_SIZES = [64 * KiB, 4 * MiB];
// BENCH_SOCKBUF=0 leaves kernel autotuning (default: the engine's 4 MiB).
const TUNING = process.env.BENCH_SOCKBUF !== undefined ? { socketBufferSize: Number(process.env.BENCH_SOCKBUF) } : {};
// BENCH_AUTH=1: a fixed secret for both processes (the peer inherits the environment).
const AUTH = process.env.BENCH_AUTH === '1' ? { authSecret: Buffer.alloc(32, 0x5a) } : {};

interface PeerInfo {
  endpoint: string;
  address: number;
  incarnation: number;
  pumpPort: number;
  /** A second served region of COLD_SPAN bytes (the large section's). */
  coldAddress: number;
}

function runPeer(): void {
  const region = mapMemory({ size: REGION });
  new Uint8Array(region.buffer).fill(0x3c); // fault the pages in
  const engine = new TransferEngine({ ...PORTS, ...AUTH, ...TUNING });
  const endpoint = engine.start();
  const incarnation = engine.registerRegion(region.address, region.size);
  const cold = mapMemory({ size: COLD_SPAN });
  new Uint8Array(cold.buffer).fill(0x5c);
  engine.registerRegion(cold.address, cold.size);
  const pumpPort = addon().rawPumpListen('127.0.0.1');
  process.stdout.write(JSON.stringify({ endpoint, address: region.address, incarnation, pumpPort, coldAddress: cold.address } satisfies PeerInfo) + '\n');
  process.stdin.on('data', () => {});
  process.stdin.on('end', () => {
    engine.close();
    // Also keeps `region` referenced until here: a collected region is unmapped by its finalizer,
    // and the engine (which holds only its address) would then fail every request with EFAULT.
    region.release();
    cold.release();
    process.exit(0);
  });
}

const nowNs = () => process.hrtime.bigint();
const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
const fmtSize = (n: number) => (n >= MiB ? `${n / MiB} MiB` : `${n / KiB} KiB`);
const gbps = (bytes: number, seconds: number) => bytes / seconds / 1e9;

interface CaseResult {
  gbps: number;
  opsPerSec: number;
  p50us: number;
  p99us: number;
  /** CPU microseconds per MiB moved, of this process and the peer (when runCase got `cpuUs`). */
  cpuUsPerMiB?: number;
}

/** CPU microseconds used so far by this process and by process `pid` (/proc; Linux only). */
function cpuUsOf(pid: number): () => number {
  const ticks = 100; // USER_HZ
  return () => {
    const own = process.cpuUsage();
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return own.user + own.system + ((Number(fields[11]) + Number(fields[12])) * 1e6) / ticks;
  };
}

async function runCase(engine: TransferEngine, makeOp: (slot: number) => TransferOp, size: number, inflight: number, cpuUs?: () => number): Promise<CaseResult> {
  // Warm-up: connections and page faults.
  await Promise.all(Array.from({ length: inflight }, (_, s) => engine.transfer([makeOp(s)])));
  const lat: number[] = [];
  let ops = 0;
  void size;
  const start = nowNs();
  const deadline = start + BigInt(BUDGET_MS) * 1_000_000n;
  const minOps = 20;
  const cpu0 = cpuUs?.();
  const lane = async (slot: number) => {
    const op = makeOp(slot);
    for (;;) {
      const now = nowNs();
      if (now > deadline && ops >= minOps) return;
      await engine.transfer([op]);
      lat.push(Number(nowNs() - now) / 1000);
      ops++;
    }
  };
  await Promise.all(Array.from({ length: inflight }, (_, s) => lane(s)));
  const seconds = Number(nowNs() - start) / 1e9;
  const cpuUsPerMiB = cpuUs ? (cpuUs() - cpu0!) / ((ops * size) / MiB) : undefined;
  lat.sort((a, b) => a - b);
  return { gbps: gbps(ops * size, seconds), opsPerSec: ops / seconds, p50us: pct(lat, 0.5), p99us: pct(lat, 0.99), cpuUsPerMiB };
}

async function pumpStream(endpoint: string, size: number): Promise<number> {
  const count = Math.max(16, Math.floor((size <= 4 * KiB ? 64 * MiB : 256 * MiB) / size));
  const s = await addon().rawPumpRun(endpoint, size, count, 'stream');
  return gbps(size * count, s);
}

async function pumpPingPong(endpoint: string, size: number): Promise<number> {
  const count = 1000;
  const s = await addon().rawPumpRun(endpoint, size, count, 'pingpong');
  return (s / count) * 1e6;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function memcpyGbps(size: number): Promise<number> {
  const iters = Math.max(10, Math.floor((512 * MiB) / size));
  await addon().memcpyRun(size, 10);
  const s = await addon().memcpyRun(size, iters);
  return gbps(size * iters, s);
}

/**
 * For every op, size and in-flight count: ROUNDS alternating runs of the peer figure (GB/s) and
 * of the engine moving `size` between `local` and `remote`, and one row of medians with the ratio.
 * `extra`: an optional last column (for example the pump's round trip, us).
 */
async function compareGrid(
  engine: TransferEngine,
  remote: { endpoint: string; address: number },
  local: { address: number },
  peerGbps: (size: number) => Promise<number>,
  extra?: (size: number, inflight: number) => Promise<number> | undefined,
): Promise<void> {
  for (const op of ['read', 'write'] as const) {
    for (const size of SIZES) {
      for (const inflight of INFLIGHT) {
        const eng: CaseResult[] = [];
        const peers: number[] = [];
        const extras: number[] = [];
        for (let round = 0; round < ROUNDS; round++) {
          peers.push(await peerGbps(size));
          const x = extra?.(size, inflight);
          if (x) extras.push(await x);
          const ops = (slot: number) => ({ op, endpoint: remote.endpoint, remoteAddress: remote.address + slot * size, localAddress: local.address + slot * size, length: size });
          eng.push(await runCase(engine, ops, size, inflight));
        }
        const g = median(eng.map((r) => r.gbps));
        const p = median(peers);
        const tail = extra ? ` | ${extras.length ? median(extras).toFixed(1) : '-'}` : '';
        console.log(
          ` ${op.padEnd(5)} ${fmtSize(size).padStart(8)} ${String(inflight).padStart(8)} ${g.toFixed(3).padStart(9)} ${median(eng.map((r) => r.opsPerSec))
            .toFixed(0)
            .padStart(9)} ${median(eng.map((r) => r.p50us))
            .toFixed(1)
            .padStart(9)} ${median(eng.map((r) => r.p99us))
            .toFixed(1)
            .padStart(9)} | ${p.toFixed(3).padStart(11)} ${(g / p).toFixed(2).padStart(5)}x${tail}`,
        );
      }
    }
  }
}

/**
 * The cost of `checksum: true`: for each op, size and in-flight count, ROUNDS rounds alternating
 * the same case without and with the checksum (which goes first alternates too), medians of the
 * throughput and of the CPU time per MiB of both processes (steadier than wall time here).
 */
async function checksumGrid(engine: TransferEngine, remote: { endpoint: string; address: number }, local: { address: number }, cpuUs: () => number): Promise<void> {
  console.log(' op    size      inflight | off GB/s  on GB/s  on/off | CPU us/MiB off    on  on/off');
  for (const op of ['read', 'write'] as const) {
    for (const size of CHECKSUM_SIZES) {
      for (const inflight of INFLIGHT) {
        const off: CaseResult[] = [];
        const on: CaseResult[] = [];
        for (let round = 0; round < ROUNDS; round++) {
          for (const checksum of round % 2 === 0 ? [false, true] : [true, false]) {
            const ops = (slot: number): TransferOp => ({
              op,
              endpoint: remote.endpoint,
              remoteAddress: remote.address + slot * size,
              localAddress: local.address + slot * size,
              length: size,
              checksum,
            });
            (checksum ? on : off).push(await runCase(engine, ops, size, inflight, cpuUs));
          }
        }
        const gOff = median(off.map((r) => r.gbps));
        const gOn = median(on.map((r) => r.gbps));
        const cOff = median(off.map((r) => r.cpuUsPerMiB!));
        const cOn = median(on.map((r) => r.cpuUsPerMiB!));
        console.log(
          ` ${op.padEnd(5)} ${fmtSize(size).padStart(8)} ${String(inflight).padStart(8)} | ${gOff.toFixed(3).padStart(8)} ${gOn.toFixed(3).padStart(8)} ${(gOn / gOff).toFixed(3).padStart(7)} | ${cOff.toFixed(1).padStart(14)} ${cOn.toFixed(1).padStart(5)} ${(cOn / cOff).toFixed(3).padStart(7)}`,
        );
      }
    }
  }
}

/** This process's CPU microseconds per call of `fn` (best of 5 rounds): steadier than wall time on a shared machine. */
async function cpuPerOp(fn: () => Promise<unknown> | unknown): Promise<number> {
  const N = 20_000;
  for (let i = 0; i < 2000; i++) await fn();
  let best = Infinity;
  for (let round = 0; round < 5; round++) {
    const c0 = process.cpuUsage();
    for (let i = 0; i < N; i++) await fn();
    const c = process.cpuUsage(c0);
    best = Math.min(best, (c.user + c.system) / N);
  }
  return best;
}

// The inline paths (4 KiB, done on the calling thread) measured as CPU time per op, without and
// with the incarnation/generation checks that fenced placements add, and with the CRC.
async function inlineCpu(peer: PeerInfo, local: MemoryRegion, memEngine: TransferEngine, memEp: string, dst: number): Promise<void> {
  const shm = new TransferEngine({ ...PORTS, ...AUTH, shmTransport: true });
  shm.start();
  shm.registerRegion(local.address, local.size);
  const size = 4 * KiB;
  const op = (kind: 'read' | 'write', extra: Partial<TransferOp> = {}): TransferOp => ({
    op: kind,
    endpoint: peer.endpoint,
    remoteAddress: peer.address,
    localAddress: local.address,
    length: size,
    ...extra,
  });
  await shm.transfer([op('read')]); // channel and grant
  const target = Buffer.alloc(size);
  const checked = { incarnation: peer.incarnation, generation: 1 };
  const sum = { checksum: true };
  const checkedSum = { ...checked, checksum: true }; // made once, as `checked`: the cases differ in the op only
  const memOp = (extra: Partial<TransferOp> = {}): TransferOp => ({ op: 'write', endpoint: memEp, remoteAddress: dst, localAddress: local.address, length: size, ...extra });
  // Pairs: each case without and with the checksum, measured back to back.
  const cases: Array<[string, () => unknown, () => unknown]> = [
    ['shm write transfer()', () => shm.transfer([op('write')]), () => shm.transfer([op('write', sum)])],
    ['shm write, incarnation+generation', () => shm.transfer([op('write', checked)]), () => shm.transfer([op('write', checkedSum)])],
    ['shm read transfer()', () => shm.transfer([op('read')]), () => shm.transfer([op('read', sum)])],
    ['shm readInline() / readInlineCrc()', () => shm.readInline(peer.endpoint, peer.address, target), () => shm.readInlineCrc(peer.endpoint, peer.address, target)],
    [
      'shm readInline(incarnation) / Crc',
      () => shm.readInline(peer.endpoint, peer.address, target, peer.incarnation),
      () => shm.readInlineCrc(peer.endpoint, peer.address, target, peer.incarnation),
    ],
    ['memcpyLocal write transfer()', () => memEngine.transfer([memOp()]), () => memEngine.transfer([memOp(sum)])],
  ];
  console.log('\n== inline paths, 4 KiB: CPU us per op in this process (best of 5 x 20000) ==');
  console.log(` ${''.padEnd(36)} ${'plain'.padStart(7)} ${'+crc'.padStart(7)}`);
  // An older addon (KVSTORE_NATIVE_ADDON, to compare the plain paths) has no CRC column.
  const hasCrc = typeof (addon().TransferEngine.prototype as { readInlineCrc?: unknown }).readInlineCrc === 'function';
  for (const [name, plain, crc] of cases) {
    const withCrc = hasCrc ? (await cpuPerOp(crc)).toFixed(3) : '-';
    console.log(` ${name.padEnd(36)} ${(await cpuPerOp(plain)).toFixed(3).padStart(7)} ${withCrc.padStart(7)}`);
  }
  shm.close();
}

/**
 * The large section: one op at a time, each a new destination (WRITE) or source (READ) in
 * `span` bytes at `remote` (cold memory), the other side one buffer at `local`; medians of ROUNDS
 * rounds alternating with memcpy over a cold span of the same size, and (checksum rows) one
 * thread's fused copy over the same span.
 */
async function largeGrid(label: string, engine: TransferEngine, endpoint: string, remote: number, span: number, local: number): Promise<void> {
  console.log(`${label}:`);
  for (const op of ['write', 'read'] as const) {
    for (const size of LARGE_SIZES) {
      for (const checksum of [false, true]) {
        const slots = Math.floor(span / size);
        const eng: { gbps: number; p50: number }[] = [];
        const mem: number[] = [];
        for (let round = 0; round < ROUNDS; round++) {
          mem.push(await coldCopyGbps(size, checksum));
          let i = round * 7;
          const lat: number[] = [];
          const opFor = (): TransferOp => ({ op, endpoint, remoteAddress: remote + (i++ % slots) * size, localAddress: local, length: size, checksum });
          await engine.transfer([opFor()]);
          const start = nowNs();
          const deadline = start + BigInt(BUDGET_MS) * 1_000_000n;
          while (nowNs() < deadline || lat.length < 20) {
            const t = nowNs();
            await engine.transfer([opFor()]);
            lat.push(Number(nowNs() - t) / 1000);
          }
          lat.sort((a, b) => a - b);
          eng.push({ gbps: gbps(lat.length * size, Number(nowNs() - start) / 1e9), p50: pct(lat, 0.5) });
        }
        const g = median(eng.map((r) => r.gbps));
        const m = median(mem);
        console.log(
          ` ${op.padEnd(5)} ${fmtSize(size).padStart(8)} ${(checksum ? 'crc' : '-').padStart(5)} ${g.toFixed(2).padStart(8)} ${median(eng.map((r) => r.p50))
            .toFixed(1)
            .padStart(8)} | ${m.toFixed(2).padStart(9)} ${(g / m).toFixed(2).padStart(6)}x`,
        );
      }
    }
  }
}

/** GB/s of one thread copying `size` bytes cycling over a cold span: memcpy, or with `fused` copyWithCrc32c. */
async function coldCopyGbps(size: number, fused: boolean): Promise<number> {
  if (!fused) {
    const iters = Math.max(10, Math.floor((256 * MiB) / size));
    const s = await addon().memcpyRun(size, iters, 256 * MiB);
    return gbps(size * iters, s);
  }
  const [a, b] = (coldPair ??= [Buffer.alloc(256 * MiB, 1), Buffer.alloc(256 * MiB, 2)]);
  const slots = Math.floor(a.length / size);
  const iters = Math.max(10, Math.floor((256 * MiB) / size));
  const t = nowNs();
  for (let i = 0; i < iters; i++) {
    const off = ((i * 7) % slots) * size;
    copyWithCrc32c(b.subarray(off, off + size), a.subarray(off, off + size));
  }
  return gbps(size * iters, Number(nowNs() - t) / 1e9);
}

/** Source and destination span of the fused-copy peer (made at its first use). */
let coldPair: [Buffer, Buffer] | undefined;

/** us of one call, by the high-resolution clock. */
async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t0) / 1000;
}

/** The first READ of a fresh engine (a new connection) against the second, without and with authSecret, alternating. */
async function connectCost(): Promise<void> {
  const secret = Buffer.alloc(32, 0x5a);
  const region = mapMemory({ size: MiB });
  const servers = { off: new TransferEngine({ ...PORTS, shmTransport: false }), on: new TransferEngine({ ...PORTS, shmTransport: false, authSecret: secret }) };
  for (const s of Object.values(servers)) {
    s.start();
    s.registerRegion(region.address, region.size);
  }
  const first: Record<'off' | 'on', number[]> = { off: [], on: [] };
  const second: Record<'off' | 'on', number[]> = { off: [], on: [] };
  for (let i = 0; i < CONNECT_ROUNDS; i++) {
    for (const mode of ['off', 'on'] as const) {
      const c = new TransferEngine({ ...PORTS, shmTransport: false, connectionsPerPeer: 1, ...(mode === 'on' ? { authSecret: secret } : {}) });
      c.start();
      c.registerRegion(region.address + 512 * KiB, 4 * KiB);
      const op: TransferOp = { op: 'read', endpoint: servers[mode].endpoint, remoteAddress: region.address, localAddress: region.address + 512 * KiB, length: 4 * KiB };
      first[mode].push(await timed(() => c.transfer([op])));
      second[mode].push(await timed(() => c.transfer([op])));
      c.close();
    }
  }
  console.log(`\n== a new connection: first 4 KiB READ of a fresh engine (connect [+ handshake]) vs the next, loopback TCP, ${CONNECT_ROUNDS} rounds, medians ==`);
  console.log(' authSecret   first us   next us   connection us');
  for (const mode of ['off', 'on'] as const) {
    const f = median(first[mode]);
    const n = median(second[mode]);
    console.log(` ${mode.padEnd(10)} ${f.toFixed(1).padStart(9)} ${n.toFixed(1).padStart(9)} ${(f - n).toFixed(1).padStart(15)}`);
  }
  for (const s of Object.values(servers)) s.close();
  region.release();
}

async function main(): Promise<void> {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--peer'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const peer = await new Promise<PeerInfo>((resolve, reject) => {
    createInterface({ input: child.stdout }).once('line', (l) => resolve(JSON.parse(l) as PeerInfo));
    child.once('exit', (code) => reject(new Error(`bench peer exited with ${code}`)));
  });
  const local = mapMemory({ size: REGION });
  new Uint8Array(local.buffer).fill(0x11);
  const engine = new TransferEngine({ ...PORTS, ...AUTH, ...TUNING, shmTransport: false });
  engine.start();
  engine.registerRegion(local.address, local.size);
  const pumpEp = `127.0.0.1:${peer.pumpPort}`;

  console.log(
    `engine bench: peer ${peer.endpoint} (separate process), ${ROUNDS} rounds x ${BUDGET_MS} ms per case, authSecret ${'authSecret' in AUTH ? 'on (BENCH_AUTH=1)' : 'off'}`,
  );
  if (SECTIONS.has('tcp')) {
    console.log('\n== TCP transport (shmTransport off) vs raw TCP pump ==');
    console.log('raw TCP pump: C++ send/recv, one connection between the same two processes, recv into a buffer;');
    console.log('each case alternates pump and engine runs (the machine is shared) and reports medians.');
    console.log('\n op    size      inflight    GB/s     ops/s    p50 us    p99 us |  pump GB/s  ratio | pump rtt us');
    await compareGrid(
      engine,
      peer,
      local,
      (size) => pumpStream(pumpEp, size),
      (size, inflight) => (inflight === 1 && size <= 64 * KiB ? pumpPingPong(pumpEp, size) : undefined),
    );
  }

  // Same-host shm transport to the same peer process, against memcpy of the same size.
  const shmEngine = new TransferEngine({ ...PORTS, ...AUTH, shmTransport: true });
  shmEngine.start();
  shmEngine.registerRegion(local.address, local.size);
  if (SECTIONS.has('shm')) {
    console.log('\n== same-host shm transport (peer memfd mapped here, memcpy on I/O threads) vs memcpy ==');
    console.log(' op    size      inflight    GB/s     ops/s    p50 us    p99 us | memcpy GB/s  ratio');
    await compareGrid(shmEngine, peer, local, memcpyGbps);
  }
  if (SECTIONS.has('large')) {
    console.log('\n== large ops one at a time into (WRITE) or from (READ) cold memory, vs one thread copying over a cold span (memcpy; crc rows: copyWithCrc32c) ==');
    console.log(' op        size   crc     GB/s   p50 us | copy GB/s  ratio');
    await largeGrid('shm (the peer process)', shmEngine, peer.endpoint, peer.coldAddress, COLD_SPAN, local.address);
  }
  if (SECTIONS.has('checksum')) {
    console.log('\n== per-op CRC-32C (checksum: true) against the same case without, alternating rounds ==');
    const cpu = cpuUsOf(child.pid!);
    console.log('TCP:');
    await checksumGrid(engine, peer, local, cpu);
    console.log('shm:');
    await checksumGrid(shmEngine, peer, local, cpu);
  }
  shmEngine.close();

  // Local path: MC_STORE_MEMCPY=1 transfers to this engine's own endpoint, against memcpy.
  const memEngine = new TransferEngine({ ...PORTS, ...AUTH, memcpyLocal: true, shmTransport: false });
  const memEp = memEngine.start();
  memEngine.registerRegion(local.address, local.size);
  const dst = mapMemory({ size: REGION });
  new Uint8Array(dst.buffer).fill(0x22);
  memEngine.registerRegion(dst.address, dst.size);
  if (SECTIONS.has('local')) console.log('\n== local memcpy path (memcpyLocal, own endpoint, 1 in flight) vs memcpy of the same size ==');
  if (SECTIONS.has('local')) console.log(' size        engine GB/s   memcpy GB/s   ratio   p50 us');
  for (const size of SECTIONS.has('local') ? SIZES : []) {
    const rs: CaseResult[] = [];
    const mems: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      mems.push(await memcpyGbps(size));
      rs.push(await runCase(memEngine, () => ({ op: 'write', endpoint: memEp, remoteAddress: dst.address, localAddress: local.address, length: size }), size, 1));
    }
    const g = median(rs.map((r) => r.gbps));
    const m = median(mems);
    console.log(
      ` ${fmtSize(size).padStart(8)} ${g.toFixed(3).padStart(13)} ${m.toFixed(3).padStart(13)} ${(g / m).toFixed(2).padStart(7)}x ${median(rs.map((r) => r.p50us))
        .toFixed(1)
        .padStart(8)}`,
    );
  }
  if (SECTIONS.has('large')) {
    const cold = mapMemory({ size: COLD_SPAN });
    new Uint8Array(cold.buffer).fill(0x33);
    memEngine.registerRegion(cold.address, cold.size);
    await largeGrid('memcpyLocal (own endpoint)', memEngine, memEp, cold.address, COLD_SPAN, local.address);
    await memEngine.unregisterRegion(cold.address);
    cold.release();
  }
  if (SECTIONS.has('inline')) await inlineCpu(peer, local, memEngine, memEp, dst.address);
  if (SECTIONS.has('connect')) await connectCost();
  memEngine.close();
  engine.close();
  child.stdin.end();
  local.release();
  dst.release();
}

if (process.argv.includes('--peer')) runPeer();
else
  main().catch((e: unknown) => {
    console.error(e);
    process.exit(1);
  });
