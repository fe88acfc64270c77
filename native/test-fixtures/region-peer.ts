// Test helper: spawns region-server.mjs as a separate process and talks to it.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface, type Interface } from 'node:readline';
import { resolve } from 'node:path';
import { nativeDir } from './ensure-addon.js';

export interface RegionPeer {
  endpoint: string;
  address: number;
  size: number;
  pid: number;
  proc: ChildProcess;
  sha256(offset: number, length: number): Promise<string>;
  fill(offset: number, length: number, byte: number): Promise<void>;
  command(cmd: 'unregister' | 'register' | 'scratch'): Promise<void>;
  stop(): Promise<void>;
}

export async function startRegionPeer(size: number, seed: number, engineOptions: object = {}): Promise<RegionPeer> {
  const proc = spawn(process.execPath, [resolve(nativeDir, 'test-fixtures/region-server.mjs'), String(size), String(seed), JSON.stringify(engineOptions)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const rl: Interface = createInterface({ input: proc.stdout! });
  const waiting: Array<{ res: (v: Record<string, unknown>) => void; rej: (e: Error) => void }> = [];
  const exited = new Promise<void>((res) =>
    proc.once('exit', (code, sig) => {
      for (const w of waiting.splice(0)) w.rej(new Error(`region peer exited (${code ?? sig})`));
      res();
    }),
  );
  rl.on('line', (line) => waiting.shift()?.res(JSON.parse(line)));
  const next = () => new Promise<Record<string, unknown>>((res, rej) => waiting.push({ res, rej }));
  const ask = async (cmd: object) => {
    const p = next();
    proc.stdin!.write(JSON.stringify(cmd) + '\n');
    return p;
  };
  const ready = await next();
  return {
    endpoint: ready.endpoint as string,
    address: ready.address as number,
    size: ready.size as number,
    pid: ready.pid as number,
    proc,
    async sha256(offset, length) {
      return (await ask({ cmd: 'sha256', offset, length })).sha256 as string;
    },
    async fill(offset, length, byte) {
      await ask({ cmd: 'fill', offset, length, byte });
    },
    async command(cmd) {
      await ask({ cmd });
    },
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGKILL');
        await exited;
      }
    },
  };
}
