// Slow and hostile peers against a real engine process (issue 10, defects 3 and 4): a peer that
// trickles a request's bytes never freezes the victim's event loop and is cut off after
// ioTimeoutMs; connections are capped per engine and per peer address; silent connections are
// closed after idleTimeoutMs; running out of threads refuses connections and fails batches
// with a clear error instead of aborting the process.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomFillSync } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { resolve } from 'node:path';
import { mapMemory, TransferEngine, TransferError, type MemoryRegion } from './index.js';
import { ensureAddon, nativeDir } from './test-fixtures/ensure-addon.js';
import { rawConnect, requestHeader, WireStatus, type RawConn } from './test-fixtures/raw-wire.js';
import { startRegionPeer, type RegionPeer, type StartOptions } from './test-fixtures/region-peer.js';

const MiB = 1024 * 1024;
const ports = { minPort: 20000, maxPort: 32000, shmTransport: false };

let local: MemoryRegion;
let engine: TransferEngine;
const peers: RegionPeer[] = [];
const floods: ChildProcess[] = [];

beforeAll(() => {
  ensureAddon();
  local = mapMemory({ size: 16 * MiB });
  engine = new TransferEngine({ ...ports, env: {} });
  engine.start();
  engine.registerRegion(local.address, local.size);
});

afterAll(async () => {
  for (const f of floods) f.kill('SIGKILL');
  engine?.close();
  local?.release();
  for (const p of peers) await p.stop();
});

async function peer(engineOptions: object, start?: StartOptions): Promise<RegionPeer> {
  const p = await startRegionPeer(8 * MiB, 42, { ...ports, ...engineOptions }, start);
  peers.push(p);
  return p;
}

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

/** A round trip of reads and writes between the test's engine and `p`, checked by checksum. */
async function goodTransfer(p: RegionPeer, e = engine): Promise<void> {
  const src = new Uint8Array(local.buffer, 0, MiB);
  randomFillSync(src);
  await e.transfer([{ op: 'write', endpoint: p.endpoint, remoteAddress: p.address + MiB, localAddress: local.address, length: MiB }]);
  expect(await p.sha256(MiB, MiB)).toBe(sha(src));
  await e.transfer([{ op: 'read', endpoint: p.endpoint, remoteAddress: p.address, localAddress: local.address + 2 * MiB, length: MiB }]);
  expect(sha(new Uint8Array(local.buffer, 2 * MiB, MiB))).toBe(await p.sha256(0, MiB));
}

/** Sends one byte every `everyMs` on `c` until it closes: a peer trickling its payload. */
function trickle(c: RawConn, everyMs: number): () => void {
  const t = setInterval(() => {
    if (!c.isClosed()) c.sock.write(Buffer.from([0x77]));
  }, everyMs);
  return () => clearInterval(t);
}

describe('a peer trickling a request', () => {
  test('does not freeze the victim: its event loop, registrations and other transfers go on, and the slow connection is cut off after ioTimeoutMs', async () => {
    const victim = await peer({ ioTimeoutMs: 3000 });
    // A WRITE for an unregistered address promising 1 MiB: the victim refuses it and drains the
    // payload, which arrives one byte every 100 ms.
    const slow = await rawConnect(victim.endpoint);
    slow.sock.write(requestHeader({ op: 'write', address: 4096, length: MiB }));
    const stop = trickle(slow, 100);
    try {
      // Registration and unregistration on the victim's JS thread return while the slow peer is
      // connected (before the fix they waited on the lock the draining thread held).
      await victim.command('scratch');
      // Its timers fire.
      for (let i = 0; i < 5; i++) expect((await victim.command('timer')).ok).toBe(true);
      // A good peer's transfers go through meanwhile.
      await goodTransfer(victim);
      expect(slow.isClosed()).toBe(false);
      await slow.closed; // cut off by the victim, not by us
    } finally {
      stop();
    }
    const s = await victim.stats();
    expect(s.closedIoTimeout).toBe(1);
    await goodTransfer(victim);
  });

  test('into a registered region: unregisterRegion resolves only when that chunk stops, and never blocks the victim meanwhile', async () => {
    const victim = await peer({ ioTimeoutMs: 3000 });
    const slow = await rawConnect(victim.endpoint);
    slow.sock.write(requestHeader({ op: 'write', address: victim.address, length: MiB, incarnation: victim.incarnation }));
    slow.sock.write(Buffer.alloc(4096, 0x61));
    // The first bytes are in the region once the victim pinned it for this chunk.
    while ((await victim.sha256(0, 4096)) !== sha(Buffer.alloc(4096, 0x61)));
    const stop = trickle(slow, 100);
    try {
      const unreg = await victim.unregisterWatched();
      expect(unreg.settledAtOnce).toBe(false); // a chunk is still moving bytes into the region
      // The region is gone for new requests at once, and the victim's loop is free.
      await expectCode(
        engine.transfer([{ op: 'read', endpoint: victim.endpoint, remoteAddress: victim.address, localAddress: local.address, length: 4096 }]),
        'ADDRESS_OUT_OF_RANGE',
      );
      await victim.command('scratch');
      expect(slow.isClosed()).toBe(false);
      await unreg.settled; // the slow chunk was cut off by ioTimeoutMs, so the region may be unmapped now
      await slow.closed;
    } finally {
      stop();
    }
    expect((await victim.stats()).closedIoTimeout).toBe(1);
  });
});

