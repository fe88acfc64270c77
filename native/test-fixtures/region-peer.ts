// Test helper: spawns region-server.mjs as a separate process and talks to it.
import type { TransferEngineStats } from '../transfer-engine.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface, type Interface } from 'node:readline';
import { resolve } from 'node:path';
import { nativeDir } from './ensure-addon.js';

/** The peer engine's stats() (native/transfer-engine.ts). */
export type PeerStats = TransferEngineStats;

/** A call whose promise the peer reports on twice: whether it settled at once, and when it settles. */
export interface Watched {
  settledAtOnce: boolean;
  settled: Promise<void>;
}

export interface RegionPeer {
  endpoint: string;
  address: number;
  size: number;
  pid: number;
  /** Incarnation of the served region's latest registration. */
  incarnation: number;
  proc: ChildProcess;
  sha256(offset: number, length: number): Promise<string>;
  /** CRC-32C (unsigned) of the peer's bytes [offset, +length), computed in the peer. */
  crc32c(offset: number, length: number): Promise<number>;
  fill(offset: number, length: number, byte: number): Promise<void>;
  command(cmd: 'unregister' | 'register' | 'scratch' | 'ping' | 'timer'): Promise<Record<string, unknown>>;
  /** Maps and registers a second region with serve: false. */
  mapLocal(size: number): Promise<{ address: number; incarnation: number }>;
  setFence(below: number, revoked?: number[]): Promise<Watched>;
  unregisterWatched(): Promise<Watched>;
  /** A transfer by the peer's own engine; `offset` is into the peer's region. */
  transfer(op: Record<string, unknown>): Promise<{ ok?: boolean; error?: string; message?: string }>;
  stats(): Promise<PeerStats>;
  /** Resolves when the peer's stderr (captured with StartOptions.captureStderr) matches. */
  waitForStderr(pattern: RegExp): Promise<string>;
  stop(): Promise<void>;
}

export interface StartOptions {
  /** Command prefix (e.g. setpriv ... to run the peer as another user). */
  wrap?: string[];
  /** Keep the peer's stderr for waitForStderr() instead of passing it through. */
  captureStderr?: boolean;
  /** Variables added to the peer's environment. */
  env?: Record<string, string>;
}

export async function startRegionPeer(size: number, seed: number, engineOptions: object = {}, start: StartOptions = {}): Promise<RegionPeer> {
  const args = [resolve(nativeDir, 'test-fixtures/region-server.mjs'), String(size), String(seed), JSON.stringify(engineOptions)];
  const [cmd, ...pre] = start.wrap ? [...start.wrap, process.execPath] : [process.execPath];
  const proc = spawn(cmd, [...pre, ...args], { stdio: ['pipe', 'pipe', start.captureStderr ? 'pipe' : 'inherit'], env: start.env && { ...process.env, ...start.env } });
  let stderr = '';
  const stderrWaiters: Array<{ pattern: RegExp; res: (s: string) => void }> = [];
  proc.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
    for (let i = stderrWaiters.length - 1; i >= 0; i--) {
      const m = stderr.match(stderrWaiters[i].pattern);
      if (m) stderrWaiters.splice(i, 1)[0].res(m[0]);
    }
  });
  const rl: Interface = createInterface({ input: proc.stdout! });
  const waiting: Array<{ res: (v: Record<string, unknown>) => void; rej: (e: Error) => void }> = [];
  const events = new Map<number, { res: () => void; rej: (e: Error) => void }>();
  let gone: Error | undefined;
  const exited = new Promise<void>((res) =>
    proc.once('exit', (code, sig) => {
      gone = new Error(`region peer exited (${code ?? sig})`);
      for (const w of waiting.splice(0)) w.rej(gone);
      for (const e of events.values()) e.rej(gone);
      events.clear();
      res();
    }),
  );
  rl.on('line', (line) => {
    const msg = JSON.parse(line) as Record<string, unknown>;
    if (msg.event === 'settled') {
      const e = events.get(msg.id as number);
      events.delete(msg.id as number);
      if (msg.error) e?.rej(new Error(`settled with ${msg.error as string}`));
      else e?.res();
      return;
    }
    waiting.shift()?.res(msg);
  });
  // A question to a peer that is gone fails at once (it would otherwise wait forever).
  const next = () => new Promise<Record<string, unknown>>((res, rej) => (gone ? rej(gone) : waiting.push({ res, rej })));
  const ask = async (cmd: object) => {
    const p = next();
    proc.stdin!.write(JSON.stringify(cmd) + '\n');
    return p;
  };
  let nextId = 1;
  const watched = async (cmd: object): Promise<Watched> => {
    const id = nextId++;
    const settled = new Promise<void>((res, rej) => events.set(id, { res, rej }));
    settled.catch(() => {}); // observed by the caller when it awaits `settled`
    const r = await ask({ ...cmd, id });
    return { settledAtOnce: r.settledAtOnce as boolean, settled };
  };
  const ready = await next();
  const peer: RegionPeer = {
    endpoint: ready.endpoint as string,
    address: ready.address as number,
    size: ready.size as number,
    pid: ready.pid as number,
    incarnation: ready.incarnation as number,
    proc,
    async sha256(offset, length) {
      return (await ask({ cmd: 'sha256', offset, length })).sha256 as string;
    },
    async crc32c(offset, length) {
      return (await ask({ cmd: 'crc32c', offset, length })).crc32c as number;
    },
    async fill(offset, length, byte) {
      await ask({ cmd: 'fill', offset, length, byte });
    },
    async command(cmd) {
      const r = await ask({ cmd });
      if (cmd === 'register') peer.incarnation = r.incarnation as number;
      return r;
    },
    async mapLocal(bytes) {
      const r = await ask({ cmd: 'mapLocal', size: bytes });
      return { address: r.address as number, incarnation: r.incarnation as number };
    },
    setFence: (below, revoked) => watched({ cmd: 'setFenceWatch', below, revoked }),
    unregisterWatched: () => watched({ cmd: 'unregisterWatch' }),
    async transfer(op) {
      return await ask({ cmd: 'transfer', ...op });
    },
    async stats() {
      return (await ask({ cmd: 'stats' })) as unknown as PeerStats;
    },
    waitForStderr(pattern) {
      const m = stderr.match(pattern);
      if (m) return Promise.resolve(m[0]);
      if (!start.captureStderr) return Promise.reject(new Error('waitForStderr needs StartOptions.captureStderr'));
      return new Promise<string>((res, rej) => {
        stderrWaiters.push({ pattern, res });
        void exited.then(() => rej(new Error(`region peer exited before printing ${pattern}: ${stderr.slice(-400)}`)));
      });
    },
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGKILL');
        await exited;
      }
    },
  };
  return peer;
}
