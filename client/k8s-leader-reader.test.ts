// Client leader discovery on a Kubernetes Lease (k8s://[namespace/]lease-name) against the test
// API server, with the masters' own backend (master/ha/k8s-backend.ts) holding the Lease: the
// address is read while the holder's claim stands, not once it is released or has run out on the
// reader's clock, the namespace defaults as documented, and watchLeader follows a takeover (at the
// hurried period while the caller says its master is unreachable).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { startKubeApiServer, type KubeApiServer } from '../e2e/kube-apiserver/http-server.js';
import { writeKubeconfig } from '../e2e/kube-apiserver/kubeconfig.js';
import { ErrorCode } from '../common/error-code.js';
import { K8sBackend } from '../master/ha/k8s-backend.js';
import { openK8sLeaderReader } from './k8s-leader-reader.js';
import { parseMasterAddress, resolveMasterAddress, watchLeader } from './leader-discovery.js';

const NS = 'kv';
let server: KubeApiServer;
let dir: string;
let env: Record<string, string>;
let kc: KubeConfig;

beforeAll(async () => {
  server = await startKubeApiServer();
  dir = mkdtempSync(join(tmpdir(), 'k8s-leader-reader-'));
  env = { KUBECONFIG: writeKubeconfig(join(dir, 'kubeconfig'), server.url, NS) };
  kc = new KubeConfig();
  kc.loadFromFile(env.KUBECONFIG);
  const r = await fetch(`${server.url}/api/v1/namespaces`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ metadata: { name: NS } }) });
  expect(r.status).toBe(201);
});
afterAll(async () => {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** A master's backend on Lease kv/<lease> (no pod to label). */
const master = (lease: string, identity: string) =>
  new K8sBackend({ namespace: NS, leaseName: lease, identity, kubeConfig: kc, monoNow: () => performance.now(), wallNow: Date.now });

const failure = async (p: Promise<unknown>): Promise<{ code: number; message: string }> => {
  try {
    await p;
  } catch (e) {
    return { code: (e as { code: number }).code, message: (e as Error).message };
  }
  throw new Error('no error');
};

describe('parseMasterAddress k8s://', () => {
  it('takes [namespace/]lease-name', () => {
    expect(parseMasterAddress('k8s://kv/prod-master-leader', {})).toEqual({ kind: 'k8s', namespace: 'kv', leaseName: 'prod-master-leader' });
    expect(parseMasterAddress('k8s://prod-master-leader', {})).toEqual({ kind: 'k8s', namespace: undefined, leaseName: 'prod-master-leader' });
  });

  it('rejects malformed names with INVALID_PARAMS and the reason', () => {
    const why = (a: string) => {
      try {
        parseMasterAddress(a, {});
      } catch (e) {
        expect((e as { code: number }).code).toBe(ErrorCode.INVALID_PARAMS);
        return (e as Error).message;
      }
      throw new Error('no error');
    };
    expect(why('k8s://')).toMatch(/expected k8s:\/\/\[namespace\/\]lease-name/);
    expect(why('k8s://a/b/c')).toMatch(/expected k8s:\/\/\[namespace\/\]lease-name/);
    expect(why('k8s://KV/lease')).toMatch(/namespace "KV" is not a lowercase DNS label/);
    expect(why('k8s://kv/Lease_1')).toMatch(/lease name "Lease_1" is not a lowercase DNS name/);
  });
});

describe('k8s leader discovery', () => {
  it('reads the holder address; none before election, after release, or in another namespace', async () => {
    const none = await failure(resolveMasterAddress('k8s://kv/one', env));
    expect(none.code).toBe(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);
    expect(none.message).toMatch(/no master leader elected yet \(k8s Lease kv\/one names none\)/);

    const m0 = master('one', 'm-0');
    expect(await m0.tryAcquire('10.0.0.5:50051', 5000)).toEqual({ acquired: true });
    expect(await resolveMasterAddress('k8s://kv/one', env)).toBe('10.0.0.5:50051');
    // No namespace: the kubeconfig context's (kv), unless POD_NAMESPACE names another.
    expect(await resolveMasterAddress('k8s://one', env)).toBe('10.0.0.5:50051');
    expect((await failure(resolveMasterAddress('k8s://one', { ...env, POD_NAMESPACE: 'elsewhere' }))).code).toBe(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);

    await m0.release('10.0.0.5:50051');
    expect((await failure(resolveMasterAddress('k8s://kv/one', env))).code).toBe(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS);
  });

  it('stops believing a holder whose Lease stays unchanged for its duration on the reader clock', async () => {
    const m0 = master('two', 'm-0');
    expect(await m0.tryAcquire('10.0.0.6:50051', 2000)).toEqual({ acquired: true });
    let now = 0;
    const reader = openK8sLeaderReader({ namespace: NS, leaseName: 'two' }, env, () => now);
    expect(await reader.read()).toBe('10.0.0.6:50051');
    now = 1999;
    expect(await reader.read()).toBe('10.0.0.6:50051');
    now = 2000; // 2 s seen unchanged: the holder is dead as far as anybody may assume
    expect(await reader.read()).toBeUndefined();
    expect(await m0.renew('10.0.0.6:50051', 2000)).toBe(true); // a renewal is a new observation
    expect(await reader.read()).toBe('10.0.0.6:50051');
  });

  it('watchLeader follows a takeover, polling at the hurried period while asked to', async () => {
    const [m0, m1] = [master('three', 'm-0'), master('three', 'm-1')];
    expect(await m0.tryAcquire('10.0.0.7:50051', 5000)).toEqual({ acquired: true });
    const seen: (string | undefined)[] = [];
    let notify: () => void = () => undefined;
    const changed = () => new Promise<void>((r) => (notify = r));
    let first = changed();
    // A regular period far beyond the test's limit: only the hurried one can report the takeover.
    const stop = watchLeader('k8s://kv/three', (l) => (seen.push(l), notify()), { env, intervalMs: 3_600_000, hurry: () => seen.length > 0, hurryIntervalMs: 20 });
    try {
      await first;
      first = changed();
      await m0.release('10.0.0.7:50051');
      expect(await m1.tryAcquire('10.0.0.8:50051', 5000)).toEqual({ acquired: true });
      while (seen[seen.length - 1] !== '10.0.0.8:50051') {
        await first;
        first = changed();
      }
      expect(seen[0]).toBe('10.0.0.7:50051');
      expect(seen.filter((l) => l !== undefined)).toEqual(['10.0.0.7:50051', '10.0.0.8:50051']);
    } finally {
      stop();
    }
  });
});
