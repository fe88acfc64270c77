// Election backend on a Kubernetes coordination.k8s.io/v1 Lease:
// `--ha_backend_connstring=<namespace>/<lease-name>`. A thin adapter over the Lease lock shared
// with the operator (common/k8s-lease.ts: expiry by local observation, optimistic concurrency on
// resourceVersion). The leader's address is kept in the annotation store.kvcache.io/leader-address;
// while leading, the master labels its own pod store.kvcache.io/leader=true (POD_NAME/POD_NAMESPACE)
// so a Service selects it. Records (putRecord) are annotations records.store.kvcache.io/<name> of a
// second Lease, <lease-name>-records, written with the resourceVersion just read (a 409 is read and
// tried again); a record's TTL is a wall-clock expiry in its value (the API server has no TTL).
import { CoordinationV1Api, CoreV1Api, KubeConfig, PatchStrategy, setHeaderOptions, type V1Lease } from '@kubernetes/client-node';
import { K8sLease, statusOf } from '../../common/k8s-lease.js';
import type { AcquireResult, ElectionBackend } from './election-backend.js';
import { LEADER_ADDRESS_ANNOTATION } from './lease-ref.js';

export const LEADER_LABEL = 'store.kvcache.io/leader';
export { LEADER_ADDRESS_ANNOTATION };
export const RECORD_ANNOTATION_PREFIX = 'records.store.kvcache.io/';
/** The Lease holding the records beside the leader Lease `leaseName`. */
export const recordsLeaseName = (leaseName: string): string => `${leaseName}-records`;
const RECORD_WRITE_ATTEMPTS = 5;

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
  private readonly coord: CoordinationV1Api;

  constructor(private readonly o: K8sBackendOptions) {
    const kc = o.kubeConfig ?? new KubeConfig();
    if (!o.kubeConfig) kc.loadFromDefault();
    this.lease = new K8sLease({ namespace: o.namespace, name: o.leaseName, identity: o.identity, kubeConfig: kc, monoNow: o.monoNow, wallNow: o.wallNow });
    this.core = kc.makeApiClient(CoreV1Api);
    this.coord = kc.makeApiClient(CoordinationV1Api);
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

  /** The leader's address while its claim stands by this process's observation (an expired holder: undefined). */
  async readLeader(): Promise<string | undefined> {
    const { lease, claim } = await this.lease.readClaim();
    if (claim.do !== 'wait' && claim.do !== 'renew') return undefined;
    return lease?.metadata?.annotations?.[LEADER_ADDRESS_ANNOTATION];
  }

  async putRecord(name: string, value: string, ttlMs?: number): Promise<void> {
    const { namespace } = this.o;
    const leaseName = recordsLeaseName(this.o.leaseName);
    const now = this.o.wallNow();
    const stored = JSON.stringify({ v: value, exp: ttlMs === undefined ? 0 : now + ttlMs });
    for (let i = 0; i < RECORD_WRITE_ATTEMPTS; i++) {
      const lease = await this.readRecordsLease();
      try {
        if (lease === undefined) {
          await this.coord.createNamespacedLease({
            namespace,
            body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: leaseName, namespace, annotations: { [RECORD_ANNOTATION_PREFIX + name]: stored } } },
          });
          return;
        }
        const annotations: Record<string, string> = {};
        for (const [k, v] of Object.entries(lease.metadata?.annotations ?? {}))
          if (!k.startsWith(RECORD_ANNOTATION_PREFIX) || parseStored(v, now) !== undefined) annotations[k] = v;
        annotations[RECORD_ANNOTATION_PREFIX + name] = stored;
        await this.coord.replaceNamespacedLease({ name: leaseName, namespace, body: { ...lease, metadata: { ...lease.metadata, annotations } } });
        return;
      } catch (e) {
        if (statusOf(e) !== 409) throw e; // 409: written meanwhile (or created): read again
      }
    }
    throw new Error(`Lease ${namespace}/${leaseName}: record ${name} not written (${RECORD_WRITE_ATTEMPTS} concurrent writes in a row)`);
  }

  /** Not atomic with the hold (two objects): checked by a read of the leader Lease just before (docs/ha.md). */
  async putLeaderRecord(name: string, value: string): Promise<void> {
    const lease = await this.lease.read();
    if (lease?.spec?.holderIdentity !== this.o.identity) throw new Error('not the holder of the leader Lease: record not written');
    await this.putRecord(name, value);
  }

  async readRecords(): Promise<Map<string, string>> {
    const lease = await this.readRecordsLease();
    const now = this.o.wallNow();
    const out = new Map<string, string>();
    for (const [k, v] of Object.entries(lease?.metadata?.annotations ?? {})) {
      if (!k.startsWith(RECORD_ANNOTATION_PREFIX)) continue;
      const value = parseStored(v, now);
      if (value !== undefined) out.set(k.slice(RECORD_ANNOTATION_PREFIX.length), value);
    }
    return out;
  }

  private async readRecordsLease(): Promise<V1Lease | undefined> {
    try {
      return await this.coord.readNamespacedLease({ name: recordsLeaseName(this.o.leaseName), namespace: this.o.namespace });
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

/** A stored record's value, or undefined when it expired or does not parse. */
function parseStored(stored: string, wallNow: number): string | undefined {
  try {
    const o = JSON.parse(stored) as { v?: unknown; exp?: unknown };
    if (typeof o.v !== 'string' || typeof o.exp !== 'number') return undefined;
    return o.exp === 0 || o.exp > wallNow ? o.v : undefined;
  } catch {
    return undefined;
  }
}
