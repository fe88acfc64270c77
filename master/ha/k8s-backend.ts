// Election backend on a Kubernetes coordination.k8s.io/v1 Lease:
// `--ha_backend_connstring=<namespace>/<lease-name>`. A thin adapter over the Lease lock shared
// with the operator (common/k8s-lease.ts: expiry by local observation, optimistic concurrency on
// resourceVersion). The leader's address is kept in the annotation store.kvcache.io/leader-address;
// while leading, the master labels its own pod store.kvcache.io/leader=true (POD_NAME/POD_NAMESPACE)
// so a Service selects it.
import { CoreV1Api, KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { K8sLease } from '../../common/k8s-lease.js';
import type { AcquireResult, ElectionBackend } from './election-backend.js';

export const LEADER_LABEL = 'store.kvcache.io/leader';
export const LEADER_ADDRESS_ANNOTATION = 'store.kvcache.io/leader-address';

export interface K8sBackendOptions {
  namespace: string;
  leaseName: string;
  /** holderIdentity: the pod name in a cluster. */
  identity: string;
  /** The pod to label while leading (absent outside a pod). */
  pod?: { name: string; namespace: string };
  kubeConfig?: KubeConfig;
  /** Monotonic clock (ms) for expiry observation; wall clock (ms) for renewTime. */
  monoNow: () => number;
  wallNow: () => number;
  log?: (line: string) => void;
}

export class K8sBackend implements ElectionBackend {
  readonly description: string;
  private readonly lease: K8sLease;
  private readonly core: CoreV1Api;

  constructor(private readonly o: K8sBackendOptions) {
    const kc = o.kubeConfig ?? new KubeConfig();
    if (!o.kubeConfig) kc.loadFromDefault();
    this.lease = new K8sLease({ namespace: o.namespace, name: o.leaseName, identity: o.identity, kubeConfig: kc, monoNow: o.monoNow, wallNow: o.wallNow });
    this.core = kc.makeApiClient(CoreV1Api);
    this.description = this.lease.description;
  }

  async tryAcquire(address: string, ttlMs: number): Promise<AcquireResult> {
    const r = await this.lease.tryAcquire(ttlMs, { [LEADER_ADDRESS_ANNOTATION]: address });
    return r.acquired ? { acquired: true } : { acquired: false, leader: r.annotations[LEADER_ADDRESS_ANNOTATION] };
  }

  renew(address: string, ttlMs: number): Promise<boolean> {
    return this.lease.renew(ttlMs, { [LEADER_ADDRESS_ANNOTATION]: address });
  }

  release(_address: string): Promise<void> {
    return this.lease.release([LEADER_ADDRESS_ANNOTATION]);
  }

  async readLeader(): Promise<string | undefined> {
    const lease = await this.lease.read();
    if (!lease?.spec?.holderIdentity) return undefined;
    return lease.metadata?.annotations?.[LEADER_ADDRESS_ANNOTATION];
  }

  /** Sets (true) or removes (false) the leader label on our own pod; no-op outside a pod. */
  async labelPod(leader: boolean): Promise<void> {
    const pod = this.o.pod;
    if (!pod) return;
    await this.core.patchNamespacedPod(
      { name: pod.name, namespace: pod.namespace, body: { metadata: { labels: { [LEADER_LABEL]: leader ? 'true' : null } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }

  async onElected(): Promise<void> {
    await this.labelPod(true);
  }

  async onDeposed(): Promise<void> {
    await this.labelPod(false);
  }

  async close(): Promise<void> {
    // HTTP clients of @kubernetes/client-node hold no persistent connection to close.
  }
}
