// The master's k8s ElectionBackend (an adapter over the shared Lease lock) against the test API
// server: the leader's address travels in the Lease annotation, a follower learns it, a release
// withdraws it, and the leader label follows the election on the master's own pod.
import { KubeConfig } from '@kubernetes/client-node';
import { startKubeApiServer, type KubeApiServer } from '../../e2e/kube-apiserver/http-server.js';
import { kubeconfigYaml } from '../../e2e/kube-apiserver/kubeconfig.js';
import { K8sBackend, LEADER_ADDRESS_ANNOTATION, LEADER_LABEL } from './k8s-backend.js';

const NS = 'kv';
let server: KubeApiServer;
let kc: KubeConfig;
const post = async (path: string, body: object) => {
  const r = await fetch(`${server.url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  if (r.status !== 201) throw new Error(`POST ${path}: ${r.status}`);
};
const get = async (path: string) => (await fetch(`${server.url}${path}`)).json();

beforeAll(async () => {
  server = await startKubeApiServer();
  kc = new KubeConfig();
  kc.loadFromString(kubeconfigYaml(server.url, NS));
  await post('/api/v1/namespaces', { metadata: { name: NS } });
  for (const name of ['m-0', 'm-1']) await post(`/api/v1/namespaces/${NS}/pods`, { metadata: { name }, spec: { containers: [{ name: 'master', image: 'store:test' }] } });
});
afterAll(() => server.stop());

const backend = (pod: string) =>
  new K8sBackend({ namespace: NS, leaseName: 'leader', identity: pod, pod: { name: pod, namespace: NS }, kubeConfig: kc, monoNow: () => 0, wallNow: () => Date.now() });

describe('K8sBackend', () => {
  it('elects through the Lease, publishes the address, labels the pod, and releases', async () => {
    const a = backend('m-0');
    const b = backend('m-1');
    expect(await a.readLeader()).toBeUndefined();
    expect(await a.tryAcquire('10.0.0.1:50051', 5_000)).toEqual({ acquired: true });
    expect(await b.tryAcquire('10.0.0.2:50051', 5_000)).toEqual({ acquired: false, leader: '10.0.0.1:50051' });
    expect(await b.readLeader()).toBe('10.0.0.1:50051');
    expect(await a.renew('10.0.0.1:50051', 5_000)).toBe(true);
    expect(await b.renew('10.0.0.2:50051', 5_000)).toBe(false);

    await a.onElected();
    expect((await get(`/api/v1/namespaces/${NS}/pods/m-0`)).metadata.labels?.[LEADER_LABEL]).toBe('true');
    await a.onDeposed();
    expect((await get(`/api/v1/namespaces/${NS}/pods/m-0`)).metadata.labels?.[LEADER_LABEL]).toBeUndefined();

    await a.release('10.0.0.1:50051');
    const lease = await get(`/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/leader`);
    expect(lease.spec.holderIdentity).toBe('');
    expect(lease.metadata.annotations?.[LEADER_ADDRESS_ANNOTATION]).toBeUndefined();
    expect(await b.readLeader()).toBeUndefined();
    expect(await b.tryAcquire('10.0.0.2:50051', 5_000)).toEqual({ acquired: true });
    expect(await a.readLeader()).toBe('10.0.0.2:50051');
  });
});
