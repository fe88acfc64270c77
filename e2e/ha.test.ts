// HA failover end to end: real etcd and redis-server processes (Debian packages) and the test
// Kubernetes API server, with several `node dist/master/main.js --enable_ha=true` processes on
// 127.0.0.1. Exactly one master leads (the others answer UNAVAILABLE_IN_CURRENT_STATUS); after
// the leader is SIGKILLed another takes over holding every object the standbys followed (served
// again once their owner remounts), clients' leader discovery follows, and the new leader asks
// known clients to remount. Run `npm run build` first.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { grpcAuthOptions } from '../common/grpc-auth.js';
import * as protoLoader from '@grpc/proto-loader';
import { Etcd3 } from 'etcd3';
import { resolveMasterAddress, watchLeader } from '../client/leader-discovery.js';
import { ErrorCode } from '../common/error-code.js';
import { masterProtoPath } from '../common/master-proto.js';
import { startKubeApiServer, type KubeApiServer } from './kube-apiserver/http-server.js';
import { writeKubeconfig } from './kube-apiserver/kubeconfig.js';
import { freePort } from './free-port.js';

const MAIN = join(process.cwd(), 'dist', 'master', 'main.js');
const CLIENT = '0b7e4c1d-2a3f-4e5d-9c8b-7a6f5e4d3c2b';
const have = (bin: string): boolean => spawnSync('sh', ['-c', `command -v ${bin}`]).status === 0;
const describeIf = (ok: boolean, why: string) => (ok ? describe : (name: string, fn: () => void) => describe.skip(`${name} (skipped: ${why})`, fn));

interface Proc {
  proc: ChildProcess;
  out: () => string;
  exited: Promise<number | null>;
}

/** Spawns a process and resolves once its combined output matches `ready`. */
function spawnUntil(cmd: string, args: string[], ready: RegExp, env?: NodeJS.ProcessEnv): Promise<Proc & { match: RegExpExecArray }> {
  const proc = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: env ?? process.env });
  let out = '';
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  return new Promise((resolve, reject) => {
    const onData = (d: Buffer): void => {
      out += d.toString();
      const m = ready.exec(out);
      if (m) resolve({ proc, out: () => out, exited, match: m });
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    void exited.then((code) => reject(new Error(`${cmd} exited with ${code} before it was ready:\n${out}`)));
  });
}

interface Master extends Proc {
  rpc: string;
  metrics: string;
}

