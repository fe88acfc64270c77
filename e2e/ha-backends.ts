// Real election backends for the HA e2e tests: an etcd or a redis-server on free loopback ports
// (data in a temporary directory), with the flags a master needs to use it and the address a
// client discovers the leader with. Each test file stops what it started with stopAll().
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { track, type ProcessHandle } from '../sidecar/local-cluster.js';
import { freePort } from './free-port.js';

export interface HaBackend {
  masterArgs: string[];
  discovery: string;
}

export const have = (bin: string): boolean => spawnSync('sh', ['-c', `command -v ${bin}`]).status === 0;

export class Processes {
  private readonly procs: ChildProcess[] = [];
  private readonly dirs: string[] = [];

  start(name: string, cmd: string, args: string[]): ProcessHandle {
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.procs.push(p);
    return track(name, p);
  }

  tempDir(prefix: string): string {
    const d = mkdtempSync(join(tmpdir(), prefix));
    this.dirs.push(d);
    return d;
  }

  /** SIGKILLs what still runs (a stopped process gets SIGCONT so it can die) and removes the directories. */
  async stopAll(): Promise<void> {
    const running = this.procs.filter((p) => p.exitCode === null && p.signalCode === null);
    for (const p of running) {
      p.kill('SIGKILL');
      p.kill('SIGCONT');
    }
    await Promise.all(running.map(async (p) => (p.exitCode === null && p.signalCode === null ? await once(p, 'exit') : undefined)));
    for (const d of this.dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  }

  async etcd(cluster: string): Promise<HaBackend> {
    const dir = this.tempDir('ha-etcd-');
    const [client, peer] = [await freePort(), await freePort()];
    const endpoint = `127.0.0.1:${client}`;
    await this.start('etcd', 'etcd', [
      `--name=${cluster}`,
      `--data-dir=${dir}`,
      `--listen-client-urls=http://${endpoint}`,
      `--advertise-client-urls=http://${endpoint}`,
      `--listen-peer-urls=http://127.0.0.1:${peer}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${peer}`,
      `--initial-cluster=${cluster}=http://127.0.0.1:${peer}`,
    ]).waitFor(/ready to serve client requests/);
    return { masterArgs: [`--etcd_endpoints=${endpoint}`, `--cluster_id=${cluster}`], discovery: `etcd://${endpoint}/${cluster}` };
  }

  async redis(cluster: string): Promise<HaBackend> {
    const port = await freePort();
    await this.start('redis', 'redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no']).waitFor(/Ready to accept connections/);
    const url = `redis://127.0.0.1:${port}`;
    return { masterArgs: ['--ha_backend_type=redis', `--ha_backend_connstring=${url}`, `--cluster_id=${cluster}`], discovery: `${url}/${cluster}` };
  }
}