async function expectCode(p: Promise<unknown>, code: string): Promise<TransferError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(TransferError);
  expect((err as TransferError).code).toBe(code);
  return err as TransferError;
}

interface Flood {
  connected: number;
  failed: number;
  /** Resolves once the far side has closed at least n of the connections. */
  closedAtLeast(n: number): Promise<void>;
  end(): Promise<void>;
}

/** `count` silent connections to `endpoint` from `source` (a 127/8 address), held by a child process. */
async function flood(endpoint: string, count: number, source: string): Promise<Flood> {
  const proc = spawn(process.execPath, [resolve(nativeDir, 'test-fixtures/conn-flood.mjs'), endpoint, String(count), source], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  floods.push(proc);
  const lines = createInterface({ input: proc.stdout });
  let closed = 0;
  const waiters: Array<{ n: number; res: () => void }> = [];
  // One listener from the start: a report and the next update can arrive in one chunk, and readline
  // emits both at once (a listener added after awaiting the first would miss the second).
  let first: (r: { connected: number; failed: number }) => void = () => {};
  const reported = new Promise<{ connected: number; failed: number }>((res) => (first = res));
  lines.on('line', (l) => {
    const r = JSON.parse(l) as { connected: number; failed: number; closed: number };
    closed = r.closed;
    first(r);
    for (const w of waiters.filter((x) => closed >= x.n)) w.res();
  });
  const report = await reported;
  const exited = new Promise<void>((res) => proc.once('exit', () => res()));
  return {
    connected: report.connected,
    failed: report.failed,
    closedAtLeast: (n) => (closed >= n ? Promise.resolve() : new Promise<void>((res) => waiters.push({ n, res }))),
    end: async () => {
      proc.stdin.end();
      await exited;
    },
  };
}

/** Waits (by round trips to the peer, bounded) until its stats satisfy `ok`. */
async function statsUntil(p: RegionPeer, ok: (s: Awaited<ReturnType<RegionPeer['stats']>>) => boolean) {
  for (let i = 0; i < 10_000; i++) {
    const s = await p.stats();
    if (ok(s)) return s;
    await new Promise((r) => setImmediate(r));
  }
  throw new Error(`stats never matched: ${JSON.stringify(await p.stats())}`);
}

describe('connection limits', () => {
  test('connections over maxConnectionsPerPeer and maxConnections are closed at once and counted; the engine keeps serving', async () => {
    const victim = await peer({ maxConnections: 80, maxConnectionsPerPeer: 50, idleTimeoutMs: 0 });
    // The good peer: one pooled connection, so exactly one of the victim's 80 is its own.
    const good = new TransferEngine({ ...ports, connectionsPerPeer: 1, env: {} });
    try {
      good.registerRegion(local.address, local.size);
      // 100 silent connections from 127.0.0.2: 50 admitted, 50 over the per-peer cap.
      const a = await flood(victim.endpoint, 100, '127.0.0.2');
      expect(a.connected + a.failed).toBe(100);
      await a.closedAtLeast(50);
      let s = await statsUntil(victim, (x) => x.refusedOverCap >= 50);
      expect(s.connectionsOpen).toBe(50);
      expect(s.refusedOverCap).toBe(50);
      // Another address still gets in: the good peer (127.0.0.1) transfers.
      await goodTransfer(victim, good);
      expect((await victim.stats()).connectionsOpen).toBe(51);
      // 100 more from 127.0.0.3: only the 29 left of the 80 are admitted.
      const b = await flood(victim.endpoint, 100, '127.0.0.3');
      await b.closedAtLeast(71);
      s = await statsUntil(victim, (x) => x.refusedOverCap >= 50 + 71);
      expect(s.connectionsOpen).toBe(80);
      expect(s.refusedOverCap).toBe(50 + 71);
      // The victim stays responsive, and the good peer's admitted connection is still served.
      await victim.command('scratch');
      await goodTransfer(victim, good);
      await a.end();
      await b.end();
      await statsUntil(victim, (x) => x.connectionsOpen === 1);
      await goodTransfer(victim);
    } finally {
      good.close();
    }
  });

  test('a connection with no request for idleTimeoutMs is closed; a busy one is not', async () => {
    const victim = await peer({ idleTimeoutMs: 1000 });
    const silent = await rawConnect(victim.endpoint);
    const busy = await rawConnect(victim.endpoint);
    // The busy one sends a READ request whenever it got the previous answer, until the silent one closes.
    let answered = 0;
    const loop = (async () => {
      while (!silent.isClosed()) {
        busy.sock.write(requestHeader({ op: 'read', address: victim.address, length: 16 }));
        expect(await busy.response()).toBe(WireStatus.OK);
        answered++;
      }
    })();
    await silent.closed;
    await loop;
    expect(answered).toBeGreaterThan(0);
    expect(busy.isClosed()).toBe(false);
    expect((await victim.stats()).closedIdle).toBe(1);
    busy.sock.destroy();
  });
});

test('out of file descriptors: each waiting connection is accepted and closed (counted), accept() does not stall or spin, and serving resumes', async () => {
  // The peer's descriptor limit is lowered before it starts (prlimit execs it), a little above what it uses.
  const probe = await peer({ idleTimeoutMs: 0 });
  const base = readdirSync(`/proc/${probe.pid}/fd`).length;
  await probe.stop();
  const limit = base + 20;
  const victim = await peer({ idleTimeoutMs: 0, maxConnectionsPerPeer: 1000 }, { wrap: ['prlimit', `--nofile=${limit}:${limit}`] });
  const f = await flood(victim.endpoint, 100, '127.0.0.5');
  // Every attempt ends up admitted or refused; none is left waiting in the backlog.
  const s = await statsUntil(victim, (x) => x.connectionsOpen + x.refusedNoResources === 100);
  expect(s.refusedNoResources).toBeGreaterThan(0);
  await f.closedAtLeast(s.refusedNoResources);
  await f.end();
  await statsUntil(victim, (x) => x.connectionsOpen === 0);
  await goodTransfer(victim);
});

// RLIMIT_NPROC counts every task of the real uid on the machine: a uid of its own (no account
// needed) keeps other processes, e.g. other suites running as nobody, out of the count.
const ownUid = 100_000 + Math.floor(Math.random() * 900_000);
const asOwnUid = ['setpriv', `--reuid=${ownUid}`, `--regid=${ownUid}`, '--clear-groups'];
const canDropPrivileges = (() => {
  if (process.getuid?.() !== 0) return 'the test runs as root (it starts the peer as another uid under RLIMIT_NPROC)';
  try {
    execFileSync('setpriv', ['--version'], { stdio: 'ignore' });
    execFileSync('prlimit', ['--version'], { stdio: 'ignore' });
  } catch {
    return 'setpriv and prlimit (util-linux) are installed';
  }
  return '';
})();

// RLIMIT_NPROC is not enforced for root, so the peer runs as another uid; its limit is set once it is
// up (to its thread count + 3), so node itself starts normally and only the engine runs short.
(canDropPrivileges ? test.skip : test)(
  `running out of threads refuses connections and fails a batch with a clear error, never aborts${canDropPrivileges ? ` (skipped: needs ${canDropPrivileges})` : ''}`,
  async () => {
    const victim = await peer({ idleTimeoutMs: 0, connectionsPerPeer: 1 }, { wrap: asOwnUid });
    const threads = readdirSync(`/proc/${victim.pid}/task`).length;
    const limit = threads + 3;
    // As the same uid: prlimit on another user's process needs CAP_SYS_RESOURCE, which root here may lack.
    execFileSync('setpriv', [...asOwnUid.slice(1), 'prlimit', `--pid=${victim.pid}`, `--nproc=${limit}:${limit}`]);
    // 30 silent connections: the first few get a serving thread (about three: node's own thread
    // count may move by one), the rest are refused (closed at once).
    const f = await flood(victim.endpoint, 30, '127.0.0.4');
    const s = await statsUntil(victim, (x) => x.accepted + x.refusedNoResources === 30);
    expect(s.refusedNoResources).toBeGreaterThanOrEqual(20);
    expect(s.connectionsOpen).toBe(s.accepted);
    await f.closedAtLeast(s.refusedNoResources);
    // No thread for a new peer channel either: the batch fails, the process lives.
    const r = await victim.transfer({ op: 'read', endpoint: engine.endpoint, remoteAddress: local.address, offset: 0, length: 4096 });
    expect(r.error).toBe('TRANSFER_FAILED');
    expect(r.message).toMatch(/could not start I\/O threads/);
    expect((await victim.command('ping')).ok).toBe(true);
    // Once the connections are gone the threads come back and everything works again.
    await f.end();
    await statsUntil(victim, (x) => x.connectionsOpen === 0);
    await goodTransfer(victim); // two serving threads at most (idle connections stay), one left
    const back = await victim.transfer({ op: 'read', endpoint: engine.endpoint, remoteAddress: local.address, offset: 0, length: 4096 });
    expect(back).toEqual({ ok: true });
    expect(await victim.sha256(0, 4096)).toBe(sha(new Uint8Array(local.buffer, 0, 4096)));
  },
);
