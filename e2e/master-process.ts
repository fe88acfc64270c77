// A real `node dist/master/main.js` for e2e tests: started on free loopback ports (port 0), ready
// once it prints its "listening" line; its memory read from /proc and its metrics scraped over HTTP.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const MAIN = join(process.cwd(), 'dist', 'master', 'main.js');

export interface MasterProcess {
  proc: ChildProcess;
  pid: number;
  /** host:port of the RPC port */
  rpc: string;
  /** http://host:port of the management endpoints */
  http: string;
  stderr: () => string;
  exited: Promise<number | null>;
  stop: () => Promise<number | null>;
}

/** Starts a master with `args` on top of loopback and port-0 defaults; `nofile` runs it under `ulimit -n`. */
export function startMaster(args: string[] = [], opts: { nofile?: number } = {}): Promise<MasterProcess> {
  const argv = [MAIN, '--rpc_address=127.0.0.1', '--rpc_port=0', '--metrics_port=0', ...args];
  const proc =
    opts.nofile === undefined
      ? spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'pipe'] })
      : spawn('/bin/sh', ['-c', `ulimit -n ${opts.nofile} && exec "$0" "$@"`, process.execPath, ...argv], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  return new Promise((resolve, reject) => {
    proc.stderr.on('data', (d: Buffer) => {
      err += d.toString();
      const m = /store_master listening: rpc=(\S+) metrics=(\S+)/.exec(err);
      if (m) {
        resolve({
          proc,
          pid: proc.pid!,
          rpc: m[1],
          http: `http://${m[2]}`,
          stderr: () => err,
          exited,
          stop: () => {
            if (proc.exitCode === null) proc.kill('SIGTERM');
            return exited;
          },
        });
      }
    });
    void exited.then((code) => reject(new Error(`master exited with ${code} before listening: ${err}`)));
  });
}

/** A memory figure of a process from /proc/<pid>/status in bytes: VmRSS (now) or VmHWM (peak). */
export function memoryOf(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(m[1]) * 1024;
}

/** The value of one sample of the master's /metrics (0 when the sample is absent). */
export async function metric(m: MasterProcess, name: string, labels = ''): Promise<number> {
  const text = await (await fetch(`${m.http}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels ? `{${labels}}` : ''} `));
  return line === undefined ? 0 : Number(line.split(' ')[1]);
}