async function startMaster(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<Master> {
  const p = await spawnUntil(
    process.execPath,
    [MAIN, '--enable_ha=true', '--rpc_address=127.0.0.1', '--rpc_port=0', '--metrics_port=0', ...args],
    /store_master listening: rpc=(\S+) metrics=(\S+)/,
    env,
  );
  return { ...p, rpc: p.match[1], metrics: `http://${p.match[2]}` };
}

async function kill(p: Proc, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill(signal);
  await p.exited;
}

type Unary = (req: object) => Promise<any>;
const def = protoLoader.loadSync(masterProtoPath(), { keepCase: true, longs: Number, enums: Number, defaults: true, oneofs: true });
const pkg = grpc.loadPackageDefinition(def) as any;
const grpcClients = new Map<string, any>();
function rpc(address: string, method: string): Unary {
  let c = grpcClients.get(address);
  if (!c) {
    c = new pkg.store.MasterService(address, grpc.credentials.createInsecure(), grpcAuthOptions());
    grpcClients.set(address, c);
  }
  return (req) => new Promise((res, rej) => c[method](req, { deadline: Date.now() + 5000 }, (e: Error | null, r: unknown) => (e ? rej(e) : res(r))));
}
const ping = (address: string) => rpc(address, 'Ping')({ client_id: CLIENT }) as Promise<{ status_code: number; view_version: number; need_remount: boolean }>;

/** Polls `probe` until it returns a value (not undefined); each attempt is a real round trip. */
async function until<T>(what: string, probe: () => Promise<T | undefined>, attempts = 300): Promise<T> {
  let last: unknown;
  for (let i = 0; i < attempts; i++) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`gave up waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
}

/** The one master whose Ping succeeds, after checking every other refuses with UNAVAILABLE_IN_CURRENT_STATUS. */
async function soleLeader(masters: Master[]): Promise<Master> {
  return until('exactly one serving master', async () => {
    const codes = await Promise.all(masters.map((m) => ping(m.rpc).then((r) => r.status_code)));
    const serving = masters.filter((_, i) => codes[i] === ErrorCode.OK);
    if (serving.length !== 1) return undefined;
    for (let i = 0; i < masters.length; i++) if (masters[i] !== serving[0]) expect(codes[i]).toBe(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);
    return serving[0];
  });
}

async function metricsText(m: Master): Promise<string> {
  return (await fetch(`${m.metrics}/metrics`)).text();
}

const tmp: string[] = [];
const procs: Proc[] = [];
afterAll(async () => {
  for (const c of grpcClients.values()) c.close();
  await Promise.all(procs.map((p) => kill(p)));
  for (const d of tmp) rmSync(d, { recursive: true, force: true });
});

type Segment = Record<string, unknown>;

/**
 * Once `standbys` standbys follow `leader` with the whole state (docs/ha.md "Standbys"), a client
 * mounts a segment and stores 20 objects through it (metadata only: no bytes here).
 */
async function storeObjects(leader: Master, standbys: number): Promise<{ seg: Segment; stored: Map<string, unknown> }> {
  await until('every standby synced', async () => ((await metricsText(leader)).match(new RegExp(`^store_master_standbys_synced ${standbys}$`, 'm')) ? true : undefined));
  const seg = { buffer: 1 << 20, size: 64 << 20, segment_name: 'seg-ha', client_id: CLIENT, te_endpoint: '127.0.0.1:20001', protocol: 'tcp', incarnation: 1 };
  expect((await rpc(leader.rpc, 'MountSegment')(seg)).status_code).toBe(ErrorCode.OK);
  const stored = new Map<string, unknown>();
  for (let i = 0; i < 20; i++) {
    const key = `ha-obj-${i}`;
    expect((await rpc(leader.rpc, 'PutStart')({ key, value_length: 1000 + i, slice_lengths: [1000 + i], config: { replica_num: 1 } })).status_code).toBe(ErrorCode.OK);
    expect((await rpc(leader.rpc, 'PutEnd')({ key, replica_type: 0 })).status_code).toBe(ErrorCode.OK);
    const r = await rpc(leader.rpc, 'GetReplicaList')({ key });
    stored.set(
      key,
      r.replica_list[0].handles.map((h: { buffer: number; size: number }) => [h.buffer, h.size]),
    );
  }
  return { seg, stored };
}

/** The new leader holds every object, served once the owner mounts its memory again (a new incarnation). */
async function checkObjects(leader: Master, seg: Segment, stored: Map<string, unknown>): Promise<void> {
  expect((await rpc(leader.rpc, 'GetReplicaList')({ key: 'ha-obj-0' })).status_code).not.toBe(ErrorCode.OK);
  expect((await rpc(leader.rpc, 'MountSegment')({ ...seg, incarnation: 2 })).status_code).toBe(ErrorCode.OK);
  for (const [key, handles] of stored) {
    const r = await rpc(leader.rpc, 'GetReplicaList')({ key });
    expect(r.status_code).toBe(ErrorCode.OK);
    expect(r.replica_list[0].handles.map((h: { buffer: number; size: number }) => [h.buffer, h.size])).toEqual(handles);
    expect(r.replica_list[0].handles[0].incarnation).toBe(2);
  }
}

/** The shared failover scenario: leader elected, killed, replaced (holding every object); discovery follows. */
async function failover(masters: Master[], discovery: string | undefined): Promise<void> {
  const first = await soleLeader(masters);
  expect(await metricsText(first)).toMatch(/^store_master_is_leader 1$/m);
  const follower = masters.find((m) => m !== first)!;
  expect(await metricsText(follower)).toMatch(/^store_master_is_leader 0$/m);
  expect(await (await fetch(`${follower.metrics}/health`)).text()).toBe('OK');
  expect(await (await fetch(`${follower.metrics}/metrics/summary`)).text()).toMatch(/ha_role: follower/);

  const { seg, stored } = await storeObjects(first, masters.length - 1);
  const before = await ping(first.rpc);
  expect(before).toMatchObject({ status_code: ErrorCode.OK, need_remount: false });
  expect((await rpc(follower.rpc, 'MountSegment')(seg)).status_code).toBe(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);

  let stopWatch = (): void => undefined;
  let followed: Promise<string> | undefined;
  if (discovery) {
    expect(await until('the leader key', async () => resolveMasterAddress(discovery, {}))).toBe(first.rpc);
    const seen: Array<string | undefined> = [];
    followed = new Promise((resolve) => {
      stopWatch = watchLeader(
        discovery,
        (leader) => {
          seen.push(leader);
          if (leader && leader !== first.rpc) resolve(leader);
        },
        { env: {}, intervalMs: 100 },
      );
    });
  }

  await kill(first);
  const rest = masters.filter((m) => m !== first);
  const second = await soleLeader(rest);
  expect(second).not.toBe(first);
  const after = await ping(second.rpc);
  // The new leader knows no client: remount, under a new view.
  expect(after.need_remount).toBe(true);
  expect(after.view_version).not.toBe(before.view_version);
  expect(await metricsText(second)).toMatch(/^store_master_is_leader 1$/m);
  await checkObjects(second, seg, stored);
  if (followed) {
    expect(await followed).toBe(second.rpc);
    expect(await resolveMasterAddress(discovery!, {})).toBe(second.rpc);
  }
  stopWatch();
}

describeIf(have('etcd') && existsSync(MAIN), 'etcd binary or dist/master/main.js missing (apt-get install etcd-server; npm run build)')('HA on etcd', () => {
  let endpoint = '';
  const masters: Master[] = [];

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ha-etcd-'));
    tmp.push(dir);
    const [client, peer] = [await freePort(), await freePort()];
    endpoint = `127.0.0.1:${client}`;
    const etcd = await spawnUntil(
      'etcd',
      [
        '--name=ha-test',
        `--data-dir=${dir}`,
        `--listen-client-urls=http://${endpoint}`,
        `--advertise-client-urls=http://${endpoint}`,
        `--listen-peer-urls=http://127.0.0.1:${peer}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${peer}`,
        `--initial-cluster=ha-test=http://127.0.0.1:${peer}`,
      ],
      /ready to serve client requests/,
    );
    procs.push(etcd);
    for (let i = 0; i < 3; i++) {
      const m = await startMaster([`--etcd_endpoints=${endpoint}`, '--cluster_id=ha_etcd']);
      procs.push(m);
      masters.push(m);
    }
  }, 30_000);

  it('elects one leader among three, fails over after SIGKILL, and discovery follows', async () => {
    await failover(masters, `etcd://${endpoint}/ha_etcd`);
  }, 40_000);

  it('a SIGTERMed leader releases the key so a follower takes over', async () => {
    const alive = masters.filter((m) => m.proc.exitCode === null && m.proc.signalCode === null);
    const leader = await soleLeader(alive);
    await kill(leader, 'SIGTERM');
    const next = await soleLeader(alive.filter((m) => m !== leader));
    expect(await resolveMasterAddress(`etcd://${endpoint}`, { MC_STORE_CLUSTER_ID: 'ha_etcd' })).toBe(next.rpc);
  }, 30_000);

  it('a leader whose key is deleted behind its back steps down and a new term begins', async () => {
    const alive = masters.filter((m) => m.proc.exitCode === null && m.proc.signalCode === null);
    const leader = await soleLeader(alive);
    const before = await ping(leader.rpc);
    const etcd = new Etcd3({ hosts: `http://${endpoint}` });
    try {
      await etcd.delete().key('/ha_etcd/master/leader');
    } finally {
      etcd.close();
    }
    // The next renewal notices; the (only) candidate is elected again under a new view.
    const after = await until('a new term', async () => {
      const r = await ping(leader.rpc);
      return r.status_code === ErrorCode.OK && r.view_version !== before.view_version ? r : undefined;
    });
    expect(after.need_remount).toBe(true);
  }, 30_000);
});

