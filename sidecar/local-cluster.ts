// A store cluster on 127.0.0.1 made of real processes: one store_master (with its embedded HTTP
// metadata server) and N store_service processes, all on free ports. Used by the main job
// (scripts/run.ts), the transfer benchmark and the e2e tests. Readiness is awaited from the
// processes' own "listening"/"ready" lines, never by sleeping; stop() ends only what it started.
// The cluster is authenticated: with no STORE_CLUSTER_SECRET_FILE (and no
// STORE_ALLOW_UNAUTHENTICATED=1) in its environment, a new secret is written to a temp dir (removed
// when this process exits) and named in this process's environment too, so that the clients it
// makes prove it. LOCAL_CLUSTER_NODE_ARGS adds node flags to every process it starts (profiling:
// `--cpu-prof --cpu-prof-dir=DIR`, which NODE_OPTIONS refuses).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { writeNewSecret, ALLOW_UNAUTHENTICATED_ENV, SECRET_ENV } from '../common/cluster-secret.js';
import { controlFetch } from '../common/tls-fetch.js';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ClientSetupConfig } from '../client/setup-config.js';

/** dist/ of the compiled binaries: this file lives in dist/sidecar/ (or sidecar/ under jest). */
export function distRoot(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const root = resolve(here, '..');
  return root.endsWith('/dist') ? root : join(root, 'dist');
}

export interface ProcessHandle {
  readonly proc: ChildProcess;
  readonly name: string;
  /** Everything the process printed so far (stdout and stderr). */
  output(): string;
  /** Resolves with the first match of `pattern` in the output; rejects if the process exits first. */
  waitFor(pattern: RegExp): Promise<RegExpMatchArray>;
  readonly exited: Promise<number | null>;
}

export function track(name: string, proc: ChildProcess, echo?: (line: string) => void): ProcessHandle {
  let out = '';
  const waiters: { pattern: RegExp; resolve: (m: RegExpMatchArray) => void; reject: (e: Error) => void }[] = [];
  const check = () => {
    for (let i = waiters.length - 1; i >= 0; i--) {
      const m = out.match(waiters[i].pattern);
      if (m) waiters.splice(i, 1)[0].resolve(m);
    }
  };
  const onData = (d: Buffer) => {
    const s = d.toString();
    out += s;
    if (out.length > 1 << 20) out = out.slice(-(1 << 19));
    if (echo) for (const line of s.split('\n')) if (line) echo(`[${name}] ${line}`);
    check();
  };
  proc.stdout?.on('data', onData);
  proc.stderr?.on('data', onData);
  const exited = new Promise<number | null>((res) =>
    proc.once('exit', (code, signal) => {
      for (const w of waiters.splice(0)) w.reject(new Error(`${name} exited (${code ?? signal}) before printing ${w.pattern}: ${out.slice(-800)}`));
      res(code);
    }),
  );
  return {
    proc,
    name,
    output: () => out,
    exited,
    waitFor(pattern) {
      const m = out.match(pattern);
      if (m) return Promise.resolve(m);
      if (proc.exitCode !== null || proc.signalCode !== null) return Promise.reject(new Error(`${name} already exited: ${out.slice(-800)}`));
      return new Promise((resolve, reject) => waiters.push({ pattern, resolve, reject }));
    },
  };
}

export interface MasterProcess extends ProcessHandle {
  rpc: string;
  metrics: string;
  metadata: string;
}

export interface StoreServiceProcess extends ProcessHandle {
  http: string;
  endpoint: string;
  segment: string;
  clientId: string;
  /** host:port of its dummy-client service (KVD1 channel and gRPC). */
  rpc: string;
  /** Its dummy-client Unix socket ('' when disabled). */
  socket: string;
}

export interface LocalClusterOptions {
  storeServices?: number;
  /** Segment size of each store service (e.g. "256MB"). */
  segmentSize?: string;
  masterArgs?: string[];
  serviceArgs?: string[];
  /** Echo every process line (e.g. to a log file). */
  echo?: (line: string) => void;
  env?: NodeJS.ProcessEnv;
  /** Fixed master RPC / metadata ports (default: any free port). */
  rpcPort?: number;
  metadataPort?: number;
}

/**
 * The environment of a local cluster's processes: `env` with a cluster secret (its own, else this
 * process's, else a new one, which this process's environment then names as well).
 */
export function clusterEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  if (env[SECRET_ENV] || env[ALLOW_UNAUTHENTICATED_ENV] === '1') return env;
  if (!process.env[SECRET_ENV] && process.env[ALLOW_UNAUTHENTICATED_ENV] !== '1') {
    const dir = mkdtempSync(join(tmpdir(), 'kvstore-secret-'));
    writeNewSecret(join(dir, 'cluster-secret'));
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    process.env[SECRET_ENV] = join(dir, 'cluster-secret');
  }
  return { ...env, [SECRET_ENV]: process.env[SECRET_ENV], [ALLOW_UNAUTHENTICATED_ENV]: process.env[ALLOW_UNAUTHENTICATED_ENV] };
}

/**
 * Node flags for the processes a cluster starts, from LOCAL_CLUSTER_NODE_ARGS (space-separated),
 * for profiling benches: e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`, which NODE_OPTIONS refuses.
 */
function nodeArgs(env: NodeJS.ProcessEnv): string[] {
  return (env.LOCAL_CLUSTER_NODE_ARGS ?? '').split(/\s+/).filter((a) => a.length > 0);
}

