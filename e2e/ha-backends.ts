// Real election backends for the HA e2e tests: an etcd or a redis-server on free loopback ports
// (data in a temporary directory), or the test Kubernetes API server (e2e/kube-apiserver), with
// the flags and environment a master needs to use it and the address a client discovers the
// leader with. Each test file stops what it started with stopAll().
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { track, type ProcessHandle } from '../sidecar/local-cluster.js';
import { freePort } from './free-port.js';
import { startKubeApiServer, type KubeApiServer } from './kube-apiserver/http-server.js';
import { writeKubeconfig } from './kube-apiserver/kubeconfig.js';

export interface HaBackend {
  masterArgs: string[];
  /** Environment the masters need (k8s: KUBECONFIG). */
  env?: Record<string, string>;
  /** How clients find the leader (master_server_address; k8s: with `env`'s KUBECONFIG). */
  discovery: string;
}

export const have = (bin: string): boolean => spawnSync('sh', ['-c', `command -v ${bin}`]).status === 0;

export class Processes {
  private readonly procs: ChildProcess[] = [];
  private readonly dirs: string[] = [];
  private readonly servers: KubeApiServer[] = [];

  start(name: string, cmd: string, args: string[], env?: Record<string, string>): ProcessHandle {
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: env ? { ...process.env, ...env } : undefined });
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
    for (const s of this.servers.splice(0)) await s.stop();
    for (const d of this.dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  }

  /**
   * The test Kubernetes API server with a namespace `kv`; masters use the Lease kv/<cluster>-leader
   * (no POD_NAME: no pod label), clients discover the leader on it with the same KUBECONFIG.
   */
  async k8s(cluster: string): Promise<HaBackend> {
    const server = await startKubeApiServer();
    this.servers.push(server);
    const r = await fetch(`${server.url}/api/v1/namespaces`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'kv' } }),
    });
    if (r.status >= 300) throw new Error(`creating namespace kv: ${r.status} ${await r.text()}`);
    const kubeconfig = writeKubeconfig(join(this.tempDir('ha-k8s-'), 'kubeconfig'), server.url, 'kv');
    const lease = `kv/${cluster.replace(/_/g, '-')}-leader`;
    return { masterArgs: ['--ha_backend_type=k8s', `--ha_backend_connstring=${lease}`, `--cluster_id=${cluster}`], env: { KUBECONFIG: kubeconfig }, discovery: `k8s://${lease}` };
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