describeIf(have('redis-server') && existsSync(MAIN), 'redis-server binary or dist/master/main.js missing (apt-get install redis-server; npm run build)')('HA on Redis', () => {
  let url = '';
  const masters: Master[] = [];

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ha-redis-'));
    tmp.push(dir);
    const port = await freePort();
    url = `redis://127.0.0.1:${port}`;
    const redis = await spawnUntil(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
      /Ready to accept connections/,
    );
    procs.push(redis);
    for (let i = 0; i < 2; i++) {
      const m = await startMaster(['--ha_backend_type=redis', `--ha_backend_connstring=${url}`, '--cluster_id=ha_redis']);
      procs.push(m);
      masters.push(m);
    }
  }, 30_000);

  it('elects one leader among two, fails over after SIGKILL, and discovery follows', async () => {
    await failover(masters, `${url}/ha_redis`);
  }, 40_000);
});

describeIf(existsSync(MAIN), 'dist/master/main.js missing (npm run build)')('HA on a Kubernetes Lease', () => {
  let server: KubeApiServer;
  const masters: Master[] = [];
  const pods = ['store-master-0', 'store-master-1'];

  const getJson = async (path: string): Promise<any> => {
    const r = await fetch(`${server.url}${path}`);
    if (r.status !== 200) throw new Error(`GET ${path}: ${r.status} ${await r.text()}`);
    return r.json();
  };

  beforeAll(async () => {
    server = await startKubeApiServer();
    const dir = mkdtempSync(join(tmpdir(), 'ha-k8s-'));
    tmp.push(dir);
    const kubeconfig = writeKubeconfig(join(dir, 'kubeconfig'), server.url, 'kv');
    const post = async (path: string, body: object): Promise<void> => {
      const r = await fetch(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      if (r.status >= 300) throw new Error(`POST ${path}: ${r.status} ${await r.text()}`);
    };
    await post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'kv' } });
    for (const name of pods) {
      await post('/api/v1/namespaces/kv/pods', {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, labels: { app: 'store-master' } },
        spec: { containers: [{ name: 'master', image: 'store:test' }] },
      });
    }
    for (const name of pods) {
      const env = { ...process.env, KUBECONFIG: kubeconfig, POD_NAME: name, POD_NAMESPACE: 'kv' };
      const m = await startMaster(['--ha_backend_type=k8s', '--ha_backend_connstring=kv/store-master-leader'], env);
      procs.push(m);
      masters.push(m);
    }
  }, 30_000);

  afterAll(async () => {
    await Promise.all(masters.map((m) => kill(m)));
    await server?.stop();
  });

  const leaderLabel = async (pod: string): Promise<string | undefined> => (await getJson(`/api/v1/namespaces/kv/pods/${pod}`)).metadata.labels?.['store.kvcache.io/leader'];

  it('elects through the Lease, labels the leader pod, and hands over after SIGKILL', async () => {
    const first = await soleLeader(masters);
    const firstPod = pods[masters.indexOf(first)];
    const otherPod = pods.find((p) => p !== firstPod)!;
    const lease = await getJson('/apis/coordination.k8s.io/v1/namespaces/kv/leases/store-master-leader');
    expect(lease.spec.holderIdentity).toBe(firstPod);
    expect(lease.metadata.annotations['store.kvcache.io/leader-address']).toBe(first.rpc);
    await until('the leader label on the leader pod', async () => ((await leaderLabel(firstPod)) === 'true' ? true : undefined));
    expect(await leaderLabel(otherPod)).toBeUndefined();
    const { seg, stored } = await storeObjects(first, 1);

    await kill(first);
    const second = await soleLeader(masters.filter((m) => m !== first));
    expect(pods[masters.indexOf(second)]).toBe(otherPod);
    await checkObjects(second, seg, stored);
    await until('the leader label on the new leader pod', async () => ((await leaderLabel(otherPod)) === 'true' ? true : undefined));
    const after = await getJson('/apis/coordination.k8s.io/v1/namespaces/kv/leases/store-master-leader');
    expect(after.spec.holderIdentity).toBe(otherPod);
    expect(after.spec.leaseTransitions).toBeGreaterThanOrEqual(1);

    // A graceful stop removes the label and frees the Lease.
    await kill(second, 'SIGTERM');
    expect(await leaderLabel(otherPod)).toBeUndefined();
    expect((await getJson('/apis/coordination.k8s.io/v1/namespaces/kv/leases/store-master-leader')).spec.holderIdentity ?? '').toBe('');
  }, 40_000);
});

describeIf(existsSync(MAIN), 'dist/master/main.js missing (npm run build)')('HA flags', () => {
  it('refuses to advertise 0.0.0.0 in HA mode', async () => {
    const r = spawnSync(process.execPath, [MAIN, '--enable_ha=true', '--rpc_address=0.0.0.0', '--rpc_port=0', '--metrics_port=0', '--etcd_endpoints=127.0.0.1:1'], {
      encoding: 'utf8',
      env: { ...process.env, POD_IP: '' },
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--rpc_address=0.0.0.0 cannot be advertised in HA mode/);
  });
});
