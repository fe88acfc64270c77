// Election backend on a Kubernetes coordination.k8s.io/v1 Lease (@kubernetes/client-node 1.3):
// `--ha_backend_connstring=<namespace>/<lease-name>`. Writes use optimistic concurrency on
// resourceVersion (409 = someone else wrote first = we lost). Holders' clocks are not trusted:
// a follower treats a lease as expired only after it has seen the same record unchanged for
// leaseDurationSeconds on its own monotonic clock. The leader's address is kept in the annotation
// store.kvcache.io/leader-address; while leading, the master labels its own pod
// store.kvcache.io/leader=true (POD_NAME/POD_NAMESPACE) so a Service selects it.
import {
  ApiException,
  CoordinationV1Api,
  CoreV1Api,
  KubeConfig,
  PatchStrategy,
  V1MicroTime,
  setHeaderOptions,
  type V1Lease,
} from '@kubernetes/client-node';
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

/** `<namespace>/<lease-name>` -> parts, with a clear error otherwise. */
export function parseLeaseRef(connstring: string): { namespace: string; leaseName: string } {
  const m = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-.a-z0-9]*[a-z0-9])?)$/.exec(connstring);
  if (!m) throw new Error(`--ha_backend_connstring=${connstring}: expected <namespace>/<lease-name> for --ha_backend_type=k8s (lowercase DNS names)`);
  return { namespace: m[1], leaseName: m[3] };
}

function statusOf(e: unknown): number | undefined {
  if (e instanceof ApiException) return e.code;
  const c = (e as { code?: unknown })?.code;
  return typeof c === 'number' ? c : undefined;
}

export class K8sBackend implements ElectionBackend {
  readonly description: string;
  private readonly leases: CoordinationV1Api;
  private readonly core: CoreV1Api;
  /** resourceVersion of our own last write while we hold the lease. */
  private ownVersion: string | undefined;
  /** The last foreign record seen and when (monotonic) it was first seen in that state. */
  private observed: { key: string; at: number } | undefined;

  constructor(private readonly o: K8sBackendOptions) {
    const kc = o.kubeConfig ?? new KubeConfig();
    if (!o.kubeConfig) kc.loadFromDefault();
    this.leases = kc.makeApiClient(CoordinationV1Api);
    this.core = kc.makeApiClient(CoreV1Api);
    this.description = `k8s Lease ${o.namespace}/${o.leaseName} as ${o.identity}`;
  }

  async tryAcquire(address: string, ttlMs: number): Promise<AcquireResult> {
    const seconds = Math.max(1, Math.ceil(ttlMs / 1000));
    let lease: V1Lease;
    try {
      lease = await this.leases.readNamespacedLease({ name: this.o.leaseName, namespace: this.o.namespace });
    } catch (e) {
      if (statusOf(e) !== 404) throw e;
      return this.create(address, seconds);
    }
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity ?? '';
    const leader = lease.metadata?.annotations?.[LEADER_ADDRESS_ANNOTATION];
    if (holder !== '' && holder !== this.o.identity) {
      // Expiry by observation: the record must stay unchanged for a whole lease duration.
      const key = `${holder}|${lease.metadata?.resourceVersion}`;
      const now = this.o.monoNow();
      if (!this.observed || this.observed.key !== key) this.observed = { key, at: now };
      const duration = (spec.leaseDurationSeconds ?? seconds) * 1000;
      if (now < this.observed.at + duration) return { acquired: false, leader };
    }
    const wall = new V1MicroTime(this.o.wallNow());
    const body: V1Lease = {
      ...lease,
      metadata: { ...lease.metadata, annotations: { ...(lease.metadata?.annotations ?? {}), [LEADER_ADDRESS_ANNOTATION]: address } },
      spec: {
        ...spec,
        holderIdentity: this.o.identity,
        leaseDurationSeconds: seconds,
        acquireTime: holder === this.o.identity ? spec.acquireTime : wall,
        renewTime: wall,
        leaseTransitions: holder === this.o.identity ? spec.leaseTransitions : (spec.leaseTransitions ?? 0) + 1,
      },
    };
    try {
      const out = await this.leases.replaceNamespacedLease({ name: this.o.leaseName, namespace: this.o.namespace, body });
      this.ownVersion = out.metadata?.resourceVersion;
      this.observed = undefined;
      return { acquired: true };
    } catch (e) {
      if (statusOf(e) === 409) return { acquired: false, leader };
      throw e;
    }
  }

  private async create(address: string, seconds: number): Promise<AcquireResult> {
    const wall = new V1MicroTime(this.o.wallNow());
    const body: V1Lease = {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: this.o.leaseName, namespace: this.o.namespace, annotations: { [LEADER_ADDRESS_ANNOTATION]: address } },
      spec: { holderIdentity: this.o.identity, leaseDurationSeconds: seconds, acquireTime: wall, renewTime: wall, leaseTransitions: 0 },
    };
    try {
      const out = await this.leases.createNamespacedLease({ namespace: this.o.namespace, body });
      this.ownVersion = out.metadata?.resourceVersion;
      return { acquired: true };
    } catch (e) {
      if (statusOf(e) === 409) return { acquired: false };
      throw e;
    }
  }

  async renew(address: string, ttlMs: number): Promise<boolean> {
    const lease = await this.leases.readNamespacedLease({ name: this.o.leaseName, namespace: this.o.namespace });
    if (lease.spec?.holderIdentity !== this.o.identity || lease.metadata?.resourceVersion !== this.ownVersion) {
      this.ownVersion = undefined;
      return false;
    }
    const body: V1Lease = {
      ...lease,
      metadata: { ...lease.metadata, annotations: { ...(lease.metadata?.annotations ?? {}), [LEADER_ADDRESS_ANNOTATION]: address } },
      spec: { ...lease.spec, leaseDurationSeconds: Math.max(1, Math.ceil(ttlMs / 1000)), renewTime: new V1MicroTime(this.o.wallNow()) },
    };
    try {
      const out = await this.leases.replaceNamespacedLease({ name: this.o.leaseName, namespace: this.o.namespace, body });
      this.ownVersion = out.metadata?.resourceVersion;
      return true;
    } catch (e) {
      if (statusOf(e) === 409) {
        this.ownVersion = undefined;
        return false;
      }
      throw e;
    }
  }

  async release(_address: string): Promise<void> {
    if (this.ownVersion === undefined) return;
    const version = this.ownVersion;
    this.ownVersion = undefined;
    const lease = await this.leases.readNamespacedLease({ name: this.o.leaseName, namespace: this.o.namespace });
    if (lease.spec?.holderIdentity !== this.o.identity || lease.metadata?.resourceVersion !== version) return;
    const annotations = { ...(lease.metadata?.annotations ?? {}) };
    delete annotations[LEADER_ADDRESS_ANNOTATION];
    const body: V1Lease = { ...lease, metadata: { ...lease.metadata, annotations }, spec: { ...lease.spec, holderIdentity: '', renewTime: new V1MicroTime(this.o.wallNow()) } };
    await this.leases.replaceNamespacedLease({ name: this.o.leaseName, namespace: this.o.namespace, body }).catch((e) => {
      if (statusOf(e) !== 409) throw e;
    });
  }

  async readLeader(): Promise<string | undefined> {
    try {
      const lease = await this.leases.readNamespacedLease({ name: this.o.leaseName, namespace: this.o.namespace });
      if (!lease.spec?.holderIdentity) return undefined;
      return lease.metadata?.annotations?.[LEADER_ADDRESS_ANNOTATION];
    } catch (e) {
      if (statusOf(e) === 404) return undefined;
      throw e;
    }
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
