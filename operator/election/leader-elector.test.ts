// The operator's leader elector (timer shell) on the shared Lease lock against the test API
// server: one of two replicas leads, a leader that stops releases the Lease and the standby takes
// over without waiting out the lease, and a leader that cannot reach the API server stops leading
// at its renew deadline even though its claims never return an answer.
import type { KubeConfig } from '@kubernetes/client-node';
import { K8sLease } from '../../common/k8s-lease.js';
import { startKubeFixture, type KubeFixture } from '../testing/kube-fixture.js';
import { LeaderElector, type LeaseLock } from './leader-elector.js';

const NS = 'ops';
let fx: KubeFixture;
let kc: KubeConfig;
let server: KubeFixture['server'];

beforeAll(async () => {
  fx = await startKubeFixture(NS);
  ({ kc, server } = fx);
});
afterAll(() => fx.server.stop());

/** An elector whose leadership changes resolve promises a test can await. */
function replica(
  identity: string,
  lease: LeaseLock = new K8sLease({ namespace: NS, name: 'operator', identity, kubeConfig: kc, monoNow: () => performance.now(), wallNow: () => Date.now() }),
) {
  let started!: () => void;
  let stopped!: () => void;
  const startedP = new Promise<void>((r) => (started = r));
  const stoppedP = new Promise<void>((r) => (stopped = r));
  const elector = new LeaderElector({
    lease,
    leaseDurationMs: 60_000,
    renewDeadlineMs: 300,
    retryPeriodMs: 20,
    onStartedLeading: started,
    onStoppedLeading: stopped,
    log: () => undefined,
  });
  return { elector, started: startedP, stopped: stoppedP };
}

describe('LeaderElector', () => {
  it('one replica leads; on stop it releases the Lease and the standby takes over at once', async () => {
    const a = replica('a');
    a.elector.start();
    await a.started;
    const b = replica('b');
    b.elector.start();
    // b cannot take a's 60 s lease before a releases it.
    const lease = () => fetch(`${server.url}/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/operator`).then((r) => r.json());
    expect((await lease()).spec.holderIdentity).toBe('a');
    expect(b.elector.isLeader()).toBe(false);
    await a.elector.stop();
    await a.stopped;
    await b.started;
    expect((await lease()).spec).toMatchObject({ holderIdentity: 'b', leaseTransitions: 1 });
    await b.elector.stop();
  });

  it('stops leading at the renew deadline while its renewal hangs', async () => {
    let hang = false;
    const real = new K8sLease({ namespace: NS, name: 'hanging', identity: 'h', kubeConfig: kc, monoNow: () => performance.now(), wallNow: () => Date.now() });
    const lock: LeaseLock = {
      description: real.description,
      tryAcquire: (d, a) => real.tryAcquire(d, a),
      renew: (d, a) => (hang ? new Promise<boolean>(() => undefined) : real.renew(d, a)),
      release: (d) => real.release(d),
    };
    const h = replica('h', lock);
    h.elector.start();
    await h.started;
    hang = true;
    await h.stopped;
    expect(h.elector.isLeader()).toBe(false);
    await h.elector.stop();
  });
});
