// The shared Lease lock against the test API server over real HTTP, with virtual monotonic
// clocks: one of two candidates gets a free Lease, the other waits out the holder's duration as
// it observes it and then takes over (counting a transition), the deposed holder's renewal
// fails, a release lets a successor in at once, and annotations are published and withdrawn.
import { KubeConfig } from '@kubernetes/client-node';
import { startKubeFixture, type KubeFixture } from '../operator/testing/kube-fixture.js';
import { kubeconfigYaml } from '../e2e/kube-apiserver/kubeconfig.js';
import { K8sLease } from './k8s-lease.js';

const NS = 'ha';
let fx: KubeFixture;
let kc: KubeConfig;
let server: KubeFixture['server'];

beforeAll(async () => {
  fx = await startKubeFixture(NS);
  ({ kc, server } = fx);
});
afterAll(() => fx.server.stop());

/** A candidate with its own virtual monotonic clock. */
function candidate(identity: string, name: string) {
  const clock = { now: 0 };
  const lease = new K8sLease({ namespace: NS, name, identity, kubeConfig: kc, monoNow: () => clock.now, wallNow: () => 1_700_000_000_000 + clock.now });
  return { lease, clock };
}

const getLease = async (name: string) => (await fetch(`${server.url}/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/${name}`)).json();

describe('K8sLease', () => {
  it('gives a free Lease to exactly one of two concurrent candidates', async () => {
    const a = candidate('a', 'race');
    const b = candidate('b', 'race');
    const [ra, rb] = await Promise.all([a.lease.tryAcquire(10_000), b.lease.tryAcquire(10_000)]);
    expect([ra.acquired, rb.acquired].filter(Boolean)).toHaveLength(1);
    const lease = await getLease('race');
    expect(lease.spec.holderIdentity).toBe(ra.acquired ? 'a' : 'b');
    expect(lease.spec).toMatchObject({ leaseDurationSeconds: 10, leaseTransitions: 0 });
    expect(lease.spec.renewTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/); // MicroTime
  });

  it('lets a follower take over only after the holder stayed silent for the duration it observed', async () => {
    const a = candidate('a', 'takeover');
    const b = candidate('b', 'takeover');
    expect((await a.lease.tryAcquire(10_000, { addr: 'a:1' })).acquired).toBe(true);
    b.clock.now = 500;
    expect(await b.lease.tryAcquire(10_000)).toEqual({ acquired: false, holder: 'a', annotations: { addr: 'a:1' } });
    a.clock.now = 5_000;
    expect(await a.lease.renew(10_000, { addr: 'a:1' })).toBe(true); // a new record: b observes it afresh
    b.clock.now = 10_600;
    expect((await b.lease.tryAcquire(10_000)).acquired).toBe(false);
    b.clock.now = 20_600;
    expect((await b.lease.tryAcquire(10_000, { addr: 'b:1' })).acquired).toBe(true);
    expect((await getLease('takeover')).spec).toMatchObject({ holderIdentity: 'b', leaseTransitions: 1 });
    expect(await a.lease.renew(10_000)).toBe(false);
    expect((await getLease('takeover')).metadata.annotations).toEqual({ addr: 'b:1' });
  });

  it('a release frees the Lease at once and withdraws the given annotations', async () => {
    const a = candidate('a', 'release');
    const b = candidate('b', 'release');
    await a.lease.tryAcquire(10_000, { addr: 'a:1', keep: 'x' });
    await b.lease.release(['addr']); // not b's: nothing happens
    expect((await getLease('release')).spec.holderIdentity).toBe('a');
    await a.lease.release(['addr']);
    const released = await getLease('release');
    expect(released.spec).toMatchObject({ holderIdentity: '', leaseDurationSeconds: 1 });
    expect(released.metadata.annotations).toEqual({ keep: 'x' });
    expect((await b.lease.tryAcquire(10_000)).acquired).toBe(true);
    expect((await getLease('release')).spec.leaseTransitions).toBe(1);
  });

  it('reports a deleted Lease as lost on renew, and rejects when the server is unreachable', async () => {
    const a = candidate('a', 'gone');
    await a.lease.tryAcquire(10_000);
    await fetch(`${server.url}/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/gone`, { method: 'DELETE' });
    expect(await a.lease.renew(10_000)).toBe(false);
    const off = new KubeConfig();
    off.loadFromString(kubeconfigYaml('http://127.0.0.1:1', NS));
    const unreachable = new K8sLease({ namespace: NS, name: 'gone', identity: 'a', kubeConfig: off, monoNow: () => 0, wallNow: () => 0 });
    await expect(unreachable.tryAcquire(10_000)).rejects.toThrow();
  });
});