function spawnMaster(opts: LocalClusterOptions, rpcPort: number, metadataPort: number): ProcessHandle {
  const proc = spawn(
    process.execPath,
    [
      ...nodeArgs(opts.env ?? process.env),
      join(distRoot(), 'master/main.js'),
      `--rpc_port=${rpcPort}`,
      '--metrics_port=0',
      '--rpc_address=127.0.0.1',
      '--enable_http_metadata_server=true',
      '--http_metadata_server_host=127.0.0.1',
      `--http_metadata_server_port=${metadataPort}`,
      '--enable_metric_reporting=false',
      ...(opts.masterArgs ?? []),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: opts.env ?? process.env },
  );
  return track('master', proc, opts.echo);
}

const MASTER_READY = /store_master listening: rpc=(\S+) metrics=(\S+) metadata=(\S+)/;

export class LocalCluster {
  readonly services: StoreServiceProcess[] = [];
  private readonly all: ProcessHandle[] = [];

  private constructor(
    public master: MasterProcess,
    private readonly opts: LocalClusterOptions,
  ) {}

  static async start(options: LocalClusterOptions = {}): Promise<LocalCluster> {
    const opts = { ...options, env: clusterEnv(options.env) };
    const h = spawnMaster(opts, opts.rpcPort ?? 0, opts.metadataPort ?? 0);
    const proc = h.proc;
    let cluster: LocalCluster | undefined;
    try {
      const m = await h.waitFor(MASTER_READY);
      cluster = new LocalCluster({ ...h, rpc: m[1], metrics: m[2], metadata: m[3] }, opts);
      cluster.all.push(h);
      for (let i = 0; i < (opts.storeServices ?? 0); i++) await cluster.addService();
      return cluster;
    } catch (e) {
      if (cluster) await cluster.stop();
      else if (proc.exitCode === null) proc.kill('SIGKILL');
      throw e;
    }
  }

  /** Kills the master (SIGKILL: no goodbye) and starts a fresh one on the same RPC and metadata ports. */
  async restartMaster(): Promise<MasterProcess> {
    const old = this.master;
    old.proc.kill('SIGKILL');
    await old.exited;
    const rpcPort = Number(old.rpc.split(':').pop());
    const metadataPort = Number(new URL(old.metadata).port);
    const h = spawnMaster(this.opts, rpcPort, metadataPort);
    this.all[0] = h;
    const m = await h.waitFor(MASTER_READY);
    this.master = { ...h, rpc: m[1], metrics: m[2], metadata: m[3] };
    return this.master;
  }

  /** Starts one more store service and waits until it has mounted its segment. */
  async addService(extraArgs: string[] = []): Promise<StoreServiceProcess> {
    const n = this.services.length + 1;
    const proc = spawn(
      process.execPath,
      [
        ...nodeArgs(this.opts.env ?? process.env),
        join(distRoot(), 'sidecar/main.js'),
        '--host=127.0.0.1',
        '--port=0',
        '--rpc_port=0',
        '--local_hostname=127.0.0.1',
        `--master_server=${this.master.rpc}`,
        `--metadata_server=${this.master.metadata}`,
        `--global_segment_size=${this.opts.segmentSize ?? '256MB'}`,
        // Stopping is immediate here (tests and benches stop whole clusters); a test of the
        // graceful shutdown passes its own --shutdown_grace_seconds, which wins (later flag).
        '--shutdown_grace_seconds=0',
        ...(this.opts.serviceArgs ?? []),
        ...extraArgs,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: this.opts.env ?? process.env },
    );
    const h = track(`store_service-${n}`, proc, this.opts.echo);
    this.all.push(h);
    const m = await h.waitFor(/store_service ready: http=(\S+) te_endpoint=(\S+) segments=([^(\s]+)\(\d+B\)\S* client_id=(\S+) rpc=(\S+) socket=(\S+)/);
    const svc: StoreServiceProcess = { ...h, http: m[1], endpoint: m[2], segment: m[3], clientId: m[4], rpc: m[5], socket: m[6] === 'none' ? '' : m[6] };
    this.services.push(svc);
    return svc;
  }

  /** Settings for an embedded client of this cluster. */
  clientConfig(overrides: Partial<ClientSetupConfig> = {}): ClientSetupConfig {
    return {
      local_hostname: '127.0.0.1',
      metadata_server: this.master.metadata,
      global_segment_size: 0,
      local_buffer_size: 64 * 1024 * 1024,
      protocol: 'tcp',
      master_server_address: this.master.rpc,
      ...overrides,
    };
  }

  /** GET on the master's management port, e.g. "/get_all_segments". */
  async admin(path: string): Promise<string> {
    const res = await controlFetch(`http://${this.master.metrics}${path}`);
    return res.text();
  }

  /** Sends SIGTERM to every process still running, SIGKILL after `graceMs`, and waits for all. */
  async stop(graceMs = 5000): Promise<void> {
    const running = this.all.filter((h) => h.proc.exitCode === null && h.proc.signalCode === null);
    // Services first, so they can unmount from a master that is still there.
    for (const h of running.filter((x) => x !== this.all[0])) h.proc.kill('SIGTERM');
    await Promise.all(running.filter((x) => x !== this.all[0]).map((h) => withKill(h, graceMs)));
    if (running.includes(this.all[0])) {
      this.all[0].proc.kill('SIGTERM');
      await withKill(this.all[0], graceMs);
    }
  }

  /** Synchronous last resort (process 'exit' handlers): SIGKILL everything still running. */
  killAllNow(): void {
    for (const h of this.all) if (h.proc.exitCode === null && h.proc.signalCode === null) h.proc.kill('SIGKILL');
  }
}

async function withKill(h: ProcessHandle, graceMs: number): Promise<void> {
  const t = setTimeout(() => h.proc.kill('SIGKILL'), graceMs);
  await h.exited;
  clearTimeout(t);
}
